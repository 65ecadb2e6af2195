//! Which tensor of a safetensors header the parser refused is wrong, and how: the
//! `safetensors` crate reports bad offsets, sizes and dtypes without naming the tensor.

use safetensors::Dtype;
use serde_json::Value;
use std::collections::BTreeMap;

/// A tensor's header entry, read field by field.
struct Entry<'a> {
    name: &'a str,
    dtype: Dtype,
    shape: Vec<u64>,
    offsets: (u64, u64),
}

/// What is wrong with the first faulty tensor of the safetensors `bytes` (`tensor `name`:
/// ...`), when the header is JSON and a tensor entry is at fault; `None` otherwise.
pub(super) fn tensor_problem(bytes: &[u8]) -> Option<String> {
    let header_len = usize::try_from(u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?)).ok()?;
    let header = bytes.get(8..header_len.checked_add(8)?)?;
    let entries: BTreeMap<String, Value> = serde_json::from_slice(header).ok()?;
    let mut tensors = Vec::new();
    for (name, value) in entries.iter().filter(|(name, _)| *name != "__metadata__") {
        match entry(name, value) {
            Ok(entry) => tensors.push(entry),
            Err(reason) => return Some(format!("tensor `{name}`: {reason}")),
        }
    }
    tensors.sort_by_key(|t| t.offsets);
    let mut end = 0;
    for tensor in tensors {
        if let Err(reason) = check_extent(&tensor, end) {
            return Some(format!("tensor `{}`: {reason}", tensor.name));
        }
        end = tensor.offsets.1;
    }
    None
}

/// The fields of the entry `value` of tensor `name`, or what is wrong with one.
fn entry<'a>(name: &'a str, value: &Value) -> Result<Entry<'a>, String> {
    let field = |key: &str| value.get(key).cloned().unwrap_or(Value::Null);
    let (dtype, shape, offsets) = (field("dtype"), field("shape"), field("data_offsets"));
    Ok(Entry {
        name,
        dtype: serde_json::from_value(dtype.clone())
            .map_err(|_| format!("unknown dtype {dtype}"))?,
        shape: serde_json::from_value(shape.clone())
            .map_err(|_| format!("invalid shape {shape}"))?,
        offsets: serde_json::from_value(offsets.clone())
            .map_err(|_| format!("invalid data_offsets {offsets}"))?,
    })
}

/// An error unless `tensor`'s data starts at `start` (where the one before ends) and
/// holds exactly the bytes of its dtype and shape.
fn check_extent(tensor: &Entry, start: u64) -> Result<(), String> {
    let (begin, end) = tensor.offsets;
    let shown = format!("data_offsets [{begin}, {end}]");
    if begin != start || end < begin {
        return Err(format!(
            "{shown} do not start where the data before ends (byte {start})"
        ));
    }
    let bits = tensor
        .shape
        .iter()
        .try_fold(tensor.dtype.bitsize() as u64, |acc, &d| acc.checked_mul(d));
    let shape = &tensor.shape;
    let dtype = tensor.dtype;
    match bits {
        None => Err(format!("shape {shape:?} of {dtype:?} overflows")),
        Some(bits) if bits.div_ceil(8) != end - begin => Err(format!(
            "{dtype:?} {shape:?} takes {} bytes, but {shown} hold {}",
            bits.div_ceil(8),
            end - begin
        )),
        Some(_) => Ok(()),
    }
}
