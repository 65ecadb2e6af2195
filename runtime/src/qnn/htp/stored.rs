//! Context binaries in an artifact's `npu/` folder: `context-<SOC>.bin` (what the SoC's
//! HTP loads) beside `context-<SOC>.json` ([`BinaryRecord`]: the SoC's QNN code, the
//! library build that wrote it, and the ids of every graph's app tensors), written at
//! compile time and opened to run the graphs.

use super::backend::HtpBackend;
use super::context::{BinaryRecord, HtpContext, ValidateOps};
use super::error::HtpError;
use super::library::{library_dir, QnnLibrary};
use crate::qnn::net::{NetFile, NET_FILE};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// The largest context binary opened (beyond it the file is refused, not read).
pub const BINARY_LIMIT: u64 = 16 << 30;

/// The context binary's file name for `soc` inside `npu/`.
pub fn binary_file(soc: &str) -> String {
    format!("context-{soc}.bin")
}

/// The record's file name for `soc` inside `npu/`.
pub fn record_file(soc: &str) -> String {
    format!("context-{soc}.json")
}

/// Builds `net`'s graphs (static data `bin`) for SoC `soc` (QNN code `soc_model`) with
/// the library in `lib_dir` (or [`super::LIB_DIR_ENV`]'s), every op validated by the
/// backend, and writes the context binary and its record into `npu_dir`. Returns the two
/// file names.
pub fn write_context_binary(
    npu_dir: &Path,
    soc: &str,
    soc_model: u32,
    net: &NetFile,
    bin: &BTreeMap<String, Vec<u8>>,
    lib_dir: Option<&Path>,
) -> Result<[String; 2], HtpError> {
    let library = QnnLibrary::load_htp(&library_dir(lib_dir)?)?;
    let backend = HtpBackend::open(library, soc, soc_model)?;
    let context = HtpContext::build(
        backend.clone(),
        Arc::new(net.clone()),
        bin,
        ValidateOps::Yes,
    )?;
    let binary = context.binary()?;
    let record = BinaryRecord {
        soc: soc.to_string(),
        soc_model,
        qnn_build: backend.build_id(),
        tensor_ids: context.tensor_ids().clone(),
    };
    let files = [binary_file(soc), record_file(soc)];
    let write = |name: &str, bytes: &[u8]| {
        let path = npu_dir.join(name);
        std::fs::write(&path, bytes).map_err(|e| HtpError::ContextBinary {
            path,
            reason: e.to_string(),
        })
    };
    write(&files[0], &binary)?;
    let mut json = serde_json::to_vec_pretty(&record).unwrap_or_default();
    json.push(b'\n');
    write(&files[1], &json)?;
    Ok(files)
}

/// Opens the graphs of the `npu/` folder `npu_dir` from its context binary for `soc`,
/// on a device of that SoC of the library in `lib_dir` (or [`super::LIB_DIR_ENV`]'s).
pub fn open_context_binary(
    npu_dir: &Path,
    soc: &str,
    lib_dir: Option<&Path>,
) -> Result<HtpContext, HtpError> {
    let read = |name: &str, limit: u64| {
        let path = npu_dir.join(name);
        crate::files::read_capped(&path, limit).map_err(|e| HtpError::ContextBinary {
            path,
            reason: e.to_string(),
        })
    };
    let limit = crate::files::TEXT_FILE_LIMIT;
    let net: NetFile = parse(npu_dir, NET_FILE, &read(NET_FILE, limit)?)?;
    let record_name = record_file(soc);
    let record: BinaryRecord = parse(npu_dir, &record_name, &read(&record_name, limit)?)?;
    if !record.soc.eq_ignore_ascii_case(soc) {
        return Err(HtpError::ContextBinary {
            path: npu_dir.join(&record_name),
            reason: format!("records SoC {}, not {soc}", record.soc),
        });
    }
    let binary = read(&binary_file(soc), BINARY_LIMIT)?;
    let library = QnnLibrary::load_htp(&library_dir(lib_dir)?)?;
    let backend = HtpBackend::open(library, &record.soc, record.soc_model)?;
    HtpContext::from_binary(backend, Arc::new(net), &binary, record.tensor_ids).map_err(|e| match e
    {
        HtpError::Call {
            call: "QnnContext_createFromBinary",
            ..
        } => HtpError::ContextBinary {
            path: npu_dir.join(binary_file(soc)),
            reason: format!("not a context binary this library loads for {soc}: {e}"),
        },
        other => other,
    })
}

fn parse<T: serde::de::DeserializeOwned>(
    npu_dir: &Path,
    name: &str,
    bytes: &[u8],
) -> Result<T, HtpError> {
    serde_json::from_slice(bytes).map_err(|e| HtpError::ContextBinary {
        path: npu_dir.join(name),
        reason: e.to_string(),
    })
}
