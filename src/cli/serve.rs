//! `oxrelax serve`: an OpenAI-compatible HTTP server over a model (an artifact, or a
//! Hugging Face folder compiled now).

use crate::cli::generate::{open_engine_on, ModelArgs};
use clap::Args;
use oxrelax::serve::{run as run_server, ServeOptions, Timeouts};
use oxrelax_runtime::cli::{CliResult, SamplingArgs, SamplingDefaults};
use oxrelax_runtime::kv_cache::PoolSize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Arguments of `oxrelax serve`.
#[derive(Args)]
pub struct ServeCommand {
    /// The model: a compiled artifact, a Hugging Face folder or a GGUF file. Its folder
    /// or file name is the model id requests name.
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
    /// Requests decoded together at most (continuous batching); default: as many as the
    /// model's `batch_decode` takes (its compile-time --max-batch).
    #[arg(long)]
    max_batch: Option<u32>,
    /// KV cache pages the requests share (default: room for --max-batch requests at the
    /// full context, or as many pages as --max-memory leaves besides the model when
    /// fewer, as long as that holds one full context). A request waits until the pages
    /// its prompt and max_tokens may fill are free; ended requests' pages are kept for
    /// their prefixes until needed.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), conflicts_with = "kv_memory")]
    kv_pages: Option<u32>,
    /// The KV cache pages' memory instead of their number: bytes with an optional K, M,
    /// G or T suffix (powers of 1024), e.g. `2G`.
    #[arg(long, value_parser = parse_kv_memory)]
    kv_memory: Option<u64>,
    /// The largest request body accepted, in bytes (413 above, at once when the
    /// Content-Length says so).
    #[arg(long, default_value_t = 1 << 20)]
    max_body: usize,
    /// Seconds the requests in flight may take to finish after SIGTERM or Ctrl-C; then
    /// streams end with an error event and `[DONE]`, and waiting requests get a 503.
    #[arg(long, default_value = "10", value_parser = parse_seconds)]
    shutdown_grace: Duration,
    /// Seconds a connection may take to send a request's headers, counted from when it
    /// connects or its previous response ends (so also how long an idle keep-alive
    /// connection stays open).
    #[arg(long, default_value = "30", value_parser = parse_seconds)]
    header_timeout: Duration,
    /// Seconds a request may take to send its body once its headers are in (408 after).
    #[arg(long, default_value = "30", value_parser = parse_seconds)]
    body_timeout: Duration,
    /// Defaults of the sampling fields a request leaves out (by default the model's
    /// generation_config.json, as transformers reads it).
    #[command(flatten)]
    sampling: SamplingArgs,
    #[command(flatten)]
    load: ModelArgs,
}

/// A flag's value that is not a number of seconds a [`Duration`] can hold.
#[derive(Debug, thiserror::Error)]
#[error("`{text}` is not a number of seconds >= 0 that fits a duration ({reason})")]
struct InvalidSeconds {
    /// The value as given.
    text: String,
    /// Why not (not a number, negative, NaN, too large).
    reason: String,
}

/// The id of the model at `path`: its folder's (or GGUF file's) name.
fn model_id(path: &Path) -> String {
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    path.file_name().map_or_else(
        || "model".to_string(),
        |name| name.to_string_lossy().into_owned(),
    )
}

/// A number of seconds: >= 0, not NaN, and small enough for a [`Duration`].
fn parse_seconds(text: &str) -> Result<Duration, InvalidSeconds> {
    let invalid = |reason: String| InvalidSeconds {
        text: text.to_string(),
        reason,
    };
    let seconds: f64 = text.parse().map_err(|e| invalid(format!("{e}")))?;
    Duration::try_from_secs_f64(seconds).map_err(|e| invalid(e.to_string()))
}

/// `--kv-memory`'s bytes.
fn parse_kv_memory(text: &str) -> Result<u64, oxrelax_runtime::memory::MemoryError> {
    oxrelax_runtime::memory::parse_size(text)
}

/// Runs `oxrelax serve`.
pub fn run(args: &ServeCommand) -> CliResult<()> {
    let sampling = args.sampling.config(&args.model, SamplingDefaults::Model)?;
    let options = ServeOptions {
        host: args.host.clone(),
        port: args.port,
        queue: usize::try_from(args.queue)?,
        max_batch: args.max_batch.map_or(Ok(0), usize::try_from)?,
        kv_pages: match (args.kv_pages, args.kv_memory) {
            (Some(pages), _) => Some(PoolSize::Pages(usize::try_from(pages)?)),
            (None, Some(bytes)) => Some(PoolSize::Bytes(bytes)),
            (None, None) => None,
        },
        max_memory: args.load.max_memory(),
        max_body: args.max_body,
        sampling,
        model_id: model_id(&args.model),
        timeouts: Timeouts {
            shutdown_grace: args.shutdown_grace,
            header: args.header_timeout,
            body: args.body_timeout,
        },
    };
    let (engine, memory) = open_engine_on(&args.model, &args.load, args.load.pool()?)?;
    Ok(run_server(options, engine, memory)?)
}

#[cfg(test)]
mod tests {
    use super::parse_seconds;
    use std::time::Duration;

    #[test]
    fn seconds_must_fit_a_duration() {
        assert_eq!(parse_seconds("0.25").unwrap(), Duration::from_millis(250));
        for bad in ["1e20", "-1", "NaN", "inf", "ten"] {
            let error = parse_seconds(bad).unwrap_err().to_string();
            assert!(error.contains(bad), "{error}");
        }
    }
}
