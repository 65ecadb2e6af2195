//! Loading Hugging Face weights: memory-mapped safetensors files, single or sharded
//! (`model.safetensors.index.json`), as runtime [`Tensor`]s.
//!
//! Tensors stored in the dtype asked for borrow the mapping (no copy). f16 and bf16
//! tensors asked for as f32 are converted while loading (a plain element-by-element
//! conversion into an owned tensor). [`WeightStore::load_expected`] checks a checkpoint
//! against what a model expects, both ways: every expected tensor exists with its shape,
//! and no stored tensor is left over. Every error names the file and the tensor; a
//! truncated or malformed file is an error, never a panic.

mod convert;
mod error;
mod file;
mod header;
mod index;
#[cfg(test)]
mod tests;

pub use error::WeightError;
pub use file::{
    detach_from_file, release_resident_pages, stored_as, SafetensorsFile, StoredTensor,
};

use crate::dtype::DType;
use crate::gguf::{GgmlType, GgufModel};
use crate::tensor::Tensor;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The single-file checkpoint name.
pub const SINGLE_FILE: &str = "model.safetensors";
/// The index of a sharded checkpoint.
pub const INDEX_FILE: &str = "model.safetensors.index.json";

/// The GGUF element types that are runtime dtypes, by ggml name.
const GGUF_DTYPES: [(&str, DType); 3] = [
    ("F32", DType::F32),
    ("F16", DType::F16),
    ("BF16", DType::BF16),
];

/// A tensor a model expects: its name, shape and the dtype to load it as.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ExpectedTensor {
    /// The Hugging Face name (`model.layers.0.self_attn.q_proj.weight`).
    pub name: String,
    /// The shape.
    pub shape: Vec<i64>,
    /// The dtype the model computes with (stored f16/bf16 convert to f32).
    pub dtype: DType,
}

/// The tensors of one checkpoint: safetensors (one file or several shards) or a GGUF
/// model file (its tensors under their Hugging Face names).
#[derive(Debug)]
pub struct WeightStore {
    /// The file or index the store was opened from (named in errors).
    source: PathBuf,
    backing: Backing,
}

/// Where a store's tensors are.
#[derive(Debug)]
enum Backing {
    Safetensors {
        files: Vec<SafetensorsFile>,
        /// Tensor name to the index of the file holding it.
        locations: BTreeMap<String, usize>,
    },
    Gguf(GgufModel),
}

/// How a tensor is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoredAs {
    /// Elements of a dtype (safetensors, or a GGUF F32/F16/BF16 tensor).
    Dtype(DType),
    /// ggml's quantized blocks (a GGUF tensor), dequantized to f32 as it loads.
    Blocks(GgmlType),
}

/// A stored tensor: the file holding it, its shape and how it is stored.
#[derive(Clone, Copy, Debug)]
pub struct TensorEntry<'a> {
    /// The file.
    pub file: &'a Path,
    /// Its shape (Hugging Face's order).
    pub shape: &'a [i64],
    /// How it is stored.
    pub stored: StoredAs,
}

/// Whether `path` names a GGUF file (by its extension).
pub fn is_gguf(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
}

impl WeightStore {
    /// Opens a checkpoint: a folder (its `model.safetensors`, else its
    /// `model.safetensors.index.json`), an index file (`*.index.json`), a GGUF model
    /// file (`*.gguf`) or one safetensors file.
    pub fn open(path: &Path) -> Result<WeightStore, WeightError> {
        if path.is_dir() {
            let (single, index) = (path.join(SINGLE_FILE), path.join(INDEX_FILE));
            return match (single.is_file(), index.is_file()) {
                (true, _) => WeightStore::open_file(&single),
                (false, true) => WeightStore::open_index(&index),
                (false, false) => Err(WeightError::NoWeights {
                    dir: path.to_path_buf(),
                }),
            };
        }
        let is_index = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.ends_with(".index.json"));
        if is_index {
            WeightStore::open_index(path)
        } else if is_gguf(path) {
            Ok(WeightStore::from_gguf(GgufModel::open(path)?))
        } else {
            WeightStore::open_file(path)
        }
    }

    /// The tensors of a GGUF model, by their Hugging Face names.
    pub fn from_gguf(model: GgufModel) -> WeightStore {
        WeightStore {
            source: model.path().to_path_buf(),
            backing: Backing::Gguf(model),
        }
    }

    /// The GGUF model the store reads, if it reads one.
    pub fn gguf(&self) -> Option<&GgufModel> {
        match &self.backing {
            Backing::Gguf(model) => Some(model),
            Backing::Safetensors { .. } => None,
        }
    }

    /// Opens one safetensors file.
    pub fn open_file(path: &Path) -> Result<WeightStore, WeightError> {
        let file = SafetensorsFile::open(path)?;
        WeightStore::from_files(path, vec![file])
    }

    /// Opens a sharded checkpoint from its index: every shard it names, each checked to
    /// hold the tensors the index puts in it.
    pub fn open_index(path: &Path) -> Result<WeightStore, WeightError> {
        let index = index::read_index(path)?;
        let files = index
            .shards
            .iter()
            .map(|shard| SafetensorsFile::open(shard))
            .collect::<Result<Vec<_>, _>>()?;
        for (tensor, shard) in &index.weight_map {
            let holder = files.iter().find(|f| f.path() == shard);
            if holder.is_none_or(|f| f.info(tensor).is_none()) {
                return Err(WeightError::NotInShard {
                    tensor: tensor.clone(),
                    file: shard.clone(),
                });
            }
        }
        WeightStore::from_files(path, files)
    }

    /// A store over `files`; a tensor stored in two of them is an error.
    fn from_files(source: &Path, files: Vec<SafetensorsFile>) -> Result<WeightStore, WeightError> {
        let mut locations = BTreeMap::new();
        for (i, file) in files.iter().enumerate() {
            for name in file.tensors().keys() {
                if let Some(first) = locations.insert(name.clone(), i) {
                    return Err(WeightError::Duplicate {
                        tensor: name.clone(),
                        first: files[first].path().to_path_buf(),
                        second: file.path().to_path_buf(),
                    });
                }
            }
        }
        Ok(WeightStore {
            source: source.to_path_buf(),
            backing: Backing::Safetensors { files, locations },
        })
    }

    /// The file or index the store was opened from.
    pub fn source(&self) -> &Path {
        &self.source
    }

    /// Every stored tensor name, sorted.
    pub fn names(&self) -> Box<dyn Iterator<Item = &str> + '_> {
        match &self.backing {
            Backing::Safetensors { locations, .. } => {
                Box::new(locations.keys().map(String::as_str))
            }
            Backing::Gguf(model) => Box::new(model.tensors().keys().map(String::as_str)),
        }
    }

    /// The file holding tensor `name`, its shape and how it is stored.
    pub fn info(&self, name: &str) -> Option<TensorEntry<'_>> {
        match &self.backing {
            Backing::Safetensors { files, locations } => {
                let file = &files[*locations.get(name)?];
                let info = file.info(name)?;
                Some(TensorEntry {
                    file: file.path(),
                    shape: &info.shape,
                    stored: StoredAs::Dtype(info.dtype),
                })
            }
            Backing::Gguf(model) => {
                let tensor = model.tensors().get(name)?;
                let stored = match GGUF_DTYPES
                    .iter()
                    .find(|(n, _)| *n == tensor.ggml_type.name)
                {
                    Some(&(_, dtype)) => StoredAs::Dtype(dtype),
                    None => StoredAs::Blocks(tensor.ggml_type),
                };
                Some(TensorEntry {
                    file: model.path(),
                    shape: &tensor.shape,
                    stored,
                })
            }
        }
    }

    /// Tensor `name` loaded as `dtype` (see [`SafetensorsFile::load`]; a GGUF tensor is
    /// dequantized to f32, then converted).
    pub fn load(&self, name: &str, dtype: DType) -> Result<Tensor, WeightError> {
        let not_found = || WeightError::NotFound {
            tensor: name.to_string(),
            source_name: self.source.clone(),
        };
        match &self.backing {
            Backing::Safetensors { files, locations } => {
                let &index = locations.get(name).ok_or_else(not_found)?;
                files[index].load(name, dtype)
            }
            Backing::Gguf(model) => {
                let shape = &model.tensors().get(name).ok_or_else(not_found)?.shape;
                let tensor_error = |source| WeightError::Tensor {
                    tensor: name.to_string(),
                    file: self.source.clone(),
                    source,
                };
                let values = Tensor::from_slice(&model.load(name)?, shape).map_err(tensor_error)?;
                if dtype == DType::F32 {
                    return Ok(values);
                }
                let bytes = values.as_bytes().map_err(tensor_error)?;
                let converted = convert::convert_bytes(bytes, DType::F32, dtype)
                    .map_err(|e| convert::load_error(e, name, &self.source, DType::F32, dtype))?;
                Tensor::from_bytes(dtype, shape, &converted).map_err(tensor_error)
            }
        }
    }

    /// Checks the checkpoint against `expected` both ways — every expected tensor is
    /// stored with its shape, and every stored tensor is expected — then loads them, in
    /// the order of `expected`.
    pub fn load_expected(&self, expected: &[ExpectedTensor]) -> Result<Vec<Tensor>, WeightError> {
        self.check_expected(expected)?;
        expected
            .iter()
            .map(|e| self.load(&e.name, e.dtype))
            .collect()
    }

    /// [`WeightStore::load_expected`], then every float weight checked for NaN and
    /// infinity: a checkpoint that holds one is broken, and the model would compute
    /// garbage from it without a word. A weight borrowed from a file's mapping leaves the
    /// resident set once checked ([`release_resident_pages`]), so the check never holds
    /// the whole checkpoint in memory.
    pub fn load_expected_finite(
        &self,
        expected: &[ExpectedTensor],
    ) -> Result<Vec<Tensor>, WeightError> {
        let tensors = self.load_expected(expected)?;
        for (tensor, e) in tensors.iter().zip(expected) {
            let non_finite = first_non_finite(tensor);
            release_resident_pages(tensor);
            if let Some((index, value)) = non_finite {
                return Err(WeightError::NonFinite {
                    tensor: e.name.clone(),
                    file: self
                        .info(&e.name)
                        .map_or(self.source.clone(), |entry| entry.file.into()),
                    index,
                    value,
                });
            }
        }
        Ok(tensors)
    }

    /// The both-ways check of [`WeightStore::load_expected`], without loading.
    pub fn check_expected(&self, expected: &[ExpectedTensor]) -> Result<(), WeightError> {
        let missing: Vec<&ExpectedTensor> = expected
            .iter()
            .filter(|e| self.info(&e.name).is_none())
            .collect();
        if let Some(first) = missing.first() {
            return Err(WeightError::Missing {
                tensor: first.name.clone(),
                source_name: self.source.clone(),
                expected: first.shape.clone(),
                more: missing.len() - 1,
            });
        }
        let wanted: std::collections::BTreeSet<&str> =
            expected.iter().map(|e| e.name.as_str()).collect();
        let unexpected: Vec<&str> = self.names().filter(|n| !wanted.contains(n)).collect();
        if let Some(entry) = unexpected.first().and_then(|n| self.info(n)) {
            return Err(WeightError::Unexpected {
                tensor: unexpected[0].to_string(),
                file: entry.file.to_path_buf(),
                shape: entry.shape.to_vec(),
                more: unexpected.len() - 1,
            });
        }
        for e in expected {
            if let Some(entry) = self.info(&e.name) {
                let stored_shape = stored_as(e.dtype, &e.shape).map(|(_, shape)| shape);
                if entry.shape != e.shape && stored_shape.as_deref() != Some(entry.shape) {
                    return Err(WeightError::Shape {
                        tensor: e.name.clone(),
                        file: entry.file.to_path_buf(),
                        expected: e.shape.clone(),
                        got: entry.shape.to_vec(),
                    });
                }
            }
        }
        Ok(())
    }
}

/// The flat index and value of the first NaN or infinity of a float `tensor`, if any.
fn first_non_finite(tensor: &Tensor) -> Option<(usize, f32)> {
    fn find<T: crate::Element>(tensor: &Tensor, widen: impl Fn(T) -> f32) -> Option<(usize, f32)> {
        let values = tensor.as_slice::<T>().ok()?;
        values
            .iter()
            .map(|&v| widen(v))
            .enumerate()
            .find(|(_, v)| !v.is_finite())
    }
    match tensor.dtype() {
        DType::F32 => find::<f32>(tensor, |v| v),
        DType::F16 => find::<half::f16>(tensor, half::f16::to_f32),
        DType::BF16 => find::<half::bf16>(tensor, half::bf16::to_f32),
        _ => None,
    }
}
