use super::*;
use crate::dtype::DType;

#[test]
fn sizes_parse_with_binary_suffixes() {
    let cases = [
        ("1073741824", 1 << 30),
        ("512M", 512 << 20),
        ("8G", 8 << 30),
        ("8GiB", 8 << 30),
        ("2t", 2 << 40),
        ("64kb", 64 << 10),
    ];
    for (text, bytes) in cases {
        assert_eq!(parse_size(text), Ok(bytes), "{text}");
    }
    for text in ["", "G", "-1G", "1.5G", "0", "8X", "99999999999T"] {
        let err = parse_size(text).unwrap_err();
        assert!(err.to_string().contains(&format!("`{text}`")), "{err}");
    }
}

#[test]
fn kv_cache_bytes_match_the_layout() {
    // TinyLlama: 22 layers, 4 KV heads of 64 lanes, 2048 positions, K and V in f32.
    let f32_cache = kv_cache_bytes(22, 4, 64, 2048, KvFormat::Plain(DType::F32));
    assert_eq!(f32_cache, 22 * 2 * 4 * 64 * 2048 * 4);
    assert_eq!(f32_cache, 88 << 20);
    let f16_cache = kv_cache_bytes(22, 4, 64, 2048, KvFormat::Plain(DType::F16));
    assert_eq!(f16_cache, f32_cache / 2);
    // q8: one byte per element, plus an f32 scale per position and head for K and V.
    let q8_cache = kv_cache_bytes(22, 4, 64, 2048, KvFormat::Q8);
    assert_eq!(q8_cache, 22 * 2048 * (2 * 4 * 64 + 2 * 4 * 4));
    assert_eq!(kv_cache_bytes(u64::MAX, 2, 2, 2, KvFormat::Q8), u64::MAX);
}

#[test]
fn an_estimate_over_the_limit_names_both() {
    let estimate = MemoryEstimate {
        weights: 1 << 30,
        kv_cache: 88 << 20,
        arena: 12 << 20,
        kv_pages: 0,
    };
    assert_eq!(
        estimate.to_string(),
        "weights 1.00 GiB + KV cache 88.0 MiB + arena 12.0 MiB = 1.10 GiB"
    );
    assert!(estimate.check(2 << 30).is_ok());
    let err = estimate.check(1 << 30).unwrap_err().to_string();
    assert!(
        err.contains("= 1.10 GiB (1178599424 bytes) exceeds"),
        "{err}"
    );
    assert!(
        err.contains("the limit of 1.00 GiB (1073741824 bytes"),
        "{err}"
    );
    let weights = [ExpectedTensor {
        name: "w".into(),
        shape: vec![3, 5],
        dtype: DType::F16,
    }];
    assert_eq!(tensors_bytes(&weights), 30);
    let serving = MemoryEstimate {
        kv_pages: 1 << 30,
        ..estimate
    };
    assert_eq!(
        serving.to_string(),
        "weights 1.00 GiB + KV cache 88.0 MiB + arena 12.0 MiB + KV pages 1.00 GiB = 2.10 GiB"
    );
    assert!(serving.check(2 << 30).is_err());
    assert_eq!(format_bytes(512), "512 B");
}

#[test]
fn the_default_limit_is_positive() {
    assert!(default_limit() > 0);
    assert_eq!(
        mem_total("MemFree: 1 kB\nMemTotal:  2048 kB\n"),
        Some(2 << 20)
    );
    assert_eq!(mem_total("nothing"), None);
}
