use super::*;
use crate::tensor::StorageKind;
use half::{bf16, f16};
use std::fs;

/// One tensor to write: name, safetensors dtype name, shape, raw bytes.
type Entry<'a> = (&'a str, &'a str, Vec<usize>, Vec<u8>);

/// Writes a safetensors file by hand; the header is padded with spaces to `header_len`
/// bytes when given (so data alignment can be chosen).
fn write_raw(path: &Path, entries: &[Entry<'_>], header_len: Option<usize>) {
    let mut offset = 0;
    let mut header = serde_json::Map::new();
    for (name, dtype, shape, bytes) in entries {
        let end = offset + bytes.len();
        header.insert(
            name.to_string(),
            serde_json::json!({"dtype": dtype, "shape": shape, "data_offsets": [offset, end]}),
        );
        offset = end;
    }
    let mut json = serde_json::Value::Object(header).to_string().into_bytes();
    if let Some(len) = header_len {
        json.resize(len, b' ');
    }
    let mut out = (json.len() as u64).to_le_bytes().to_vec();
    out.extend(json);
    entries.iter().for_each(|e| out.extend(&e.3));
    fs::write(path, out).unwrap();
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn f16_bytes(values: &[f32]) -> Vec<u8> {
    values
        .iter()
        .flat_map(|&v| f16::from_f32(v).to_le_bytes())
        .collect()
}

fn bf16_bytes(values: &[f32]) -> Vec<u8> {
    values
        .iter()
        .flat_map(|&v| bf16::from_f32(v).to_le_bytes())
        .collect()
}

const VALUES: [f32; 6] = [1.0, -2.5, 0.125, 3.0, -0.5, 96.0];

fn mixed_entries() -> Vec<Entry<'static>> {
    vec![
        ("a.weight", "F32", vec![2, 3], f32_bytes(&VALUES)),
        ("b.weight", "F16", vec![3, 2], f16_bytes(&VALUES)),
        ("c.weight", "BF16", vec![6], bf16_bytes(&VALUES)),
    ]
}

fn expected(name: &str, shape: &[i64]) -> ExpectedTensor {
    ExpectedTensor {
        name: name.to_string(),
        shape: shape.to_vec(),
        dtype: DType::F32,
    }
}

fn mixed_expected() -> Vec<ExpectedTensor> {
    vec![
        expected("a.weight", &[2, 3]),
        expected("b.weight", &[3, 2]),
        expected("c.weight", &[6]),
    ]
}

#[test]
fn f32_borrows_the_mapping_and_f16_bf16_convert_to_f32() {
    let dir = tempfile::tempdir().unwrap();
    write_raw(&dir.path().join(SINGLE_FILE), &mixed_entries(), Some(256));
    let store = WeightStore::open(dir.path()).unwrap();
    let tensors = store.load_expected(&mixed_expected()).unwrap();
    for (tensor, shape) in tensors.iter().zip([[2, 3].as_slice(), &[3, 2], &[6]]) {
        assert_eq!(tensor.dtype(), DType::F32);
        assert_eq!(tensor.shape(), shape);
        assert_eq!(tensor.as_slice::<f32>().unwrap(), VALUES);
    }
    assert_eq!(tensors[0].storage_kind(), StorageKind::Borrowed);
    assert_eq!(tensors[1].storage_kind(), StorageKind::Owned);
    let bf = store.load("c.weight", DType::BF16).unwrap();
    assert_eq!(bf.storage_kind(), StorageKind::Borrowed);
    assert_eq!(bf.to_ndarray_f32().unwrap().as_slice().unwrap(), VALUES);
    assert_eq!(
        store.names().collect::<Vec<_>>(),
        ["a.weight", "b.weight", "c.weight"]
    );
}

#[test]
fn floats_round_to_f16_to_the_nearest() {
    let dir = tempfile::tempdir().unwrap();
    let values = [1.0 + 1.0 / 4096.0, -60000.0, 1e-8, 0.1, -0.0, 3.0];
    let entries = vec![
        ("a.weight", "F32", vec![6], f32_bytes(&values)),
        ("b.weight", "BF16", vec![6], bf16_bytes(&values)),
    ];
    write_raw(&dir.path().join(SINGLE_FILE), &entries, None);
    let store = WeightStore::open(dir.path()).unwrap();
    for (name, stored) in [("a.weight", values), ("b.weight", values.map(bf16_round))] {
        let tensor = store.load(name, DType::F16).unwrap();
        assert_eq!(tensor.dtype(), DType::F16);
        let rounded: Vec<f32> = stored.iter().map(|&v| f16::from_f32(v).to_f32()).collect();
        assert_eq!(
            tensor.to_ndarray_f32().unwrap().as_slice().unwrap(),
            rounded
        );
    }
    // Spot checks of the rounding itself, independent of `half`.
    let a = store
        .load("a.weight", DType::F16)
        .unwrap()
        .to_ndarray_f32()
        .unwrap();
    assert_eq!(a[0], 1.0, "ties to even");
    assert_eq!(a[1], -60000.0);
    assert_eq!(a[2], 0.0, "below the smallest subnormal");
    assert_eq!(a[4].to_bits(), (-0.0f32).to_bits());
    let path = dir.path().join("big.safetensors");
    write_raw(
        &path,
        &[("w", "F32", vec![2], f32_bytes(&[1.0, 70000.0]))],
        None,
    );
    let err = WeightStore::open(&path).unwrap().load("w", DType::F16);
    let err = err.unwrap_err().to_string();
    assert!(
        err.contains("`w`") && err.contains("element 1 is 70000") && err.contains("f16"),
        "{err}"
    );
}

/// `v` rounded to bf16 and back.
fn bf16_round(v: f32) -> f32 {
    bf16::from_f32(v).to_f32()
}

#[test]
fn misaligned_f32_data_is_copied() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("odd.safetensors");
    // Header of 2 mod 4 bytes: the f32 data starts 2 bytes past a 4-byte boundary.
    write_raw(
        &path,
        &[("x", "F32", vec![6], f32_bytes(&VALUES))],
        Some(130),
    );
    let store = WeightStore::open(&path).unwrap();
    let x = store.load("x", DType::F32).unwrap();
    assert_eq!(x.storage_kind(), StorageKind::Owned);
    assert_eq!(x.as_slice::<f32>().unwrap(), VALUES);
}

#[test]
fn truncated_empty_and_garbage_files_are_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.safetensors");
    write_raw(&good, &mixed_entries(), None);
    let bytes = fs::read(&good).unwrap();
    let cases: [(&str, &[u8]); 4] = [
        ("data.safetensors", &bytes[..bytes.len() - 3]),
        ("header.safetensors", &bytes[..20]),
        ("empty.safetensors", &[]),
        ("garbage.safetensors", b"\x05\0\0\0\0\0\0\0{oops"),
    ];
    for (name, content) in cases {
        let path = dir.path().join(name);
        fs::write(&path, content).unwrap();
        let err = WeightStore::open(&path).unwrap_err();
        assert!(
            matches!(err, WeightError::Malformed { .. }),
            "{name}: {err}"
        );
        let message = err.to_string();
        assert!(
            message.contains(name) && message.contains(&format!("({} bytes)", content.len())),
            "{message}"
        );
    }
}

/// An edit of a header entry.
type EntryEdit = fn(&mut serde_json::Value);

/// A header whose entry for `c.weight` is edited by `edit` (the data left as it is).
fn with_edited_entry(path: &Path, edit: EntryEdit) {
    write_raw(path, &mixed_entries(), None);
    let bytes = fs::read(path).unwrap();
    let len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + len]).unwrap();
    edit(&mut header["c.weight"]);
    let json = header.to_string().into_bytes();
    let mut out = (json.len() as u64).to_le_bytes().to_vec();
    out.extend(json);
    out.extend(&bytes[8 + len..]);
    fs::write(path, out).unwrap();
}

#[test]
fn bad_offsets_sizes_and_dtypes_name_the_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.safetensors");
    let cases: [(EntryEdit, &str); 4] = [
        (|e| e["data_offsets"][0] = 6.into(), "do not start where"),
        (
            |e| e["shape"] = serde_json::json!([7]),
            "BF16 [7] takes 14 bytes",
        ),
        (|e| e["dtype"] = "F99".into(), "unknown dtype \"F99\""),
        (|e| e["dtype"] = "F32".into(), "F32 [6] takes 24 bytes, but"),
    ];
    for (edit, expected) in cases {
        with_edited_entry(&path, edit);
        let err = WeightStore::open(&path).unwrap_err();
        let message = err.to_string();
        assert!(matches!(err, WeightError::Malformed { .. }), "{message}");
        assert!(message.contains("m.safetensors"), "{message}");
        assert!(message.contains("tensor `c.weight`: "), "{message}");
        assert!(message.contains(expected), "{message}");
    }
}

#[test]
fn a_missing_file_or_folder_without_weights_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = WeightStore::open(dir.path()).unwrap_err();
    assert!(matches!(err, WeightError::NoWeights { .. }), "{err}");
    let err = WeightStore::open(&dir.path().join("nope.safetensors")).unwrap_err();
    assert!(
        matches!(err, WeightError::Io { .. }) && err.to_string().contains("nope.safetensors"),
        "{err}"
    );
}

#[test]
fn check_expected_names_missing_unexpected_and_misshapen_tensors() {
    let dir = tempfile::tempdir().unwrap();
    write_raw(&dir.path().join(SINGLE_FILE), &mixed_entries(), None);
    let store = WeightStore::open(dir.path()).unwrap();
    let mut wanted = mixed_expected();
    wanted.push(expected("d.weight", &[4]));
    wanted.push(expected("e.weight", &[4]));
    let err = store.check_expected(&wanted).unwrap_err().to_string();
    assert!(
        err.contains("missing tensor `d.weight`")
            && err.contains("[4]")
            && err.contains("and 1 more")
            && err.contains(SINGLE_FILE),
        "{err}"
    );
    let err = store
        .check_expected(&mixed_expected()[..2])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("unexpected tensor `c.weight`") && err.contains("[6]"),
        "{err}"
    );
    let mut wrong = mixed_expected();
    wrong[1].shape = vec![2, 3];
    let err = store.load_expected(&wrong).unwrap_err().to_string();
    assert!(
        err.contains("`b.weight`") && err.contains("[3, 2]") && err.contains("[2, 3]"),
        "{err}"
    );
}

#[test]
fn unsupported_dtypes_and_conversions_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f64.safetensors");
    write_raw(&path, &[("x", "F64", vec![1], vec![0; 8])], None);
    let err = WeightStore::open(&path).unwrap_err().to_string();
    assert!(err.contains("`x`") && err.contains("F64"), "{err}");
    let path = dir.path().join("i64.safetensors");
    write_raw(&path, &[("ids", "I64", vec![2], vec![0; 16])], None);
    let store = WeightStore::open(&path).unwrap();
    let err = store.load("ids", DType::F32).unwrap_err().to_string();
    assert!(
        err.contains("`ids`") && err.contains("i64") && err.contains("f32"),
        "{err}"
    );
    assert_eq!(store.load("ids", DType::I64).unwrap().shape(), [2]);
    let err = store.load("ids", DType::F16).unwrap_err().to_string();
    assert!(err.contains("`ids`") && err.contains("f16"), "{err}");
    let err = store.load("other", DType::F32).unwrap_err().to_string();
    assert!(err.contains("no tensor `other`"), "{err}");
}

/// Writes `a` and `b` to shard 1, `c` to shard 2, and an index mapping them as given.
fn write_shards(dir: &Path, map: &[(&str, &str)]) {
    let entries = mixed_entries();
    write_raw(
        &dir.join("model-00001-of-00002.safetensors"),
        &entries[..2],
        None,
    );
    write_raw(
        &dir.join("model-00002-of-00002.safetensors"),
        &entries[2..],
        None,
    );
    let weight_map: serde_json::Map<_, _> = map
        .iter()
        .map(|(t, f)| (t.to_string(), serde_json::Value::from(*f)))
        .collect();
    let index = serde_json::json!({"metadata": {"total_size": 48}, "weight_map": weight_map});
    fs::write(dir.join(INDEX_FILE), index.to_string()).unwrap();
}

const SHARD_1: &str = "model-00001-of-00002.safetensors";
const SHARD_2: &str = "model-00002-of-00002.safetensors";

#[test]
fn sharded_checkpoints_load_through_their_index() {
    let dir = tempfile::tempdir().unwrap();
    write_shards(
        dir.path(),
        &[
            ("a.weight", SHARD_1),
            ("b.weight", SHARD_1),
            ("c.weight", SHARD_2),
        ],
    );
    let store = WeightStore::open(dir.path()).unwrap();
    assert!(store.source().ends_with(INDEX_FILE));
    let tensors = store.load_expected(&mixed_expected()).unwrap();
    assert_eq!(tensors[2].as_slice::<f32>().unwrap(), VALUES);
    let entry = store.info("c.weight").unwrap();
    assert!(entry.file.ends_with(SHARD_2) && entry.stored == StoredAs::Dtype(DType::BF16));
}

#[test]
fn bad_indexes_are_errors_naming_the_index_or_the_shard() {
    let dir = tempfile::tempdir().unwrap();
    write_shards(dir.path(), &[("a.weight", SHARD_1), ("c.weight", SHARD_1)]);
    let err = WeightStore::open(dir.path()).unwrap_err().to_string();
    assert!(err.contains("`c.weight`") && err.contains(SHARD_1), "{err}");
    write_shards(dir.path(), &[("a.weight", "../elsewhere.safetensors")]);
    let err = WeightStore::open(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains(INDEX_FILE) && err.contains("elsewhere"),
        "{err}"
    );
    fs::write(dir.path().join(INDEX_FILE), "{\"weight_map\": 3}").unwrap();
    let err = WeightStore::open(dir.path()).unwrap_err();
    assert!(matches!(err, WeightError::Index { .. }), "{err}");
    let entries = mixed_entries();
    write_shards(dir.path(), &[("a.weight", SHARD_1), ("c.weight", SHARD_2)]);
    write_raw(
        &dir.path().join(SHARD_2),
        &[entries[0].clone(), entries[2].clone()],
        None,
    );
    let err = WeightStore::open(dir.path()).unwrap_err().to_string();
    assert!(err.contains("`a.weight`") && err.contains("both"), "{err}");
}

#[test]
fn released_pages_of_a_mapped_weight_read_back_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let values: Vec<f32> = (0..300_000).map(|i| (i % 977) as f32 - 400.0).collect();
    let entries = [("big.weight", "F32", vec![values.len()], f32_bytes(&values))];
    write_raw(&dir.path().join(SINGLE_FILE), &entries, Some(248));
    let store = WeightStore::open(dir.path()).unwrap();
    let tensor = store.load("big.weight", DType::F32).unwrap();
    assert_eq!(tensor.storage_kind(), StorageKind::Borrowed);
    assert_eq!(tensor.as_slice::<f32>().unwrap(), values);
    release_resident_pages(&tensor);
    assert_eq!(tensor.as_slice::<f32>().unwrap(), values);
    // An owned tensor is left alone.
    let owned = Tensor::from_slice(&values, &[values.len() as i64]).unwrap();
    release_resident_pages(&owned);
    assert_eq!(owned.as_slice::<f32>().unwrap(), values);
}

/// KiB of `path`'s mappings resident in this process (`/proc/self/smaps`).
#[cfg(target_os = "linux")]
fn resident_kib(path: &Path) -> u64 {
    let smaps = fs::read_to_string("/proc/self/smaps").unwrap();
    let path = path.to_string_lossy();
    let mut lines = smaps.lines();
    let mut kib = 0;
    while let Some(line) = lines.next() {
        if line.ends_with(path.as_ref()) {
            let rss = lines.find(|l| l.starts_with("Rss:")).unwrap();
            kib += rss
                .split_whitespace()
                .nth(1)
                .unwrap()
                .parse::<u64>()
                .unwrap();
        }
    }
    kib
}

#[cfg(target_os = "linux")]
#[test]
fn the_finite_check_leaves_no_checked_weight_resident() {
    let dir = tempfile::tempdir().unwrap();
    let values: Vec<f32> = (0..1_000_000).map(|i| (i % 977) as f32).collect();
    let entries = [("big.weight", "F32", vec![values.len()], f32_bytes(&values))];
    let path = dir.path().join(SINGLE_FILE);
    write_raw(&path, &entries, Some(248));
    let store = WeightStore::open(dir.path()).unwrap();
    let expected = [ExpectedTensor {
        name: "big.weight".into(),
        shape: vec![values.len() as i64],
        dtype: DType::F32,
    }];
    let loaded = store.load_expected_finite(&expected).unwrap();
    assert_eq!(loaded[0].storage_kind(), StorageKind::Borrowed);
    // Only the pages the tensor shares with the header may stay (its 4 MB were read).
    assert!(
        resident_kib(&path) <= 16,
        "{} KiB resident",
        resident_kib(&path)
    );
    assert_eq!(loaded[0].as_slice::<f32>().unwrap(), values);
}

#[test]
fn mapped_weights_are_copied_out_of_the_file_and_keep_their_values() {
    let dir = tempfile::tempdir().unwrap();
    let big: Vec<f32> = (0..600_000).map(|i| (i % 977) as f32 - 400.0).collect();
    let small: Vec<f32> = (0..1000).map(|i| i as f32).collect();
    let entries = [
        ("big.weight", "F32", vec![big.len()], f32_bytes(&big)),
        ("small.weight", "F32", vec![small.len()], f32_bytes(&small)),
    ];
    let path = dir.path().join(SINGLE_FILE);
    write_raw(&path, &entries, Some(248));
    let store = WeightStore::open(dir.path()).unwrap();
    let big_copy = detach_from_file(store.load("big.weight", DType::F32).unwrap()).unwrap();
    let small_copy = detach_from_file(store.load("small.weight", DType::F32).unwrap()).unwrap();
    // Without OXRELAX_HUGE_PAGES=0 (tests run without it) both leave the mapping.
    assert!(!crate::tensor::buffer::huge_pages_turned_off());
    for (copy, values) in [(&big_copy, &big), (&small_copy, &small)] {
        assert_eq!(copy.storage_kind(), StorageKind::Owned);
        assert_eq!(copy.as_slice::<f32>().unwrap(), values);
    }
    // The file truncated and rewritten: the copies neither fault nor change.
    drop(store);
    std::fs::write(&path, b"gone").unwrap();
    assert_eq!(small_copy.as_slice::<f32>().unwrap(), small);
    assert_eq!(big_copy.as_slice::<f32>().unwrap(), big);
}

#[test]
fn bytes_in_memory_parse_to_the_table_of_the_file_and_load_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(SINGLE_FILE);
    write_raw(&path, &mixed_entries(), Some(256));
    let file = SafetensorsFile::open(&path).unwrap();
    let in_memory = SafetensorsFile::from_bytes(&path, fs::read(&path).unwrap()).unwrap();
    assert_eq!(in_memory.tensors(), file.tensors());
    for name in file.tensors().keys() {
        let (a, b) = (
            file.load(name, DType::F32),
            in_memory.load(name, DType::F32),
        );
        assert_eq!(a.unwrap().as_slice::<f32>(), b.unwrap().as_slice::<f32>());
    }
    let truncated = fs::read(&path).unwrap()[..100].to_vec();
    assert!(matches!(
        SafetensorsFile::from_bytes(&path, truncated),
        Err(WeightError::Malformed { .. })
    ));
}
