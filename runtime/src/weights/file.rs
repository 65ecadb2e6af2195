//! One memory-mapped safetensors file: its header, parsed and checked once, and views of
//! its tensors.

use super::convert::{convert_bytes, load_error};
use super::header::tensor_problem;
use super::WeightError;
use crate::dtype::DType;
use crate::files::FileBytes;
use crate::tensor::buffer::huge_pages_turned_off;
use crate::tensor::{Tensor, TensorError};
use memmap2::UncheckedAdvice;
use safetensors::{Dtype, SafeTensors};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A tensor's entry in a safetensors header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredTensor {
    /// The stored element type.
    pub dtype: DType,
    /// The stored shape.
    pub shape: Vec<i64>,
    /// Byte range of its data, relative to the start of the file.
    range: (usize, usize),
}

/// What keeps a tensor borrowed from a mapping alive: the mapping and the tensor's byte
/// range in it. When the tensor is gone (or [`release_resident_pages`] asks), the whole
/// pages of its range leave the process's resident set; the file stays mapped, so a later
/// read brings them back from the file.
struct MappedRange {
    bytes: Arc<FileBytes>,
    range: (usize, usize),
}

impl MappedRange {
    fn release(&self) {
        let FileBytes::Mapped(map) = &*self.bytes else {
            return;
        };
        let page = crate::tensor::buffer::os_page_size();
        let (start, end) = (
            self.range.0.next_multiple_of(page),
            self.range.1 / page * page,
        );
        if start < end {
            // SAFETY: the mapping is a read-only mapping of a file no one writes (the premise
            // of mapping it at all), so the dropped pages read back with the same bytes; only
            // whole pages inside this tensor's range are touched. A failure only means the
            // pages stay resident.
            let _ = unsafe {
                map.unchecked_advise_range(UncheckedAdvice::DontNeed, start, end - start)
            };
        }
    }
}

impl Drop for MappedRange {
    fn drop(&mut self) {
        self.release();
    }
}

/// Drops from the resident set the pages of `tensor` when it borrows a weight file's
/// mapping (after a load-time transform has read it, say): the next read of them comes
/// from the file again. Other tensors are left alone; their values never change.
pub fn release_resident_pages(tensor: &Tensor) {
    if let Some(range) = tensor
        .borrowed_owner()
        .and_then(|owner| owner.downcast_ref::<MappedRange>())
    {
        range.release();
    }
}

/// `tensor` copied into memory of its own when it borrows a weight file's mapping (large
/// ones into huge pages where the OS has them: the runtime buffers' `Pages::Huge`), so
/// that a file truncated or rewritten while a model runs can neither fault (SIGBUS) nor
/// change its weights; the mapped pages then leave the resident set. With
/// [`crate::tensor::HUGE_PAGES_ENV`] turned off the tensor stays mapped (a faster start;
/// the file must then stay as it is while the model is open). Any other tensor is
/// returned as it is.
pub fn detach_from_file(tensor: Tensor) -> Result<Tensor, TensorError> {
    let mapped = tensor
        .borrowed_owner()
        .is_some_and(|owner| owner.is::<MappedRange>());
    if !mapped || huge_pages_turned_off() {
        return Ok(tensor);
    }
    tensor.deep_copy()
}

/// A safetensors file mapped into memory. Tensors loaded from it without conversion borrow
/// the mapping, which stays alive as long as any of them does.
pub struct SafetensorsFile {
    path: PathBuf,
    bytes: Arc<FileBytes>,
    tensors: BTreeMap<String, StoredTensor>,
}

impl std::fmt::Debug for SafetensorsFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SafetensorsFile")
            .field("path", &self.path)
            .field("tensors", &self.tensors.len())
            .finish()
    }
}

/// The runtime dtypes safetensors can store, with their safetensors names.
const STORED_DTYPES: [(Dtype, DType); 8] = [
    (Dtype::F32, DType::F32),
    (Dtype::F16, DType::F16),
    (Dtype::BF16, DType::BF16),
    (Dtype::I64, DType::I64),
    (Dtype::I32, DType::I32),
    (Dtype::I8, DType::I8),
    (Dtype::U8, DType::U8),
    (Dtype::BOOL, DType::Bool),
];

/// The runtime dtype of a stored safetensors dtype, if it has one.
fn runtime_dtype(dtype: Dtype) -> Option<DType> {
    STORED_DTYPES
        .iter()
        .find(|(stored, _)| *stored == dtype)
        .map(|&(_, runtime)| runtime)
}

/// The safetensors dtype and shape a tensor of `dtype` and `shape` is stored as, if it
/// can be: safetensors has no 4-bit dtype, so a [`DType::U4`] tensor of value pairs (last
/// dim 2) is stored as the u8 tensor of its bytes, that dim dropped; other dtypes as
/// themselves.
pub fn stored_as(dtype: DType, shape: &[i64]) -> Option<(Dtype, Vec<i64>)> {
    if dtype == DType::U4 {
        let (&pairs, bytes) = shape.split_last()?;
        return (pairs == 2).then(|| (Dtype::U8, bytes.to_vec()));
    }
    let stored = STORED_DTYPES
        .iter()
        .find(|(_, runtime)| *runtime == dtype)
        .map(|&(stored, _)| stored)?;
    Some((stored, shape.to_vec()))
}

impl SafetensorsFile {
    /// Maps the file at `path` and checks its header: valid JSON, every tensor of a
    /// supported dtype, offsets consistent with the shapes, data covering the file exactly.
    pub fn open(path: &Path) -> Result<SafetensorsFile, WeightError> {
        let io = |source| WeightError::Io {
            path: path.to_path_buf(),
            source,
        };
        let bytes = FileBytes::map(path).map_err(io)?;
        SafetensorsFile::with_bytes(path, bytes)
    }

    /// Checks the header of safetensors `bytes` already in memory, as [`open`] checks a
    /// file's; `path` names them in errors. Loaded tensors borrow or copy these bytes.
    ///
    /// [`open`]: SafetensorsFile::open
    pub fn from_bytes(path: &Path, bytes: Vec<u8>) -> Result<SafetensorsFile, WeightError> {
        SafetensorsFile::with_bytes(path, FileBytes::Owned(bytes))
    }

    /// A file of `bytes`, its header checked.
    fn with_bytes(path: &Path, bytes: FileBytes) -> Result<SafetensorsFile, WeightError> {
        let tensors = parse_header(path, bytes.as_slice())?;
        Ok(SafetensorsFile {
            path: path.to_path_buf(),
            bytes: Arc::new(bytes),
            tensors,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every tensor in the file, by name.
    pub fn tensors(&self) -> &BTreeMap<String, StoredTensor> {
        &self.tensors
    }

    /// The header entry of tensor `name`, if the file holds it.
    pub fn info(&self, name: &str) -> Option<&StoredTensor> {
        self.tensors.get(name)
    }

    /// Tensor `name` as `dtype`: a borrowed view of the mapping when stored as `dtype` and
    /// aligned for it, else a converted (or copied) owned tensor. f32, f16 and bf16
    /// convert to each other (an error for a value the wanted one cannot hold); any dtype
    /// loads as itself, and u8 bytes as u4 value pairs (see [`stored_as`]).
    pub fn load(&self, name: &str, dtype: DType) -> Result<Tensor, WeightError> {
        let info = self.info(name).ok_or_else(|| WeightError::NotFound {
            tensor: name.to_string(),
            source_name: self.path.clone(),
        })?;
        let data = &self.bytes.as_slice()[info.range.0..info.range.1];
        if dtype == DType::U4 && info.dtype == DType::U8 {
            let pairs: Vec<i64> = info.shape.iter().copied().chain([2]).collect();
            let stored = StoredTensor {
                dtype,
                shape: pairs,
                range: info.range,
            };
            return self.view(name, &stored);
        }
        let tensor_error = |source| WeightError::Tensor {
            tensor: name.to_string(),
            file: self.path.clone(),
            source,
        };
        let aligned = (data.as_ptr() as usize).is_multiple_of(dtype.bits().div_ceil(8) as usize);
        if info.dtype == dtype && aligned {
            return self.view(name, info);
        }
        let converted = convert_bytes(data, info.dtype, dtype)
            .map_err(|e| load_error(e, name, &self.path, info.dtype, dtype))?;
        // The conversion read the stored bytes once and nothing reads them again: their
        // pages leave the resident set, so converting a model never holds both copies.
        MappedRange {
            bytes: self.bytes.clone(),
            range: info.range,
        }
        .release();
        Tensor::from_bytes(dtype, &info.shape, &converted).map_err(tensor_error)
    }
}

impl SafetensorsFile {
    /// Tensor `name` as a borrowed view of its bytes in the mapping, as `info` describes
    /// them (aligned for its dtype).
    fn view(&self, name: &str, info: &StoredTensor) -> Result<Tensor, WeightError> {
        let data = &self.bytes.as_slice()[info.range.0..info.range.1];
        let owner: Arc<dyn std::any::Any + Send + Sync> = Arc::new(MappedRange {
            bytes: self.bytes.clone(),
            range: info.range,
        });
        // SAFETY: `data` lies inside the mapping that `owner` keeps alive; the mapping is
        // read-only and nothing in this process writes it.
        unsafe { Tensor::from_borrowed(data.as_ptr(), data.len(), owner, info.dtype, &info.shape) }
            .map_err(|source| WeightError::Tensor {
                tensor: name.to_string(),
                file: self.path.clone(),
                source,
            })
    }
}

/// Parses and checks the header of the safetensors bytes of `path`.
fn parse_header(path: &Path, bytes: &[u8]) -> Result<BTreeMap<String, StoredTensor>, WeightError> {
    let malformed = |reason: String| WeightError::Malformed {
        path: path.to_path_buf(),
        len: bytes.len(),
        reason,
    };
    let (header_len, metadata) = SafeTensors::read_metadata(bytes)
        .map_err(|e| malformed(tensor_problem(bytes).unwrap_or_else(|| e.to_string())))?;
    let data_start = 8 + header_len;
    let mut tensors = BTreeMap::new();
    for (name, info) in metadata.tensors() {
        let dtype = runtime_dtype(info.dtype).ok_or_else(|| WeightError::UnsupportedDtype {
            tensor: name.clone(),
            file: path.to_path_buf(),
            stored: format!("{:?}", info.dtype),
        })?;
        let shape = info
            .shape
            .iter()
            .map(|&d| {
                i64::try_from(d)
                    .map_err(|_| malformed(format!("tensor `{name}`: extent {d} is too large")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let (start, end) = info.data_offsets;
        let range = (data_start + start, data_start + end);
        tensors.insert(
            name,
            StoredTensor {
                dtype,
                shape,
                range,
            },
        );
    }
    Ok(tensors)
}
