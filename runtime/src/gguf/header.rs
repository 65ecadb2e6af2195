//! Parsing and checking a GGUF header: magic, version, counts, metadata, tensor infos,
//! alignment and the layout of the tensor data.

use super::meta::{MetaArray, MetaType, MetaValue};
use super::reader::{Field, Reader};
use super::types::GgmlType;
use super::GgufError;
use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::path::Path;

/// The most levels of arrays nested in arrays this reader follows.
const MAX_ARRAY_DEPTH: usize = 8;

/// The alignment of tensor data when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// The fewest bytes a metadata entry takes: key length, value type, a one-byte value.
const MIN_KV_SIZE: u64 = 8 + 4 + 1;

/// The fewest bytes a tensor info takes: name length, dimension count, type, offset.
const MIN_TENSOR_INFO_SIZE: u64 = 8 + 4 + 4 + 8;

/// A tensor's entry in the header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// Its name.
    pub name: String,
    /// Its dimensions, innermost (contiguous) first, as ggml orders them.
    pub dims: Vec<u64>,
    /// Its element type.
    pub ggml_type: GgmlType,
    /// Its data's offset from the start of the data section.
    pub offset: u64,
    /// Its data's byte range in the file.
    pub(super) range: Range<usize>,
}

impl TensorInfo {
    /// Its number of values.
    pub fn n_elements(&self) -> u64 {
        self.dims.iter().product()
    }

    /// Its data's byte range in the file.
    pub fn file_range(&self) -> Range<usize> {
        self.range.clone()
    }
}

/// A checked header.
pub(super) struct Header {
    pub(super) version: u32,
    pub(super) metadata: BTreeMap<String, MetaValue>,
    pub(super) tensors: Vec<TensorInfo>,
    pub(super) by_name: HashMap<String, usize>,
    pub(super) alignment: u64,
    pub(super) data_start: u64,
}

/// Parses and checks the header of the GGUF file `bytes`.
pub(super) fn parse(path: &Path, bytes: &[u8]) -> Result<Header, GgufError> {
    let mut r = Reader::new(bytes, path);
    let magic: [u8; 4] = r.array(Field::Magic)?;
    if &magic != b"GGUF" {
        return Err(GgufError::BadMagic {
            path: path.to_path_buf(),
            found: magic.to_vec(),
        });
    }
    let version = r.u32(Field::Version)?;
    match version {
        2 | 3 => {}
        1 => {
            return Err(GgufError::Version1 {
                path: path.to_path_buf(),
            })
        }
        v if (1..=3).contains(&v.swap_bytes()) => {
            return Err(GgufError::BigEndian {
                path: path.to_path_buf(),
                version: v.swap_bytes(),
            })
        }
        v => {
            return Err(GgufError::UnknownVersion {
                path: path.to_path_buf(),
                version: v,
            })
        }
    }
    let n_tensors = r.u64(Field::TensorCount)?;
    let n_kv = r.u64(Field::KvCount)?;
    check_count(&r, "metadata entries", n_kv, MIN_KV_SIZE)?;
    let metadata = read_metadata(&mut r, n_kv)?;
    let alignment = alignment(path, &metadata)?;
    check_count(&r, "tensors", n_tensors, MIN_TENSOR_INFO_SIZE)?;
    let mut infos = Vec::new();
    let mut by_name = HashMap::new();
    for index in 0..n_tensors {
        let info = read_tensor_info(&mut r, index)?;
        if by_name.insert(info.0.clone(), infos.len()).is_some() {
            return Err(GgufError::DuplicateTensor {
                path: path.to_path_buf(),
                tensor: info.0,
            });
        }
        infos.push(info);
    }
    let data_start = r.aligned_offset(alignment);
    let mut tensors = Vec::with_capacity(infos.len());
    for raw in infos {
        let range = data_range(path, bytes.len() as u64, &raw, alignment, data_start)?;
        let (name, dims, ggml_type, offset) = raw;
        tensors.push(TensorInfo {
            name,
            dims,
            ggml_type,
            offset,
            range,
        });
    }
    check_overlaps(path, &tensors)?;
    Ok(Header {
        version,
        metadata,
        tensors,
        by_name,
        alignment,
        data_start,
    })
}

/// Fails unless `count` entries of at least `min_size` bytes fit in the bytes left.
fn check_count(
    r: &Reader<'_>,
    what: &'static str,
    count: u64,
    min_size: u64,
) -> Result<(), GgufError> {
    match count.checked_mul(min_size) {
        Some(n) if n <= r.left() => Ok(()),
        _ => Err(GgufError::TooMany {
            path: r.path().to_path_buf(),
            what,
            count,
            offset: r.offset(),
            left: r.left(),
            min_size,
        }),
    }
}

/// Reads `n_kv` metadata entries, refusing a key seen twice.
fn read_metadata(r: &mut Reader<'_>, n_kv: u64) -> Result<BTreeMap<String, MetaValue>, GgufError> {
    let mut metadata = BTreeMap::new();
    for index in 0..n_kv {
        let offset = r.offset();
        let key = r.string(Field::Key(index))?;
        let type_offset = r.offset();
        let type_id = r.u32(Field::ValueType(&key))?;
        let ty = value_type(r, &key, type_id, type_offset)?;
        let value = read_value(r, &key, ty)?;
        if metadata.contains_key(&key) {
            return Err(GgufError::DuplicateKey {
                path: r.path().to_path_buf(),
                key,
                offset,
            });
        }
        metadata.insert(key, value);
    }
    Ok(metadata)
}

/// The value type of id `type_id`, read at `offset` for `key`.
fn value_type(r: &Reader<'_>, key: &str, type_id: u32, offset: u64) -> Result<MetaType, GgufError> {
    MetaType::from_id(type_id).ok_or_else(|| GgufError::UnknownValueType {
        path: r.path().to_path_buf(),
        key: key.to_owned(),
        offset,
        type_id,
    })
}

/// Reads one value of type `ty` for `key`.
fn read_value(r: &mut Reader<'_>, key: &str, ty: MetaType) -> Result<MetaValue, GgufError> {
    let field = Field::Value(key);
    Ok(match ty {
        MetaType::U8 => MetaValue::U8(u8::from_le_bytes(r.array(field)?)),
        MetaType::I8 => MetaValue::I8(i8::from_le_bytes(r.array(field)?)),
        MetaType::U16 => MetaValue::U16(u16::from_le_bytes(r.array(field)?)),
        MetaType::I16 => MetaValue::I16(i16::from_le_bytes(r.array(field)?)),
        MetaType::U32 => MetaValue::U32(u32::from_le_bytes(r.array(field)?)),
        MetaType::I32 => MetaValue::I32(i32::from_le_bytes(r.array(field)?)),
        MetaType::F32 => MetaValue::F32(f32::from_le_bytes(r.array(field)?)),
        MetaType::Bool => MetaValue::Bool(read_bool(r, key)?),
        MetaType::String => MetaValue::String(r.string(field)?),
        MetaType::Array => MetaValue::Array(read_array(r, key, 1)?),
        MetaType::U64 => MetaValue::U64(u64::from_le_bytes(r.array(field)?)),
        MetaType::I64 => MetaValue::I64(i64::from_le_bytes(r.array(field)?)),
        MetaType::F64 => MetaValue::F64(f64::from_le_bytes(r.array(field)?)),
    })
}

/// Reads a bool: one byte, 0 or 1.
fn read_bool(r: &mut Reader<'_>, key: &str) -> Result<bool, GgufError> {
    let offset = r.offset();
    match r.array::<1>(Field::Value(key))? {
        [0] => Ok(false),
        [1] => Ok(true),
        [byte] => Err(GgufError::BadBool {
            path: r.path().to_path_buf(),
            key: key.to_owned(),
            offset,
            byte,
        }),
    }
}

/// `count` fixed-size elements of `N` bytes, each decoded by `decode`.
fn fixed<const N: usize, T>(
    r: &mut Reader<'_>,
    key: &str,
    count: u64,
    decode: fn([u8; N]) -> T,
) -> Result<Vec<T>, GgufError> {
    let bytes = r.take(count * N as u64, Field::Value(key))?;
    Ok(bytes
        .chunks_exact(N)
        .map(|chunk| {
            let mut element = [0; N];
            element.copy_from_slice(chunk);
            decode(element)
        })
        .collect())
}

/// Reads an array (element type, count, elements) for `key`, itself at nesting `depth`
/// (1 for a value's array).
fn read_array(r: &mut Reader<'_>, key: &str, depth: usize) -> Result<MetaArray, GgufError> {
    let type_offset = r.offset();
    let type_id = r.u32(Field::ArrayType(key))?;
    let elem = value_type(r, key, type_id, type_offset)?;
    let count = r.u64(Field::ArrayLen(key))?;
    match count.checked_mul(elem.min_size()) {
        Some(n) if n <= r.left() => {}
        _ => {
            return Err(GgufError::ArrayTooLong {
                path: r.path().to_path_buf(),
                key: key.to_owned(),
                offset: r.offset(),
                count,
                elem: elem.name(),
                left: r.left(),
            })
        }
    }
    if elem == MetaType::Array && depth >= MAX_ARRAY_DEPTH {
        return Err(GgufError::NestedTooDeep {
            path: r.path().to_path_buf(),
            key: key.to_owned(),
            offset: r.offset(),
            max: MAX_ARRAY_DEPTH,
        });
    }
    // count * min_size <= the bytes left, so count fits in usize and the vectors below
    // take at most a few times the file's size.
    Ok(match elem {
        MetaType::U8 => MetaArray::U8(fixed(r, key, count, u8::from_le_bytes)?),
        MetaType::I8 => MetaArray::I8(fixed(r, key, count, i8::from_le_bytes)?),
        MetaType::U16 => MetaArray::U16(fixed(r, key, count, u16::from_le_bytes)?),
        MetaType::I16 => MetaArray::I16(fixed(r, key, count, i16::from_le_bytes)?),
        MetaType::U32 => MetaArray::U32(fixed(r, key, count, u32::from_le_bytes)?),
        MetaType::I32 => MetaArray::I32(fixed(r, key, count, i32::from_le_bytes)?),
        MetaType::F32 => MetaArray::F32(fixed(r, key, count, f32::from_le_bytes)?),
        MetaType::U64 => MetaArray::U64(fixed(r, key, count, u64::from_le_bytes)?),
        MetaType::I64 => MetaArray::I64(fixed(r, key, count, i64::from_le_bytes)?),
        MetaType::F64 => MetaArray::F64(fixed(r, key, count, f64::from_le_bytes)?),
        MetaType::Bool => MetaArray::Bool(
            (0..count)
                .map(|_| read_bool(r, key))
                .collect::<Result<_, _>>()?,
        ),
        MetaType::String => MetaArray::String(
            (0..count)
                .map(|_| r.string(Field::Value(key)))
                .collect::<Result<_, _>>()?,
        ),
        MetaType::Array => MetaArray::Array(
            (0..count)
                .map(|_| read_array(r, key, depth + 1))
                .collect::<Result<_, _>>()?,
        ),
    })
}

/// `general.alignment`, or the default: a nonzero power of two that fits in a u32.
fn alignment(path: &Path, metadata: &BTreeMap<String, MetaValue>) -> Result<u64, GgufError> {
    let Some(value) = metadata.get("general.alignment") else {
        return Ok(DEFAULT_ALIGNMENT);
    };
    match value.as_integer().and_then(|v| u32::try_from(v).ok()) {
        Some(v) if v.is_power_of_two() => Ok(v.into()),
        _ => Err(GgufError::BadAlignment {
            path: path.to_path_buf(),
            found: value.to_string(),
        }),
    }
}

/// A tensor info as read: name, dimensions, type, offset.
type RawInfo = (String, Vec<u64>, GgmlType, u64);

/// Reads tensor info number `index`, checking its dimensions and type.
fn read_tensor_info(r: &mut Reader<'_>, index: u64) -> Result<RawInfo, GgufError> {
    let name = r.string(Field::TensorName(index))?;
    let n_dims = r.u32(Field::NDims(&name))?;
    if n_dims > 4 {
        return Err(GgufError::TooManyDims {
            path: r.path().to_path_buf(),
            tensor: name,
            n_dims,
        });
    }
    let dims = (0..n_dims)
        .map(|_| r.u64(Field::Dims(&name)))
        .collect::<Result<Vec<_>, _>>()?;
    let product = dims.iter().try_fold(1u64, |acc, &d| {
        acc.checked_mul(d)
            .filter(|&p| d > 0 && p <= i64::MAX as u64)
    });
    if product.is_none() {
        return Err(GgufError::BadDims {
            path: r.path().to_path_buf(),
            tensor: name,
            dims,
        });
    }
    let type_id = r.u32(Field::TensorType(&name))?;
    let Some(ggml_type) = GgmlType::from_id(type_id) else {
        return Err(GgufError::UnknownTensorType {
            path: r.path().to_path_buf(),
            tensor: name,
            type_id,
        });
    };
    let row = dims.first().copied().unwrap_or(1);
    if !row.is_multiple_of(ggml_type.block_elems) {
        return Err(GgufError::PartialBlock {
            path: r.path().to_path_buf(),
            tensor: name,
            ty: ggml_type.name,
            row,
            block: ggml_type.block_elems,
        });
    }
    let offset = r.u64(Field::TensorOffset(&name))?;
    Ok((name, dims, ggml_type, offset))
}

/// The byte range in the file of tensor `raw`'s data: aligned, inside the file of
/// `file_len` bytes, and sized by its type's blocks.
fn data_range(
    path: &Path,
    file_len: u64,
    raw: &RawInfo,
    alignment: u64,
    data_start: u64,
) -> Result<Range<usize>, GgufError> {
    let (name, dims, ggml_type, offset) = (&raw.0, &raw.1, raw.2, raw.3);
    if !offset.is_multiple_of(alignment) {
        return Err(GgufError::Misaligned {
            path: path.to_path_buf(),
            tensor: name.to_owned(),
            offset,
            alignment,
        });
    }
    // Elements <= 2^63 and block sizes are small, so these products fit in u128.
    let n_elements: u64 = dims.iter().product();
    let size = u128::from(n_elements / ggml_type.block_elems) * u128::from(ggml_type.block_bytes);
    let start = u128::from(data_start) + u128::from(offset);
    let end = start + size;
    if end > u128::from(file_len) {
        return Err(GgufError::DataPastEnd {
            path: path.to_path_buf(),
            tensor: name.to_owned(),
            start,
            end,
            len: file_len,
        });
    }
    // end <= file_len, the length of a slice in memory, so both fit in usize.
    Ok(start as usize..end as usize)
}

/// Fails when the data of two tensors overlap.
fn check_overlaps(path: &Path, tensors: &[TensorInfo]) -> Result<(), GgufError> {
    let mut order: Vec<&TensorInfo> = tensors.iter().collect();
    order.sort_by_key(|t| (t.range.start, t.range.end));
    for pair in order.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        if b.range.start < a.range.end {
            return Err(GgufError::Overlap {
                path: path.to_path_buf(),
                first: a.name.clone(),
                first_start: a.range.start as u64,
                first_end: a.range.end as u64,
                second: b.name.clone(),
                second_start: b.range.start as u64,
                second_end: b.range.end as u64,
            });
        }
    }
    Ok(())
}
