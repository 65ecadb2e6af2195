//! Writes an artifact's `npu/` folder: `model_net.json`, `model.bin`, `model.cpp`, the
//! app's `io_spec.json`, the HTP backend configs for the SoC, `build.sh` (the SDK's
//! model-lib and context-binary generators, when `QNN_SDK_ROOT` is set) and
//! `manifest.json` (what it holds, with SHA-256 hashes).

use super::cpp::model_cpp;
use super::error::QnnError;
use super::lower::FloatNet;
use super::recipe::QuantizedNet;
use crate::npu::{Soc, QNN_HTP};
use oxrelax_runtime::artifact::sha256_file;
use oxrelax_runtime::qnn::bin::{write_bin, BIN_FILE};
use oxrelax_runtime::qnn::htp::stored::write_context_binary;
use oxrelax_runtime::qnn::net::{GraphSpec, NetFile, NetGraph, NET_FILE};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The folder's name inside an artifact.
pub const NPU_DIR: &str = "npu";
/// The generated C++ source.
pub const CPP_FILE: &str = "model.cpp";
/// The app-facing description of every graph's inputs and outputs.
pub const IO_SPEC_FILE: &str = "io_spec.json";
/// The HTP backend extension config (names the per-graph and device config).
pub const HTP_EXTENSIONS_FILE: &str = "htp_backend_extensions.json";
/// The HTP graph and device config.
pub const HTP_CONFIG_FILE: &str = "htp_config.json";
/// The build script.
pub const BUILD_FILE: &str = "build.sh";
/// What the folder holds.
pub const MANIFEST_FILE: &str = "manifest.json";

/// The net file of `net`'s graphs with the tensors and nodes of `graph` (the net's own,
/// or the recipe's typed and encoded ones).
pub fn net_file(net: &FloatNet, graph: &NetGraph, command: &str) -> NetFile {
    let op_types: BTreeSet<String> = graph.nodes.values().map(|n| n.op_type.clone()).collect();
    NetFile {
        model_cpp: CPP_FILE.into(),
        model_bin: BIN_FILE.into(),
        converter_command: command.into(),
        copyright_str: String::new(),
        op_types: op_types.into_iter().collect(),
        graphs: net.graphs.clone(),
        token_axes: net.token_axes.clone(),
        graph: graph.clone(),
    }
}

/// The float net's file and static data (f32, little-endian), as the host reference
/// backend runs it for calibration.
pub fn float_parts(net: &FloatNet) -> (NetFile, BTreeMap<String, Vec<u8>>) {
    let bin = net
        .statics
        .iter()
        .map(|(name, values)| {
            (
                name.clone(),
                values.iter().flat_map(|v| v.to_le_bytes()).collect(),
            )
        })
        .collect();
    (net_file(net, &net.graph, "calibration"), bin)
}

/// The files [`write_npu_dir`] always writes, by name inside the folder, the manifest
/// last.
pub const NPU_FILES: [&str; 8] = [
    NET_FILE,
    BIN_FILE,
    CPP_FILE,
    IO_SPEC_FILE,
    HTP_EXTENSIONS_FILE,
    HTP_CONFIG_FILE,
    BUILD_FILE,
    MANIFEST_FILE,
];

/// Writes the folder `dir` (created) for `net` on `socs` (the first names the configs),
/// with each SoC's context binary built by Qualcomm's library in `qnn_lib` when given.
/// Returns the names of the files written, the manifest's last.
pub fn write_npu_dir(
    dir: &Path,
    net: &NetFile,
    quantized: &QuantizedNet,
    socs: &[Soc],
    qnn_lib: Option<&Path>,
) -> Result<Vec<String>, QnnError> {
    let soc = socs.first().ok_or_else(|| QnnError::Io {
        path: dir.to_path_buf(),
        source: std::io::Error::other("no SoC to write the NPU graphs for"),
    })?;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| QnnError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let write = |name: &str, bytes: &[u8]| {
        std::fs::write(dir.join(name), bytes).map_err(io(&dir.join(name)))
    };
    write(NET_FILE, &pretty(net))?;
    let bin_path = dir.join(BIN_FILE);
    let bin = std::fs::File::create(&bin_path).map_err(io(&bin_path))?;
    write_bin(std::io::BufWriter::new(bin), &quantized.statics).map_err(io(&bin_path))?;
    write(CPP_FILE, model_cpp(net).as_bytes())?;
    write(IO_SPEC_FILE, &pretty(&io_spec(net, soc)))?;
    let extensions = json!({"backend_extensions": {
        "shared_library_path": "libQnnHtpNetRunExtensions.so",
        "config_file_path": HTP_CONFIG_FILE,
    }});
    write(HTP_EXTENSIONS_FILE, &pretty(&extensions))?;
    write(HTP_CONFIG_FILE, &pretty(&htp_config(net, soc)))?;
    write(BUILD_FILE, build_script(soc).as_bytes())?;
    set_executable(&dir.join(BUILD_FILE)).map_err(io(&dir.join(BUILD_FILE)))?;
    let mut written: Vec<String> = NPU_FILES[..NPU_FILES.len() - 1]
        .iter()
        .map(|f| f.to_string())
        .collect();
    if let Some(lib) = qnn_lib {
        for soc in socs {
            let statics = &quantized.statics;
            let binary =
                write_context_binary(dir, soc.name, soc.soc_model, net, statics, Some(lib))?;
            written.extend(binary);
        }
    }
    let mut files = serde_json::Map::new();
    for name in &written {
        let hash = sha256_file(&dir.join(name)).map_err(|e| QnnError::Io {
            path: dir.join(name),
            source: std::io::Error::other(e.to_string()),
        })?;
        files.insert(name.clone(), json!(hash));
    }
    let manifest = json!({
        "backend": QNN_HTP.name,
        "soc": soc.name,
        "htp_arch": soc.htp_arch,
        "context_socs": match qnn_lib {
            Some(_) => socs.iter().map(|soc| soc.name).collect::<Vec<_>>(),
            None => Vec::new(),
        },
        "recipe": quantized.recipe.name,
        "graphs": net.graphs.iter().map(|g| &g.name).collect::<Vec<_>>(),
        "files": files,
    });
    write(MANIFEST_FILE, &pretty(&manifest))?;
    written.push(MANIFEST_FILE.into());
    Ok(written)
}

fn pretty(value: &impl serde::Serialize) -> Vec<u8> {
    let mut text = serde_json::to_vec_pretty(value).unwrap_or_default();
    text.push(b'\n');
    text
}

/// Every graph's inputs and outputs, in call order, with their types and encodings: what
/// an app feeds and reads. Attention and the KV cache stay on the CPU.
fn io_spec(net: &NetFile, soc: &Soc) -> serde_json::Value {
    let tensor = |name: &String| {
        let t = &net.graph.tensors[name];
        json!({
            "name": name,
            "dims": t.dims,
            "data_type": t.dtype().map(|d| d.c_name()),
            "encoding": t.quant_params.scale_offset,
        })
    };
    let graph = |g: &GraphSpec| {
        json!({
            "name": g.name,
            "tokens": g.tokens,
            "inputs": g.inputs.iter().map(tensor).collect::<Vec<_>>(),
            "outputs": g.outputs.iter().map(tensor).collect::<Vec<_>>(),
        })
    };
    json!({
        "soc": soc.name,
        "graphs": net.graphs.iter().map(graph).collect::<Vec<_>>(),
        "kv_cache": {"device": "cpu", "note": "attention, the rotary embedding and the KV cache run on the CPU"},
        "padding": "a prefill graph runs full chunks: rows past the prompt are zeros and their outputs ignored",
    })
}

/// The HTP graph and device config: every graph at O3 with the SoC's VTCM, one device of
/// the SoC's architecture in burst mode, weights shared across the context's graphs.
fn htp_config(net: &NetFile, soc: &Soc) -> serde_json::Value {
    json!({
        "graphs": [{
            "graph_names": net.graphs.iter().map(|g| &g.name).collect::<Vec<_>>(),
            "vtcm_mb": soc.vtcm_mib,
            "O": 3,
        }],
        "devices": [{
            "soc_model": soc.soc_model,
            "dsp_arch": format!("v{}", soc.htp_arch),
            "cores": [{"core_id": 0, "perf_profile": "burst", "rpc_control_latency": 100}],
        }],
        "context": {"weight_sharing_enabled": true},
    })
}

/// The script that turns the folder into a QNN context binary with the SDK.
fn build_script(soc: &Soc) -> String {
    format!(
        r#"#!/usr/bin/env sh
# Builds this folder into a QNN context binary for {soc} (HTP v{arch}) with the QNN SDK.
# Needs QNN_SDK_ROOT (the SDK's root folder); run from anywhere.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "${{QNN_SDK_ROOT:-}}" ]; then
  echo "build.sh: set QNN_SDK_ROOT to the QNN SDK's folder" >&2
  exit 2
fi
host=x86_64-linux-clang
cd "$here"
"$QNN_SDK_ROOT/bin/$host/qnn-model-lib-generator" -c model.cpp -b model.bin -o lib -t "$host"
"$QNN_SDK_ROOT/bin/$host/qnn-context-binary-generator" \
  --backend "$QNN_SDK_ROOT/lib/$host/libQnnHtp.so" \
  --model "lib/$host/libmodel.so" \
  --config_file {extensions} \
  --binary_file model_ctx --output_dir ctx
echo "build.sh: wrote $here/ctx/model_ctx.bin"
"#,
        soc = soc.name,
        arch = soc.htp_arch,
        extensions = HTP_EXTENSIONS_FILE,
    )
}

#[cfg(unix)]
fn set_executable(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
}

#[cfg(not(unix))]
fn set_executable(_: &Path) -> std::io::Result<()> {
    Ok(())
}
