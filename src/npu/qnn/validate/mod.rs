//! The structural validator of an `npu/` folder (`oxrelax qnn-validate`): before a QNN
//! context is built on a device, check that `model_net.json` and `model.bin` are what
//! QNN's op definitions and the runtime expect. Every rule of [`RULES`] runs and every
//! violation is collected; the op set it knows is [`OPS`].

mod context;
mod data;
mod ops;
mod quant;
mod report;
mod rules;
mod shapes;
#[cfg(test)]
mod tests;

pub use ops::{op_spec, InputSpec, OpSpec, ParamKind, ParamSpec, OPS};
pub use report::{Report, ValidateError, Violation};
pub use rules::{Rule, RULES};
pub use shapes::NodeView;

use context::{Ctx, Findings};
use oxrelax_runtime::qnn::bin::{read_bin, BIN_FILE};
use oxrelax_runtime::qnn::net::NET_FILE;
use oxrelax_runtime::qnn::NetFile;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The default budget of one context's static bytes (rule `context-budget`): 2 GiB. A
/// model whose NPU weights exceed it needs a larger budget or several contexts.
pub const DEFAULT_CONTEXT_BUDGET: u64 = 2 << 30;

/// The default bound on `model.bin`'s entries when reading it (4 GiB): a corrupt size in
/// the archive is an error, not an allocation of that size.
pub const DEFAULT_MAX_BIN_BYTES: u64 = 4 << 30;

/// The validator's limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidateOptions {
    /// Most static bytes a context may hold (rule `context-budget`).
    pub context_budget: u64,
    /// Most bytes `model.bin`'s entries may announce before reading fails.
    pub max_bin_bytes: u64,
}

impl Default for ValidateOptions {
    fn default() -> Self {
        ValidateOptions {
            context_budget: DEFAULT_CONTEXT_BUDGET,
            max_bin_bytes: DEFAULT_MAX_BIN_BYTES,
        }
    }
}

/// Runs every rule on `net` and its static data `bin` (tensor name -> bytes).
pub fn validate(
    net: &NetFile,
    bin: &BTreeMap<String, Vec<u8>>,
    options: &ValidateOptions,
) -> Report {
    let ctx = Ctx::new(net, bin, options);
    let mut violations = Vec::new();
    for rule in RULES {
        (rule.check)(&ctx, &mut Findings::new(rule.name, &mut violations));
    }
    Report {
        graphs: net.graphs.len(),
        nodes: net.graph.nodes.len(),
        tensors: net.graph.tensors.len(),
        static_bytes: data::static_bytes(&ctx),
        violations,
    }
}

/// The `npu/` folder of `dir`: `dir/npu` when `dir` is an artifact folder holding one,
/// else `dir` itself.
pub fn npu_dir(dir: &Path) -> PathBuf {
    let inner = dir.join("npu");
    if inner.join(NET_FILE).is_file() {
        inner
    } else {
        dir.to_path_buf()
    }
}

/// Reads `model_net.json` and `model.bin` of `dir` (an artifact folder or its `npu/`
/// folder) and validates them.
pub fn validate_dir(dir: &Path, options: &ValidateOptions) -> Result<Report, ValidateError> {
    let npu = npu_dir(dir);
    let net_path = npu.join(NET_FILE);
    let text =
        oxrelax_runtime::files::read_text(&net_path).map_err(|source| ValidateError::Read {
            path: net_path.clone(),
            source,
        })?;
    let net: NetFile = serde_json::from_str(&text).map_err(|source| ValidateError::Json {
        path: net_path,
        source,
    })?;
    let bin_path = npu.join(BIN_FILE);
    let file = std::fs::File::open(&bin_path).map_err(|source| ValidateError::Read {
        path: bin_path.clone(),
        source,
    })?;
    let bin = read_bin(std::io::BufReader::new(file), options.max_bin_bytes).map_err(|source| {
        ValidateError::Bin {
            path: bin_path,
            source,
        }
    })?;
    Ok(validate(&net, &bin, options))
}
