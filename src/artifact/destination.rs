//! Where `compile -o` writes: the output folder resolved to an absolute path with a real
//! name, what it holds now, and the swap that puts a complete artifact in its place
//! without removing anything that is not part of an earlier artifact.

use super::error::ArtifactError;
use oxrelax_runtime::artifact::MANIFEST_FILE;
use oxrelax_runtime::files::TEXT_FILE_LIMIT;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What an output folder holds before the compile.
#[derive(Debug)]
pub enum Destination {
    /// Nothing: the folder does not exist.
    Absent,
    /// An empty folder.
    Empty,
    /// An earlier artifact: its files (artifact-relative, each listed by its manifest)
    /// and nothing else.
    Artifact(BTreeSet<PathBuf>),
}

/// `out` as an absolute path whose last component is a folder name (`.`, `..` and
/// symlinks resolved), so that its sibling staging folder and the final rename are well
/// defined; the file-system root is refused.
pub fn resolve_output(out: &Path) -> Result<PathBuf, ArtifactError> {
    let io = |source| ArtifactError::Io {
        path: out.to_path_buf(),
        source,
    };
    let absolute = std::path::absolute(out).map_err(io)?;
    let resolved = match std::fs::canonicalize(&absolute) {
        Ok(path) => path,
        Err(_) => {
            let parent = absolute.parent().unwrap_or(Path::new("/"));
            let name = absolute.file_name();
            let parent = std::fs::canonicalize(parent).map_err(|source| ArtifactError::Io {
                path: parent.to_path_buf(),
                source,
            })?;
            // A path ending in `..` has no name: `parent` (then canonical) is its folder.
            match name {
                Some(name) => parent.join(name),
                None => parent,
            }
        }
    };
    match resolved.file_name() {
        Some(_) => Ok(resolved),
        None => Err(ArtifactError::Destination {
            path: out.to_path_buf(),
            reason: "is the file-system root".into(),
        }),
    }
}

/// Inspects the resolved output folder `out`: absent, empty, or an earlier artifact
/// holding only the files its manifest lists. Anything else (a file, a folder of other
/// files, an artifact beside files of the user's, a manifest that does not parse) is
/// refused, naming what is in the way.
pub fn inspect(out: &Path) -> Result<Destination, ArtifactError> {
    let refuse = |reason: String| ArtifactError::Destination {
        path: out.to_path_buf(),
        reason,
    };
    let meta = match std::fs::symlink_metadata(out) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Destination::Absent),
        Err(source) => {
            return Err(ArtifactError::Io {
                path: out.to_path_buf(),
                source,
            })
        }
    };
    if !meta.is_dir() {
        return Err(refuse("exists and is not a folder".into()));
    }
    let mut entries = std::fs::read_dir(out).map_err(|source| ArtifactError::Io {
        path: out.to_path_buf(),
        source,
    })?;
    if entries.next().is_none() {
        return Ok(Destination::Empty);
    }
    // Checked before walking the folder, which may be any folder of the user's.
    let Some(listed) = artifact_files(out) else {
        return Err(refuse("is not an artifact or an empty folder".into()));
    };
    listed_files_under(out, &listed).map(Destination::Artifact)
}

/// The files (not folders; a symlink counts as a file) under the artifact folder `dir`,
/// relative to it; the first that `listed` does not hold is refused, naming it.
fn listed_files_under(
    dir: &Path,
    listed: &BTreeSet<PathBuf>,
) -> Result<BTreeSet<PathBuf>, ArtifactError> {
    let mut found = BTreeSet::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(relative) = pending.pop() {
        let path = dir.join(&relative);
        let io = |source| ArtifactError::Io {
            path: path.clone(),
            source,
        };
        for entry in std::fs::read_dir(&path).map_err(io)? {
            let entry = entry.map_err(io)?;
            let child = relative.join(entry.file_name());
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                pending.push(child);
            } else if listed.contains(&child) {
                found.insert(child);
            } else {
                let reason = format!(
                    "holds {}, which is not part of the artifact there; not writing over it",
                    child.display()
                );
                return Err(ArtifactError::Destination {
                    path: dir.to_path_buf(),
                    reason,
                });
            }
        }
    }
    Ok(found)
}

/// The files an artifact's manifest in `dir` lists (with the manifest itself), if it
/// has a manifest whose JSON names them. Any format version's manifest counts: every
/// version lists its files in `files`.
fn artifact_files(dir: &Path) -> Option<BTreeSet<PathBuf>> {
    let manifest = dir.join(MANIFEST_FILE);
    let text = oxrelax_runtime::files::read_capped(&manifest, TEXT_FILE_LIMIT).ok()?;
    let json: serde_json::Value = serde_json::from_slice(&text).ok()?;
    let listed = json.get("files")?.as_object()?.keys();
    let tokenizer = json.get("tokenizer_files").and_then(|f| f.as_array());
    let tokenizer = tokenizer.into_iter().flatten().filter_map(|f| f.as_str());
    let names = listed.map(String::as_str).chain(tokenizer);
    let files = std::iter::once(MANIFEST_FILE)
        .chain(names)
        .map(PathBuf::from);
    Some(files.collect())
}

/// Puts the complete artifact `staging` at `out` (as [`inspect`] found it): renames it
/// into place, or swaps it with the earlier artifact, then removes the earlier
/// artifact's listed files and its then empty folders. Should anything else appear in
/// the earlier folder meanwhile, it stays, in the hidden folder beside `out`.
pub fn move_into_place(
    staging: &Path,
    out: &Path,
    found: &Destination,
) -> Result<(), ArtifactError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ArtifactError::Io { path, source }
    };
    match found {
        Destination::Absent => std::fs::rename(staging, out).map_err(io(out)),
        Destination::Empty => {
            std::fs::remove_dir(out).map_err(io(out))?;
            std::fs::rename(staging, out).map_err(io(out))
        }
        Destination::Artifact(files) => {
            let earlier = sibling(out, "replaced");
            std::fs::rename(out, &earlier).map_err(io(out))?;
            if let Err(source) = std::fs::rename(staging, out) {
                let _ = std::fs::rename(&earlier, out);
                return Err(ArtifactError::Io {
                    path: out.to_path_buf(),
                    source,
                });
            }
            remove_artifact_files(&earlier, files);
            Ok(())
        }
    }
}

/// Removes `files` from the earlier artifact folder `dir`, then the folders that held
/// them and `dir` itself, each only if empty.
fn remove_artifact_files(dir: &Path, files: &BTreeSet<PathBuf>) {
    for file in files {
        let _ = std::fs::remove_file(dir.join(file));
    }
    let folders: BTreeSet<&Path> = files.iter().flat_map(|f| f.ancestors().skip(1)).collect();
    // Deepest first, so a folder is empty when its turn comes; `dir` itself is last.
    for folder in folders.iter().rev() {
        let _ = std::fs::remove_dir(dir.join(folder));
    }
}

/// The hidden sibling of `out` named for this process and `purpose`: on the same file
/// system, so renames between them are atomic.
pub fn sibling(out: &Path, purpose: &str) -> PathBuf {
    let name = out.file_name().unwrap_or_default().to_string_lossy();
    out.with_file_name(format!(".{name}.{purpose}-{}", std::process::id()))
}
