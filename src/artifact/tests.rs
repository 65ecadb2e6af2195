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
fn the_default_kernel_target_is_the_host_with_its_features() {
    let host = KernelTarget::parse(None, None, None).unwrap();
    assert_eq!(host.target, oxrelax_dsl::Target::host());
    assert!(host.target.triple.starts_with(std::env::consts::ARCH));
    let arm = KernelTarget::parse(
        Some("aarch64-unknown-linux-gnu"),
        Some("+dotprod,i8mm"),
        None,
    );
    let arm = arm.unwrap().target;
    assert_eq!(arm.features.iter().collect::<Vec<_>>(), ["dotprod", "i8mm"]);
    let err = KernelTarget::parse(Some("aarch64-linux-android"), Some("+avx2"), None).unwrap_err();
    assert!(err.contains("unknown CPU feature `avx2`"), "{err}");
    let err = KernelTarget::parse(Some("riscv64gc-unknown-linux-gnu"), None, None).unwrap_err();
    assert!(
        err.contains("no linker is known for target `riscv64gc"),
        "{err}"
    );
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
        tokenizer_files: vec![],
        target: Target::compiled(&KernelTarget::host(), "kernels.so".into()),
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
