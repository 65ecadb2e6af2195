//! A GGUF model seen as the Hugging Face folder it was converted from: its `config.json`,
//! its tensors under their Hugging Face names and shapes (dequantized to f32, with what
//! llama.cpp's converter changed undone), and its `tokenizer.json` and
//! `tokenizer_config.json` built from the metadata.

mod arch;
mod config;
mod tokenizer;

#[cfg(test)]
mod tests;

use super::{GgmlType, GgufError, GgufFile};
use arch::ArchSpec;
use std::collections::BTreeMap;
use std::path::Path;

/// One tensor of the file under its Hugging Face name.
#[derive(Clone, Debug)]
pub struct HfTensor {
    /// Its name in the GGUF file.
    pub gguf_name: String,
    /// Its Hugging Face shape (the GGUF dimensions, outermost first).
    pub shape: Vec<i64>,
    /// How the file stores it.
    pub ggml_type: GgmlType,
    /// What loading undoes.
    fix: Fix,
}

/// What llama.cpp's converter changed in a tensor, undone when it loads.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fix {
    /// Stored as converted from.
    None,
    /// The rows of each of `heads` heads interleaved for ggml's RoPE (q and k of Llama).
    InterleavedRows { heads: usize },
    /// A constant added to every value (Gemma's norm weights, stored as 1 + w).
    Shift(f32),
}

/// A GGUF model file, checked against its architecture: every tensor has a Hugging Face
/// counterpart of a consistent shape.
#[derive(Debug)]
pub struct GgufModel {
    file: GgufFile,
    config: serde_json::Value,
    tensors: BTreeMap<String, HfTensor>,
}

impl GgufModel {
    /// Opens and checks the GGUF model at `path`.
    pub fn open(path: &Path) -> Result<GgufModel, GgufError> {
        GgufModel::new(GgufFile::open(path)?)
    }

    /// `file` as a model: its architecture supported, its config derived, its tensors
    /// named.
    pub fn new(file: GgufFile) -> Result<GgufModel, GgufError> {
        let name = file.get_str("general.architecture")?;
        let arch = ArchSpec::find(name).ok_or_else(|| GgufError::UnsupportedArchitecture {
            path: file.path().to_path_buf(),
            arch: name.to_string(),
            supported: ArchSpec::supported(),
        })?;
        let config = config::config_json(&file, arch)?;
        let tensors = name_tensors(&file, arch, &config)?;
        Ok(GgufModel {
            file,
            config,
            tensors,
        })
    }

    /// The file.
    pub fn file(&self) -> &GgufFile {
        &self.file
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// The Hugging Face `config.json` the metadata describes.
    pub fn config_json(&self) -> &serde_json::Value {
        &self.config
    }

    /// Every tensor, by Hugging Face name.
    pub fn tensors(&self) -> &BTreeMap<String, HfTensor> {
        &self.tensors
    }

    /// The values of tensor `name` (a Hugging Face name) as f32, in Hugging Face order
    /// (row-major over [`HfTensor::shape`]).
    pub fn load(&self, name: &str) -> Result<Vec<f32>, GgufError> {
        let tensor = self.tensors.get(name).ok_or_else(|| GgufError::NoTensor {
            path: self.path().to_path_buf(),
            tensor: name.to_string(),
        })?;
        let mut values = self.file.dequantize(&tensor.gguf_name)?;
        match tensor.fix {
            Fix::None => {}
            Fix::Shift(shift) => values.iter_mut().for_each(|v| *v -= shift),
            Fix::InterleavedRows { heads } => {
                // Checked when the tensors were named: rows split into heads of pairs.
                let rows = tensor.shape[0] as usize;
                let width = values.len() / rows;
                values = deinterleave_rows(&values, heads, rows / heads, width);
            }
        }
        Ok(values)
    }

    /// The `tokenizer.json` the metadata describes (Hugging Face's format).
    pub fn tokenizer_json(&self) -> Result<String, GgufError> {
        tokenizer::tokenizer_json(&self.file)
    }

    /// The `tokenizer_config.json` the metadata describes: the special tokens, whether
    /// BOS/EOS are added, the chat template.
    pub fn tokenizer_config_json(&self) -> Result<serde_json::Value, GgufError> {
        tokenizer::tokenizer_config(&self.file)
    }

    /// The `generation_config.json` the metadata describes: BOS and the ids that end a
    /// reply.
    pub fn generation_config_json(&self) -> Result<serde_json::Value, GgufError> {
        tokenizer::generation_config(&self.file)
    }
}

/// Every tensor of `file` under its Hugging Face name, with the fix loading applies; an
/// error for a tensor the architecture has no place for, or whose shape cannot be fixed.
fn name_tensors(
    file: &GgufFile,
    arch: &ArchSpec,
    config: &serde_json::Value,
) -> Result<BTreeMap<String, HfTensor>, GgufError> {
    let count = |key: &str| config[key].as_u64().unwrap_or(0) as usize;
    let heads = [
        ("self_attn.q_proj", count("num_attention_heads")),
        ("self_attn.k_proj", count("num_key_value_heads")),
    ];
    let mut tensors = BTreeMap::new();
    for info in file.tensors() {
        let bad = |reason: String| GgufError::BadTensor {
            path: file.path().to_path_buf(),
            tensor: info.name.clone(),
            reason,
        };
        let hf = arch
            .hf_name(&info.name)
            .ok_or_else(|| GgufError::UnmappedTensor {
                path: file.path().to_path_buf(),
                tensor: info.name.clone(),
                arch: arch.gguf.to_string(),
            })?;
        let shape: Vec<i64> = info.dims.iter().rev().map(|&d| d as i64).collect();
        let rotated = heads.iter().find(|(proj, _)| hf.contains(proj));
        let fix = match rotated {
            Some(&(_, heads)) if arch.interleaved_rope => {
                let rows = shape.first().copied().unwrap_or(0) as usize;
                if heads == 0 || rows == 0 || !rows.is_multiple_of(2 * heads) {
                    return Err(bad(format!(
                        "{rows} rows do not split into {heads} heads of pairs"
                    )));
                }
                Fix::InterleavedRows { heads }
            }
            _ if arch.norm_shift != 0.0 && hf.ends_with("norm.weight") => {
                Fix::Shift(arch.norm_shift)
            }
            _ => Fix::None,
        };
        let tensor = HfTensor {
            gguf_name: info.name.clone(),
            shape,
            ggml_type: info.ggml_type,
            fix,
        };
        tensors.insert(hf, tensor);
    }
    Ok(tensors)
}

/// Rows of `heads` heads of `head_rows` rows each (of `width` values), reordered from
/// ggml's interleaved RoPE layout (pair `i` of a head at rows `2i`, `2i + 1`) back to
/// Hugging Face's rotate-half layout (its halves at rows `i` and `i + head_rows / 2`).
fn deinterleave_rows(values: &[f32], heads: usize, head_rows: usize, width: usize) -> Vec<f32> {
    let half = head_rows / 2;
    let mut out = vec![0.0; values.len()];
    for head in 0..heads {
        for row in 0..head_rows {
            let (t, i) = (row / half, row % half);
            let from = (head * head_rows + 2 * i + t) * width;
            let to = (head * head_rows + row) * width;
            out[to..to + width].copy_from_slice(&values[from..from + width]);
        }
    }
    out
}
