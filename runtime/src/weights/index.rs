//! The index of a sharded checkpoint (`model.safetensors.index.json`): which shard file
//! holds each tensor.

use super::WeightError;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Deserialize)]
struct IndexJson {
    weight_map: BTreeMap<String, String>,
}

/// A parsed index: tensor name to shard path (resolved next to the index file).
#[derive(Debug)]
pub(crate) struct ShardIndex {
    /// Tensor name to the shard holding it.
    pub weight_map: BTreeMap<String, PathBuf>,
    /// Every shard, once each, in name order.
    pub shards: Vec<PathBuf>,
}

/// Reads and parses the index at `path`.
pub(crate) fn read_index(path: &Path) -> Result<ShardIndex, WeightError> {
    let text = crate::files::read_text(path).map_err(|source| WeightError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_index(path, &text)
}

/// Parses index JSON `text` read from `path`. Shard names must be plain file names
/// (no folders), as Hugging Face writes them.
pub(crate) fn parse_index(path: &Path, text: &str) -> Result<ShardIndex, WeightError> {
    let invalid = |reason: String| WeightError::Index {
        path: path.to_path_buf(),
        reason,
    };
    let json: IndexJson = serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut weight_map = BTreeMap::new();
    for (tensor, shard) in json.weight_map {
        let plain = Path::new(&shard)
            .file_name()
            .is_some_and(|f| f == shard.as_str());
        if !plain {
            return Err(invalid(format!(
                "tensor `{tensor}` is mapped to `{shard}`, which is not a file name in the index's folder"
            )));
        }
        weight_map.insert(tensor, dir.join(shard));
    }
    if weight_map.is_empty() {
        return Err(invalid("the weight_map is empty".to_string()));
    }
    let mut shards: Vec<PathBuf> = weight_map.values().cloned().collect();
    shards.sort();
    shards.dedup();
    Ok(ShardIndex { weight_map, shards })
}
