//! `oxrelax serve`: an OpenAI-compatible HTTP server over a model (an artifact, or a
//! Hugging Face folder compiled now).

use crate::cli_generate::{open_engine, ModelArgs};
use clap::Args;
use oxrelax::serve::{run as run_server, ServeOptions};
use oxrelax_runtime::cli::{CliResult, SamplingArgs, SamplingDefaults};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Arguments of `oxrelax serve`.
#[derive(Args)]
pub struct ServeCommand {
    /// The model: a compiled artifact or a Hugging Face folder. Its folder name is the
    /// model id requests name.
    model: PathBuf,
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// The port to listen on (0: any free port; the one bound is printed).
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// Requests that may wait for the engine; more are answered 503 at once.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    queue: u32,
    /// The largest request body accepted, in bytes (413 above).
    #[arg(long, default_value_t = 1 << 20)]
    max_body: usize,
    /// Seconds the requests in flight may take to finish after SIGTERM or Ctrl-C; then
    /// they are cancelled.
    #[arg(long, default_value_t = 10.0, value_parser = parse_seconds)]
    shutdown_grace: f64,
    /// Defaults of the sampling fields a request leaves out (by default the model's
    /// generation_config.json, as transformers reads it).
    #[command(flatten)]
    sampling: SamplingArgs,
    #[command(flatten)]
    load: ModelArgs,
}

/// The id of the model at `path`: its folder's name.
fn model_id(path: &Path) -> String {
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    path.file_name().map_or_else(
        || "model".to_string(),
        |name| name.to_string_lossy().into_owned(),
    )
}

/// A number of seconds: finite and >= 0.
fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(seconds) if seconds.is_finite() && seconds >= 0.0 => Ok(seconds),
        _ => Err(format!("`{text}` is not a number of seconds >= 0")),
    }
}

/// Runs `oxrelax serve`.
pub fn run(args: &ServeCommand) -> CliResult<()> {
    let sampling = args.sampling.config(&args.model, SamplingDefaults::Model)?;
    let options = ServeOptions {
        host: args.host.clone(),
        port: args.port,
        queue: usize::try_from(args.queue)?,
        max_body: args.max_body,
        sampling,
        model_id: model_id(&args.model),
        shutdown_grace: Duration::from_secs_f64(args.shutdown_grace),
    };
    let engine = open_engine(&args.model, &args.load)?;
    Ok(run_server(options, engine)?)
}
