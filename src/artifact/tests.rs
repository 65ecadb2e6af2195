use super::*;
use oxrelax_models::KvDtype;
use std::path::Path;

#[test]
fn sha256_of_a_known_input() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("abc.txt");
    std::fs::write(&path, b"abc").unwrap();
    assert_eq!(
        sha256_file(&path).unwrap(),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}

#[test]
fn a_missing_file_is_an_io_error_naming_it() {
    let err = sha256_file(Path::new("/nonexistent/x.bin")).unwrap_err();
    assert!(matches!(err, ArtifactError::Io { .. }));
    assert!(err.to_string().contains("/nonexistent/x.bin"), "{err}");
}

#[test]
fn the_host_target_is_the_build_triple() {
    let host = Target::host();
    assert_eq!(host.triple, target_lexicon::HOST.to_string());
    assert!(
        host.triple.starts_with(std::env::consts::ARCH),
        "{}",
        host.triple
    );
    assert_eq!(host.kernels, KERNELS_JIT);
}

/// A manifest of an f32 model with an f32 KV cache, listing no file.
fn manifest() -> Manifest {
    Manifest {
        format_version: FORMAT_VERSION,
        model_config: serde_json::json!({}),
        functions: Default::default(),
        context_window: 16,
        prefill_chunk: 8,
        quantization: "q0f32".into(),
        kv_dtype: "f32".into(),
        tokenizer_files: vec![],
        target: Target::host(),
        files: Default::default(),
    }
}

#[test]
fn an_unlisted_required_file_is_an_error() {
    let err = manifest()
        .check_files(Path::new("."), &[VM_FILE])
        .unwrap_err();
    assert!(matches!(err, ArtifactError::Unlisted { .. }), "{err}");
    assert!(err.to_string().contains("vm.json"), "{err}");
}

#[test]
fn a_manifest_without_kv_dtype_means_f32_and_another_dtype_is_a_mismatch() {
    let mut json = serde_json::to_value(manifest()).unwrap();
    json.as_object_mut().unwrap().remove("kv_dtype");
    let old: Manifest = serde_json::from_value(json).unwrap();
    let dir = Path::new("artifact");
    assert_eq!(old.kv_dtype(dir).unwrap(), KvDtype::F32);
    old.check_kv_dtype(dir, None).unwrap();
    old.check_kv_dtype(dir, Some(KvDtype::F32)).unwrap();
    let err = old.check_kv_dtype(dir, Some(KvDtype::F16)).unwrap_err();
    assert!(
        matches!(err, ArtifactError::KvDtypeMismatch { .. }),
        "{err}"
    );
    let message = err.to_string();
    assert!(
        message.contains("artifact/oxrelax-model.json")
            && message.contains("as f32, not f16")
            && message.contains("--kv-dtype f16"),
        "{message}"
    );
    let bf16 = Manifest {
        kv_dtype: "bf16".into(),
        ..manifest()
    };
    let err = bf16.kv_dtype(dir).unwrap_err();
    assert!(matches!(err, ArtifactError::KvDtype { .. }), "{err}");
    assert!(err.to_string().contains("\"bf16\""), "{err}");
}
