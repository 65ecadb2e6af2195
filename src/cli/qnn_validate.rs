//! `oxrelax qnn-validate`: the structural checks of an artifact's `npu/` folder.

use oxrelax::npu::qnn::validate::{validate_dir, ValidateOptions};
use std::path::PathBuf;

/// Arguments of `oxrelax qnn-validate`.
#[derive(clap::Args)]
pub struct QnnValidateArgs {
    /// An artifact folder with an `npu/` folder, or the `npu/` folder itself.
    dir: PathBuf,
    /// Print the report as one JSON line instead of a summary and one line per violation.
    #[arg(long)]
    json: bool,
}

/// Validates the folder and prints the report; any violation makes it an error.
pub fn run(args: &QnnValidateArgs) -> Result<(), Box<dyn std::error::Error>> {
    let report = validate_dir(&args.dir, &ValidateOptions::default())?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!("{}: {}", args.dir.display(), report.summary());
        for violation in &report.violations {
            println!("{violation}");
        }
    }
    match report.violations.len() {
        0 => Ok(()),
        count => Err(format!("{}: {count} violation(s)", args.dir.display()).into()),
    }
}
