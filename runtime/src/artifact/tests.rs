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
fn kernels_using_a_feature_this_cpu_lacks_are_refused_by_name() {
    let foreign = if cfg!(target_arch = "x86_64") {
        "neon"
    } else {
        "avx2"
    };
    let mut lacking = manifest();
    lacking.target.cpu_features.push(foreign.to_string());
    let err = lacking.check_compatible(Path::new("art")).unwrap_err();
    assert!(
        matches!(err, ArtifactError::MissingFeatures { .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains(foreign) && err.to_string().contains("art/"),
        "{err}"
    );
    manifest().check_compatible(Path::new("art")).unwrap();
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
        max_batch: 0,
        tokenizer_files: vec![],
        weights: vec![],
        target: Target {
            triple: crate::host::host_triple(),
            cpu_features: vec![],
            kernels: KERNELS_AOT.into(),
            library: "kernels.so".into(),
        },
        files: Default::default(),
        npu: None,
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

#[cfg(unix)]
#[test]
fn paths_outside_the_artifact_and_special_files_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    for bad in ["../secret", "/dev/zero", "params/../../x", "./vm.json", ""] {
        let mut outside = manifest();
        outside.files.insert(bad.to_string(), "0".repeat(64));
        let err = outside.check_files(dir.path(), &[]).unwrap_err();
        assert!(matches!(err, ArtifactError::BadPath { .. }), "{bad}: {err}");
        assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
    }
    let mut tokenizer_outside = manifest();
    tokenizer_outside.tokenizer_files.push("/etc/passwd".into());
    let err = tokenizer_outside.check_files(dir.path(), &[]).unwrap_err();
    assert!(matches!(err, ArtifactError::BadPath { .. }), "{err}");

    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("real"), b"x").unwrap();
    std::os::unix::fs::symlink(dir.path().join("real"), dir.path().join("link")).unwrap();
    for special in ["sub", "link", "missing"] {
        let mut listed = manifest();
        listed.files.insert(special.to_string(), "0".repeat(64));
        let err = listed.check_files(dir.path(), &[]).unwrap_err();
        assert!(
            matches!(err, ArtifactError::NotAFile { .. }),
            "{special}: {err}"
        );
        assert!(err.to_string().contains(special), "{err}");
    }
}
