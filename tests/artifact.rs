//! Artifacts: `oxrelax compile` on the tiny Qwen2 fixture, loaded back with
//! `oxrelax::model::load` and run against the transformers reference; and the checks a
//! loaded artifact must pass (hashes, target triple, format version).

use oxrelax::artifact::{ArtifactError, Manifest, MANIFEST_FILE, PARAMS_FILE};
use oxrelax::model::{load, LoadError, LoadOptions, LoadedModel};
use oxrelax_models::KvDtype;
use oxrelax_runtime::artifact::{Artifact, ArtifactError as OpenError};
use oxrelax_runtime::{Tensor, Value};
use safetensors::SafeTensors;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Max |logit difference| accepted against transformers (float32 both sides).
const TOLERANCE: f32 = 1e-4;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/models/tiny-qwen2")
}

/// Runs `oxrelax args...`; returns (success, stdout, stderr).
fn oxrelax(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_oxrelax"))
        .args(args)
        .output()
        .unwrap();
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap();
    (out.status.success(), text(out.stdout), text(out.stderr))
}

/// tiny-qwen2 compiled by the CLI into a fresh temporary folder (`artifact/` inside it).
fn compiled() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("artifact");
    let src = fixture();
    let (ok, stdout, stderr) = oxrelax(&[
        "compile",
        src.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--context",
        "256",
        "--prefill-chunk",
        "64",
    ]);
    assert!(ok, "compile failed: {stderr}");
    assert!(stdout.contains("context 256, prefill chunk 64"), "{stdout}");
    (tmp, out)
}

fn load_ok(dir: &Path) -> LoadedModel {
    match load(dir, &LoadOptions::default()) {
        Ok(model) => model,
        Err(err) => panic!("loading {}: {err}", dir.display()),
    }
}

/// Why the runtime (no compiler involved) refuses to open the artifact in `dir`.
fn open_err(dir: &Path) -> OpenError {
    match Artifact::open(dir) {
        Ok(_) => panic!("{} opened, expected an error", dir.display()),
        Err(err) => err,
    }
}

/// `(input ids, prefill logits flattened)` of the reference's prompt 0.
fn reference_prompt0() -> (Vec<i32>, Vec<f32>) {
    let bytes = std::fs::read(fixture().join("reference.safetensors")).unwrap();
    let refs = SafeTensors::deserialize(&bytes).unwrap();
    let ids = refs.tensor("prompt0.input_ids").unwrap();
    let ids = ids
        .data()
        .chunks_exact(8)
        .map(|b| i64::from_le_bytes(b.try_into().unwrap()) as i32)
        .collect();
    let logits = refs.tensor("prompt0.prefill_logits").unwrap();
    let logits = logits
        .data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    (ids, logits)
}

/// Rewrites the manifest of the artifact in `dir` with `edit`.
fn edit_manifest(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = dir.join(MANIFEST_FILE);
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut json);
    std::fs::write(&path, json.to_string()).unwrap();
}

/// Writes `bytes` as the artifact's `file` and records their hash in the manifest (as
/// someone rewriting both would).
fn rewrite_hashed(dir: &Path, file: &str, bytes: &[u8]) {
    let path = dir.join(file);
    std::fs::write(&path, bytes).unwrap();
    let hash = oxrelax::artifact::sha256_file(&path).unwrap();
    edit_manifest(dir, |json| json["files"][file] = hash.into());
}

#[test]
fn a_compiled_artifact_matches_transformers_over_prefill() {
    let (_tmp, dir) = compiled();
    let manifest = Manifest::read(&dir).unwrap();
    assert_eq!(manifest.context_window, 256);
    assert_eq!(manifest.prefill_chunk, 64);
    assert_eq!(manifest.kv_dtype, "f32");
    assert_eq!(
        manifest.files.keys().collect::<Vec<_>>(),
        [
            "generation_config.json",
            "kernels.so",
            "module.txt",
            "params/model.safetensors",
            "tokenizer.json",
            "tokenizer_config.json",
            "vm.json"
        ]
    );
    assert_eq!(manifest.functions["prefill"].params[0].0, "ids");
    let mut model = load_ok(&dir);
    assert_eq!((model.context_window, model.prefill_chunk), (256, 64));
    // Its weights are stored transformed: the transform is retired, its arena freed.
    let transform = oxrelax::passes::TRANSFORM_PARAMS;
    assert!(model.vm.executable().functions.contains_key(transform));
    assert!(model.vm.arena(transform).is_none());
    assert_eq!(model.config.vocab_size, 1024);
    let (ids, want) = reference_prompt0();
    let cache = model.vm.call("create_kv_cache", &[]).unwrap();
    let ids = Tensor::from_slice(&ids, &[1, ids.len() as i64]).unwrap();
    let args: Vec<Value> = [Value::Tensor(ids), cache]
        .into_iter()
        .chain(model.weights.iter().cloned())
        .collect();
    let out = model.vm.call("prefill_all", &args).unwrap();
    let got = out.as_tensor().unwrap().as_slice::<f32>().unwrap().to_vec();
    assert_eq!(got.len(), want.len());
    let diff = got
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max);
    assert!(diff <= TOLERANCE, "max |diff| {diff}");
}

#[test]
fn a_modified_file_is_a_hash_error_naming_it() {
    let (_tmp, dir) = compiled();
    for file in ["params/model.safetensors", "kernels.so"] {
        let path = dir.join(file);
        let original = std::fs::read(&path).unwrap();
        let mut bytes = original.clone();
        bytes[200] ^= 1;
        std::fs::write(&path, bytes).unwrap();
        let err = open_err(&dir);
        assert!(matches!(err, OpenError::HashMismatch { .. }), "{err}");
        assert!(err.to_string().contains(file), "{err}");
        std::fs::write(&path, original).unwrap();
    }
}

/// Edits the first kernel declaration of the artifact's `vm.json` and records the new
/// hash in the manifest (as someone rewriting both files would), then loads it.
fn load_with_edited_kernel(edit: impl FnOnce(&mut serde_json::Value)) -> String {
    let (_tmp, dir) = compiled();
    let vm_path = dir.join("vm.json");
    let mut vm: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&vm_path).unwrap()).unwrap();
    edit(&mut vm["kernels"][0]);
    rewrite_hashed(&dir, "vm.json", vm.to_string().as_bytes());
    let err = open_err(&dir);
    assert!(matches!(err, OpenError::Kernels(_)), "{err}");
    err.to_string()
}

#[test]
fn a_library_lacking_a_kernel_the_bytecode_calls_is_refused_naming_both() {
    let message = load_with_edited_kernel(|k| k["name"] = "no_such_kernel".into());
    assert!(
        message.contains("kernels.so") && message.contains("no_such_kernel"),
        "{message}"
    );
}

#[test]
fn a_kernel_declared_otherwise_than_compiled_is_refused_naming_it() {
    let mut name = String::new();
    let message = load_with_edited_kernel(|k| {
        name = k["name"].as_str().unwrap().to_string();
        // The kernel would read twice the rows its first buffer holds.
        let rows = &mut k["params"][0]["shape"][0]["const"];
        *rows = (rows.as_i64().unwrap() * 2).into();
    });
    assert!(
        message.contains("kernels.so")
            && message.contains(&format!("kernel `{name}` was compiled as")),
        "{message}"
    );
}

#[test]
fn an_artifact_for_another_target_is_a_typed_error_naming_both() {
    let (_tmp, dir) = compiled();
    edit_manifest(&dir, |json| {
        json["target"]["triple"] = "riscv64gc-unknown-linux-gnu".into()
    });
    let err = open_err(&dir);
    let OpenError::WrongTarget { artifact, host, .. } = &err else {
        panic!("expected a target error, got {err}");
    };
    assert_eq!(artifact, "riscv64gc-unknown-linux-gnu");
    let message = err.to_string();
    assert!(
        message.contains("riscv64gc-unknown-linux-gnu") && message.contains(host.as_str()),
        "{message}"
    );
}

#[test]
fn a_truncated_executable_is_refused_naming_it() {
    let (_tmp, dir) = compiled();
    let vm = std::fs::read(dir.join("vm.json")).unwrap();
    std::fs::write(dir.join("vm.json"), &vm[..vm.len() / 2]).unwrap();
    let err = open_err(&dir);
    assert!(matches!(err, OpenError::HashMismatch { .. }), "{err}");
    assert!(err.to_string().contains("vm.json"), "{err}");
    rewrite_hashed(&dir, "vm.json", &vm[..vm.len() / 2]);
    let err = open_err(&dir);
    assert!(matches!(err, OpenError::Executable { .. }), "{err}");
    assert!(err.to_string().contains("vm.json"), "{err}");
}

#[test]
fn manifest_paths_outside_the_artifact_are_refused_naming_the_manifest() {
    let (_tmp, dir) = compiled();
    for outside in ["../oxrelax-model.json", "/dev/zero", "params/../../x"] {
        edit_manifest(&dir, |json| json["files"][outside] = "0".repeat(64).into());
        let err = open_err(&dir);
        assert!(matches!(err, OpenError::BadPath { .. }), "{outside}: {err}");
        let message = err.to_string();
        assert!(
            message.contains(MANIFEST_FILE) && message.contains(outside),
            "{message}"
        );
        edit_manifest(&dir, |json| {
            json["files"].as_object_mut().unwrap().remove(outside);
        });
    }
    edit_manifest(&dir, |json| {
        json["target"]["library"] = "/usr/lib/libm.so.6".into()
    });
    let err = open_err(&dir);
    assert!(matches!(err, OpenError::BadPath { .. }), "{err}");
}

#[test]
fn kernels_for_a_feature_this_cpu_lacks_are_refused_naming_it() {
    let (_tmp, dir) = compiled();
    let foreign = if cfg!(target_arch = "x86_64") {
        "i8mm"
    } else {
        "avx512vnni"
    };
    edit_manifest(&dir, |json| {
        json["target"]["cpu_features"]
            .as_array_mut()
            .unwrap()
            .push(foreign.into())
    });
    let err = open_err(&dir);
    assert!(matches!(err, OpenError::MissingFeatures { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains(foreign) && message.contains(MANIFEST_FILE),
        "{message}"
    );
}

#[test]
fn weights_recorded_otherwise_than_stored_are_refused_naming_the_tensor() {
    let (_tmp, dir) = compiled();
    let mut name = String::new();
    edit_manifest(&dir, |json| {
        let first = &mut json["weights"][0];
        name = first["name"].as_str().unwrap().to_string();
        let rows = first["shape"][0].as_i64().unwrap();
        first["shape"][0] = (rows + 1).into();
    });
    let err = open_err(&dir);
    assert!(matches!(err, OpenError::Weights(_)), "{err}");
    let message = err.to_string();
    assert!(
        message.contains(&name) && message.contains("model.safetensors"),
        "{message}"
    );
}

#[test]
fn another_format_version_is_an_error() {
    let (_tmp, dir) = compiled();
    edit_manifest(&dir, |json| json["format_version"] = 999.into());
    let err = open_err(&dir);
    assert!(
        matches!(err, OpenError::FormatVersion { found: 999, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("999"), "{err}");
}

#[test]
fn compile_quant_q0f16_stores_f16_projections_that_generate_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("artifact");
    let src = fixture();
    let args = [
        "compile",
        src.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--context",
        "64",
    ];
    let (ok, _, stderr) = oxrelax(&[&args[..], &["--quant", "q0f16"]].concat());
    assert!(ok, "{stderr}");
    assert_eq!(Manifest::read(&out).unwrap().quantization, "q0f16");
    let dir = out.to_str().unwrap();
    let (ok, stdout, stderr) = oxrelax(&["generate", "--model", dir, "--prompt", "Hi", "--json"]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("\"ids\""), "{stdout}");
    // What the artifact was compiled with cannot be changed when it is run.
    let generate = ["generate", "--model", dir, "--prompt", "Hi"];
    let (ok, _, stderr) =
        oxrelax(&[&generate[..], &["--max-context", "32", "--quant", "q0f32"]].concat());
    assert!(
        !ok && stderr.contains("--max-context, --quant cannot apply"),
        "{stderr}"
    );

    let (ok, _, stderr) = oxrelax(&[&args[..], &["--quant", "q3f8"]].concat());
    assert!(!ok);
    assert!(stderr.contains("invalid value 'q3f8'"), "{stderr}");
}

#[test]
fn quantized_artifacts_store_their_panels_and_generate_as_the_folder_does() {
    // 4-bit panels are stored as their bytes (safetensors has no 4-bit dtype).
    for (scheme, stored_as) in [
        ("q8f32", safetensors::Dtype::I8),
        ("q4f32_1", safetensors::Dtype::U8),
        ("q4f16_1", safetensors::Dtype::U8),
        ("w8a8", safetensors::Dtype::I8),
        ("w4a8", safetensors::Dtype::U8),
    ] {
        quantized_artifact_generates_as_the_folder_does(scheme, stored_as);
    }
}

fn quantized_artifact_generates_as_the_folder_does(scheme: &str, stored_as: safetensors::Dtype) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("artifact");
    let src = fixture();
    let (src, out_dir) = (src.to_str().unwrap(), out.to_str().unwrap());
    let compile = [
        "compile",
        src,
        "-o",
        out_dir,
        "--context",
        "64",
        "--quant",
        scheme,
    ];
    let (ok, _, stderr) = oxrelax(&compile);
    assert!(ok, "{scheme}: {stderr}");
    assert_eq!(Manifest::read(&out).unwrap().quantization, scheme);
    let params = std::fs::read(out.join(PARAMS_FILE)).unwrap();
    let stored = SafeTensors::deserialize(&params).unwrap();
    let count = |dtype: safetensors::Dtype| {
        let tensors = stored.tensors();
        tensors.iter().filter(|(_, v)| v.dtype() == dtype).count()
    };
    let (projections, int8) = (count(stored_as), count(safetensors::Dtype::I8));
    // Seven projections in each of the 2 layers, and the embedding table, which is also
    // the output head (tiny-qwen2 ties them): stored once, int8 under every scheme.
    let panels = match stored_as {
        safetensors::Dtype::I8 => projections,
        _ => projections + int8,
    };
    assert_eq!(
        panels,
        7 * 2 + 1,
        "{scheme}: every matrix is stored once as quantized panels"
    );
    assert!(int8 >= 1, "{scheme}: the embedding table is int8");
    let ids = |model: &str, extra: &[&str]| {
        let args = [
            &["generate", "--model", model, "--prompt", "Hi", "--json"],
            extra,
        ]
        .concat();
        let (ok, stdout, stderr) = oxrelax(&args);
        assert!(ok, "{scheme}: {stderr}");
        let line: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
        line["ids"].clone()
    };
    let folder = ids(src, &["--quant", scheme, "--max-context", "64"]);
    assert_eq!(ids(out_dir, &[]), folder, "{scheme}");
    // An artifact keeps its scheme: comparing schemes needs the folder.
    let (ok, _, stderr) = oxrelax(&["compare", out_dir, "--prompt", "Hi", "--quant", scheme]);
    assert!(!ok && stderr.contains("compiled artifact"), "{stderr}");
}

/// The ids `oxrelax generate --model model --prompt Hi --json extra...` prints.
fn generated_ids(model: &str, extra: &[&str]) -> serde_json::Value {
    let args = [
        &["generate", "--model", model, "--prompt", "Hi", "--json"],
        extra,
    ]
    .concat();
    let (ok, stdout, stderr) = oxrelax(&args);
    assert!(ok, "{args:?}: {stderr}");
    let line: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    line["ids"].clone()
}

/// The error of loading the artifact in `dir` with its KV cache asked to be `kv_dtype`.
fn kv_dtype_error(dir: &Path, kv_dtype: KvDtype) -> LoadError {
    let options = LoadOptions {
        kv_dtype: Some(kv_dtype),
        ..LoadOptions::default()
    };
    match load(dir, &options) {
        Ok(_) => panic!("{} loaded with a {kv_dtype} KV cache", dir.display()),
        Err(err) => err,
    }
}

#[test]
fn an_f16_kv_cache_artifact_records_its_kv_dtype_and_generates_as_the_folder_does() {
    check_kv_cache_artifact(KvDtype::F16, "attention_f16kv");
}

#[test]
fn a_q8_kv_cache_artifact_records_its_kv_dtype_and_generates_as_the_folder_does() {
    check_kv_cache_artifact(KvDtype::Q8, "attention_q8kv");
}

/// An artifact compiled with a `kv_dtype` KV cache records it, generates what the folder
/// loaded with it does, runs `kernel` in decode, and refuses another KV cache dtype.
fn check_kv_cache_artifact(kv_dtype: KvDtype, kernel: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("artifact");
    let src = fixture();
    let (src, out_dir) = (src.to_str().unwrap(), out.to_str().unwrap());
    let name = kv_dtype.name();
    let compile = ["compile", src, "-o", out_dir, "--context", "64"];
    let (ok, stdout, stderr) = oxrelax(&[&compile[..], &["--kv-dtype", name]].concat());
    assert!(ok, "{stderr}");
    assert!(stdout.contains(&format!("kv {name}")), "{stdout}");
    assert_eq!(Manifest::read(&out).unwrap().kv_dtype, name);
    let folder = generated_ids(src, &["--kv-dtype", name, "--max-context", "64"]);
    assert_eq!(generated_ids(out_dir, &[]), folder);
    assert_eq!(generated_ids(out_dir, &["--kv-dtype", name]), folder);
    // The KV cache dtype is compiled in: asking the artifact for another is an error.
    let (ok, _, stderr) = oxrelax(&[
        "generate",
        "--model",
        out_dir,
        "--prompt",
        "Hi",
        "--kv-dtype",
        "f32",
    ]);
    let says = format!("stores its KV cache as {name}, not f32");
    assert!(!ok && stderr.contains(&says), "{stderr}");
    let err = kv_dtype_error(&out, KvDtype::F32);
    assert!(
        matches!(
            err,
            LoadError::Artifact(ArtifactError::KvDtypeMismatch {
                compiled,
                requested: KvDtype::F32,
                ..
            }) if compiled == kv_dtype
        ),
        "{err}"
    );
    // dump-ir rebuilds the artifact's module with its recorded KV cache dtype.
    let dump = [
        "dump-ir",
        out_dir,
        "--after",
        "schedule-kernels",
        "--function",
        "decode",
    ];
    let (ok, stdout, stderr) = oxrelax(&dump);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains(&format!("microkernel {kernel}(")),
        "{stdout}"
    );
    let (ok, _, stderr) = oxrelax(&[&dump[..], &["--kv-dtype", "f32"]].concat());
    assert!(!ok && stderr.contains(&says), "{stderr}");
    let (ok, _, stderr) = oxrelax(&[&compile[..], &["--kv-dtype", "bf16"]].concat());
    assert!(!ok && stderr.contains("invalid value 'bf16'"), "{stderr}");
}

#[test]
fn a_manifest_without_kv_dtype_is_an_f32_kv_cache() {
    let (_tmp, dir) = compiled();
    edit_manifest(&dir, |json| {
        json.as_object_mut().unwrap().remove("kv_dtype");
    });
    assert_eq!(Manifest::read(&dir).unwrap().kv_dtype, "f32");
    let options = LoadOptions {
        kv_dtype: Some(KvDtype::F32),
        ..LoadOptions::default()
    };
    assert!(load(&dir, &options).is_ok());
    let err = kv_dtype_error(&dir, KvDtype::F16);
    assert!(
        err.to_string()
            .contains("stores its KV cache as f32, not f16"),
        "{err}"
    );
}

#[test]
fn dump_ir_prints_one_function_after_a_pass_and_writes_every_pass() {
    let (tmp, dir) = compiled();
    let dir = dir.to_str().unwrap();
    let (ok, stdout, stderr) = oxrelax(&[
        "dump-ir",
        dir,
        "--after",
        "legalize-ops",
        "--function",
        "decode",
    ]);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("@decode") && !stdout.contains("@prefill"),
        "{stdout}"
    );
    assert!(stdout.contains("call_tir"), "{stdout}");
    let (ok, stdout, stderr) = oxrelax(&["dump-ir", dir, "--after", "rewrite-layout", "--verbose"]);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("packed_matmul(") && !stdout.contains(" matmul("),
        "{stdout}"
    );
    assert!(
        stderr.contains("rewrite-layout: ") && stderr.contains("fired: transpose-matmul x"),
        "{stderr}"
    );
    let dumps = tmp.path().join("ir");
    let (ok, _, stderr) = oxrelax(&["dump-ir", dir, "-o", dumps.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    let mut files: Vec<String> = std::fs::read_dir(&dumps)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "00-input.txt",
            "01-normalize.txt",
            "02-rewrite-split.txt",
            "03-quantize-weights.txt",
            "04-rewrite-transpose.txt",
            "05-rewrite-dequantize.txt",
            "06-rewrite-layout.txt",
            "07-rewrite-norm.txt",
            "08-lift-transform-params.txt",
            "09-legalize-ops.txt",
            "10-fuse-ops.txt",
            "11-dead-code-elimination.txt",
            "12-schedule-kernels.txt",
            "13-static-plan-block-memory.txt"
        ]
    );
}

#[test]
fn compile_replaces_an_artifact_refuses_a_foreign_folder_and_leaves_nothing_on_failure() {
    let (tmp, dir) = compiled();
    let src = fixture();
    let compile_into = |out: &Path, model: &Path| {
        oxrelax(&[
            "compile",
            model.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ])
    };
    // An earlier artifact is replaced by the new one.
    let (ok, _, stderr) = compile_into(&dir, &src);
    assert!(ok, "recompiling over an artifact: {stderr}");
    assert_eq!(Manifest::read(&dir).unwrap().context_window, 4096);
    // A folder holding something else is left alone.
    let foreign = tmp.path().join("photos");
    std::fs::create_dir(&foreign).unwrap();
    std::fs::write(foreign.join("cat.jpg"), b"meow").unwrap();
    let (ok, _, stderr) = compile_into(&foreign, &src);
    assert!(
        !ok && stderr.contains("photos") && stderr.contains("not an artifact"),
        "{stderr}"
    );
    assert_eq!(std::fs::read(foreign.join("cat.jpg")).unwrap(), b"meow");
    // A compile that fails writes nothing: no output folder, no staging folder left.
    let broken = tmp.path().join("broken-model");
    std::fs::create_dir(&broken).unwrap();
    std::fs::write(broken.join("config.json"), b"{ not json").unwrap();
    let out = tmp.path().join("never");
    let (ok, _, _) = compile_into(&out, &broken);
    assert!(!ok);
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !left.iter().any(|n| n == "never" || n.contains("partial")),
        "{left:?}"
    );
}

#[test]
fn an_executable_without_a_recorded_function_or_with_other_parameters_is_refused() {
    let (_tmp, dir) = compiled();
    edit_manifest(&dir, |json| {
        let decode = json["functions"]["decode"].clone();
        json["functions"]["decode_twice"] = decode;
    });
    let message = open_err(&dir).to_string();
    assert!(
        message.contains("vm.json")
            && message.contains("`decode_twice`: the executable has no such function"),
        "{message}"
    );
    edit_manifest(&dir, |json| {
        json["functions"]
            .as_object_mut()
            .unwrap()
            .remove("decode_twice");
        json["functions"]["prefill"]["params"][0][0] = "tokens".into();
    });
    let message = open_err(&dir).to_string();
    assert!(
        message.contains("`prefill`") && message.contains("\"tokens\""),
        "{message}"
    );
}

/// An artifact compiled with `--target-features avx2,fma,f16c` records them and runs the
/// microkernels they allow (AVX2, not AVX-512, on any CPU that has both).
#[cfg(target_arch = "x86_64")]
#[test]
fn target_features_pick_the_microkernels_an_artifact_runs() {
    use oxrelax_runtime::microkernel::Microkernel;
    if !std::arch::is_x86_feature_detected!("avx2") || !std::arch::is_x86_feature_detected!("f16c")
    {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("avx2");
    let (ok, _, stderr) = oxrelax(&[
        "compile",
        fixture().to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--target-features",
        "+avx2,+fma,+f16c",
    ]);
    assert!(ok, "{stderr}");
    let manifest = Manifest::read(&out).unwrap();
    assert_eq!(
        manifest.target.cpu_features,
        ["avx2", "f16c", "fma", "sse4.1"]
    );
    let model = load_ok(&out);
    let isa = model.vm.microkernels().isa(Microkernel::Sgemv8x256Q4);
    assert!(isa.starts_with("avx2"), "{isa}");
    let (ok, _, stderr) = oxrelax(&[
        "compile",
        fixture().to_str().unwrap(),
        "-o",
        tmp.path().join("bad").to_str().unwrap(),
        "--target-features",
        "+avx9",
    ]);
    assert!(
        !ok && stderr.contains("unknown CPU feature `avx9`"),
        "{stderr}"
    );
}

#[test]
fn files_the_manifest_does_not_list_change_nothing() {
    let (_tmp, dir) = compiled();
    let opened = |dir: &Path| {
        let artifact = Artifact::open(dir).unwrap();
        let tokenizer = artifact.tokenizer().unwrap().unwrap();
        let config = artifact.engine_config(Some(&tokenizer)).unwrap();
        (tokenizer.config().chat_template.clone(), config.eos_ids)
    };
    let before = opened(&dir);
    std::fs::write(dir.join("chat_template.jinja"), "{{ 'dropped in' }}").unwrap();
    std::fs::write(dir.join("config.json"), r#"{"eos_token_id": [5, 6]}"#).unwrap();
    assert_eq!(opened(&dir), before);
}
