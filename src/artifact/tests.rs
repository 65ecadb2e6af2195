use super::*;
use oxrelax_models::KvDtype;
use std::path::Path;

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
    assert_eq!(
        arm.features.iter().collect::<Vec<_>>(),
        ["dotprod", "i8mm", "neon"]
    );
    let plain = KernelTarget::parse(Some("aarch64-linux-android"), None, None).unwrap();
    assert_eq!(plain.target.features.iter().collect::<Vec<_>>(), ["neon"]);
    let err = KernelTarget::parse(Some("aarch64-linux-android"), Some("+avx2"), None).unwrap_err();
    assert!(err.contains("unknown CPU feature `avx2`"), "{err}");
    let err = KernelTarget::parse(Some("riscv64gc-unknown-linux-gnu"), None, None).unwrap_err();
    assert!(
        err.contains("no linker is known for target `riscv64gc"),
        "{err}"
    );
}

/// Every feature the runtime picks microkernels by is one a compiled target can record,
/// so an artifact loaded on this host selects the microkernels a JIT build would.
#[test]
fn targets_know_every_feature_the_runtime_selects_kernels_by() {
    let arch = std::env::consts::ARCH;
    let known = oxrelax_dsl::target::KNOWN_FEATURES
        .iter()
        .find(|(a, _)| *a == arch)
        .map_or(&[][..], |(_, f)| *f);
    for feature in oxrelax_runtime::host::detected_features() {
        assert!(
            known.contains(feature),
            "{feature} is not a known {arch} feature"
        );
    }
}

#[test]
fn the_compiled_target_records_triple_features_and_library() {
    let target = compiled_target(&KernelTarget::host(), "kernels.so".into());
    assert_eq!(target.triple, oxrelax_runtime::host::host_triple());
    assert_eq!(target.kernels, KERNELS_AOT);
    assert_eq!(target.library, "kernels.so");
    let host = oxrelax_dsl::Target::host();
    assert!(target.cpu_features.iter().all(|f| host.has(f)));
}

/// A manifest of an f32 model recording no KV cache dtype (as written before it was
/// recorded).
fn manifest_without_kv_dtype() -> Manifest {
    serde_json::from_value(serde_json::json!({
        "format_version": FORMAT_VERSION,
        "model_config": {},
        "functions": {},
        "context_window": 16,
        "prefill_chunk": 8,
        "quantization": "q0f32",
        "weights": [],
        "tokenizer_files": [],
        "target": compiled_target(&KernelTarget::host(), "kernels.so".into()),
        "files": {},
    }))
    .unwrap()
}

#[test]
fn a_manifest_without_kv_dtype_means_f32_and_another_dtype_is_a_mismatch() {
    let old = manifest_without_kv_dtype();
    let dir = Path::new("artifact");
    assert_eq!(recorded_kv_dtype(&old, dir).unwrap(), KvDtype::F32);
    check_kv_dtype(&old, dir, None).unwrap();
    check_kv_dtype(&old, dir, Some(KvDtype::F32)).unwrap();
    let err = check_kv_dtype(&old, dir, Some(KvDtype::F16)).unwrap_err();
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
        ..old
    };
    let err = recorded_kv_dtype(&bf16, dir).unwrap_err();
    assert!(matches!(err, ArtifactError::KvDtype { .. }), "{err}");
    assert!(err.to_string().contains("\"bf16\""), "{err}");
    let unknown = Manifest {
        quantization: "q3k".into(),
        ..bf16
    };
    let err = recorded_quantization(&unknown, dir).unwrap_err();
    assert!(err.to_string().contains("\"q3k\""), "{err}");
}
