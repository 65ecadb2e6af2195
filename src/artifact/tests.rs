use super::*;
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

#[test]
fn an_unlisted_required_file_is_an_error() {
    let manifest = Manifest {
        format_version: FORMAT_VERSION,
        model_config: serde_json::json!({}),
        functions: Default::default(),
        context_window: 16,
        prefill_chunk: 8,
        quantization: "q0f32".into(),
        tokenizer_files: vec![],
        target: Target::host(),
        files: Default::default(),
    };
    let err = manifest
        .check_files(Path::new("."), &[VM_FILE])
        .unwrap_err();
    assert!(matches!(err, ArtifactError::Unlisted { .. }), "{err}");
    assert!(err.to_string().contains("vm.json"), "{err}");
}
