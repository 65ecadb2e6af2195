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

/// A file written through [`HashingFile`] in pieces of odd sizes, across whole chunks and
/// a partial last one, holds exactly those bytes, and the hash it gives is the file's: on
/// the temporary folder's file system and, where there is one, on a tmpfs (which refuses
/// direct I/O).
#[test]
fn a_hashing_file_holds_what_was_written_and_gives_its_hash() {
    let mut dirs = vec![tempfile::tempdir().unwrap()];
    dirs.extend(tempfile::tempdir_in("/dev/shm").ok());
    let bytes: Vec<u8> = (0..(17u64 << 20) + 12_345)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let files = [("empty", 0), ("small", 1000), ("large", bytes.len())];
    for (dir, (name, len)) in dirs.iter().flat_map(|d| files.map(|f| (d, f))) {
        let path = dir.path().join(name);
        let mut file = HashingFile::create(&path).unwrap();
        let mut rest = &bytes[..len];
        for piece in [7, 4096, 1 << 20, 3, 9 << 20].iter().cycle() {
            if rest.is_empty() {
                break;
            }
            let (head, tail) = rest.split_at((*piece).min(rest.len()));
            file.write(head).unwrap();
            rest = tail;
        }
        let hash = file.finish().unwrap();
        assert!(std::fs::read(&path).unwrap() == bytes[..len], "{name}");
        assert_eq!(hash, sha256_file(&path).unwrap(), "{name}");
    }
}

/// A file that cannot be created is an I/O error naming it.
#[test]
fn a_hashing_file_in_a_missing_folder_is_an_io_error_naming_it() {
    let Err(err) = HashingFile::create(Path::new("/nonexistent/w.safetensors")) else {
        panic!("created a file in a missing folder");
    };
    assert!(
        err.to_string().contains("/nonexistent/w.safetensors"),
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
