//! GGUF files (llama.cpp's model format), read as untrusted input: the header parsed and
//! checked once (every count, length and tensor range checked before use, versions 2 and
//! 3, little-endian), typed metadata, and tensor data as raw blocks or dequantized to f32.

mod dequant;
mod error;
mod header;
mod hf;
mod meta;
mod reader;
mod types;

#[cfg(test)]
mod tests;

pub use error::GgufError;
pub use header::{TensorInfo, DEFAULT_ALIGNMENT};
pub use hf::{GgufModel, HfTensor};
pub use meta::{MetaArray, MetaType, MetaValue};
pub use types::GgmlType;

use crate::files::FileBytes;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A GGUF file, its header checked: metadata by key, tensor infos in file order, and each
/// tensor's data inside the file, aligned, not overlapping another's.
pub struct GgufFile {
    path: PathBuf,
    bytes: FileBytes,
    header: header::Header,
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile")
            .field("path", &self.path)
            .field("version", &self.header.version)
            .field("metadata", &self.header.metadata.len())
            .field("tensors", &self.header.tensors.len())
            .finish()
    }
}

impl GgufFile {
    /// Maps the file at `path` and parses and checks its header.
    pub fn open(path: &Path) -> Result<GgufFile, GgufError> {
        let bytes = FileBytes::map(path).map_err(|source| GgufError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        GgufFile::with_bytes(path, bytes)
    }

    /// Parses and checks GGUF `bytes` already in memory, as [`GgufFile::open`] checks a
    /// file's; `path` names them in errors.
    pub fn from_bytes(path: &Path, bytes: Vec<u8>) -> Result<GgufFile, GgufError> {
        GgufFile::with_bytes(path, FileBytes::Owned(bytes))
    }

    fn with_bytes(path: &Path, bytes: FileBytes) -> Result<GgufFile, GgufError> {
        let header = header::parse(path, bytes.as_slice())?;
        Ok(GgufFile {
            path: path.to_path_buf(),
            bytes,
            header,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The GGUF version (2 or 3).
    pub fn version(&self) -> u32 {
        self.header.version
    }

    /// The alignment of tensor data (`general.alignment`, or 32).
    pub fn alignment(&self) -> u64 {
        self.header.alignment
    }

    /// The offset of the data section: the end of the tensor infos, aligned.
    pub fn data_start(&self) -> u64 {
        self.header.data_start
    }

    /// Every metadata entry, by key.
    pub fn metadata(&self) -> &BTreeMap<String, MetaValue> {
        &self.header.metadata
    }

    /// Every tensor info, in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.header.tensors
    }

    /// The tensor named `name`, if the file holds one.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        let &index = self.header.by_name.get(name)?;
        self.header.tensors.get(index)
    }

    /// The tensor named `name`, or an error naming it.
    fn find(&self, name: &str) -> Result<&TensorInfo, GgufError> {
        self.tensor(name).ok_or_else(|| GgufError::NoTensor {
            path: self.path.clone(),
            tensor: name.to_owned(),
        })
    }

    /// The raw bytes (ggml blocks) of tensor `name`: a slice of the file.
    pub fn tensor_bytes(&self, name: &str) -> Result<&[u8], GgufError> {
        let info = self.find(name)?;
        Ok(&self.bytes.as_slice()[info.file_range()])
    }

    /// The values of tensor `name` as f32, in storage order (innermost dimension first),
    /// dequantized block by block as ggml does; a typed error for a type this reader does
    /// not dequantize.
    pub fn dequantize(&self, name: &str) -> Result<Vec<f32>, GgufError> {
        let info = self.find(name)?;
        let ty = info.ggml_type;
        let Some(block_fn) = ty.block_fn() else {
            return Err(GgufError::UnsupportedType {
                path: self.path.clone(),
                tensor: name.to_owned(),
                ty: ty.name,
                type_id: ty.id,
            });
        };
        let bytes = &self.bytes.as_slice()[info.file_range()];
        // The data lies in the file, so the values take at most about 7 times its bytes
        // (Q4_0: 32 values, 128 bytes as f32, in 18 bytes; Q4_K: 256 values in 144 bytes).
        let block_elems = ty.block_elems as usize;
        let mut out = vec![0.0f32; bytes.len() / ty.block_bytes as usize * block_elems];
        for (block, values) in bytes
            .chunks_exact(ty.block_bytes as usize)
            .zip(out.chunks_exact_mut(block_elems))
        {
            block_fn(block, values);
        }
        Ok(out)
    }

    /// The value of `key`, or an error naming it.
    pub fn get(&self, key: &str) -> Result<&MetaValue, GgufError> {
        self.header
            .metadata
            .get(key)
            .ok_or_else(|| GgufError::MissingKey {
                path: self.path.clone(),
                key: key.to_owned(),
            })
    }

    /// An error: `key` holds `found`, not a `wanted`.
    fn wrong_type(&self, key: &str, wanted: &'static str, found: &MetaValue) -> GgufError {
        GgufError::WrongType {
            path: self.path.clone(),
            key: key.to_owned(),
            wanted,
            found: found.to_string(),
        }
    }

    /// The string value of `key`.
    pub fn get_str(&self, key: &str) -> Result<&str, GgufError> {
        match self.get(key)? {
            MetaValue::String(s) => Ok(s),
            other => Err(self.wrong_type(key, "string", other)),
        }
    }

    /// The value of `key` as a u32: an integer of any type whose value fits.
    pub fn get_u32(&self, key: &str) -> Result<u32, GgufError> {
        let value = self.get(key)?;
        value
            .as_integer()
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| self.wrong_type(key, "u32", value))
    }

    /// The value of `key` as a u64: an integer of any type whose value fits.
    pub fn get_u64(&self, key: &str) -> Result<u64, GgufError> {
        let value = self.get(key)?;
        value
            .as_integer()
            .and_then(|v| u64::try_from(v).ok())
            .ok_or_else(|| self.wrong_type(key, "u64", value))
    }

    /// The f32 value of `key` (an f32, or an f64 that converts to f32 exactly).
    pub fn get_f32(&self, key: &str) -> Result<f32, GgufError> {
        match self.get(key)? {
            &MetaValue::F32(v) => Ok(v),
            &MetaValue::F64(v) if f64::from(v as f32) == v => Ok(v as f32),
            other => Err(self.wrong_type(key, "f32", other)),
        }
    }

    /// The bool value of `key`.
    pub fn get_bool(&self, key: &str) -> Result<bool, GgufError> {
        match self.get(key)? {
            &MetaValue::Bool(v) => Ok(v),
            other => Err(self.wrong_type(key, "bool", other)),
        }
    }

    /// The array value of `key`.
    pub fn get_array(&self, key: &str) -> Result<&MetaArray, GgufError> {
        match self.get(key)? {
            MetaValue::Array(a) => Ok(a),
            other => Err(self.wrong_type(key, "array", other)),
        }
    }

    /// The array of strings value of `key` (a tokenizer's tokens, say).
    pub fn get_str_array(&self, key: &str) -> Result<&[String], GgufError> {
        match self.get(key)? {
            MetaValue::Array(MetaArray::String(v)) => Ok(v),
            other => Err(self.wrong_type(key, "array of string", other)),
        }
    }
}
