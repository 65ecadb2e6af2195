//! Reading the files a user names: small ones (configs, tokenizers, manifests, texts)
//! read whole, no larger than a limit checked before reading, and large ones (weights)
//! mapped ([`FileBytes`]); regular files only, so a FIFO never blocks and a device such
//! as `/dev/zero` is never read until memory runs out.

use std::io::{Error, ErrorKind, Read};
use std::path::Path;

/// The largest text or JSON file read whole: a tokenizer.json is a few MB, an
/// evaluation text tens of MB.
pub const TEXT_FILE_LIMIT: u64 = 1 << 30;

/// The bytes of the regular file at `path` (symlinks followed), refused if it is not a
/// regular file or holds more than `limit` bytes.
pub fn read_capped(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let meta = regular_file(path)?;
    let too_large = |len: u64| {
        Error::new(
            ErrorKind::InvalidData,
            format!("holds {len} bytes or more, over the {limit}-byte limit"),
        )
    };
    if meta.len() > limit {
        return Err(too_large(meta.len()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // One byte past the limit tells a file that grew meanwhile.
    std::fs::File::open(path)?
        .take(limit + 1)
        .read_to_end(&mut bytes)?;
    match bytes.len() as u64 > limit {
        true => Err(too_large(bytes.len() as u64)),
        false => Ok(bytes),
    }
}

/// The metadata of the regular file at `path` (symlinks followed); anything else is an
/// error saying what it is.
fn regular_file(path: &Path) -> std::io::Result<std::fs::Metadata> {
    let meta = std::fs::metadata(path)?;
    if meta.is_file() {
        return Ok(meta);
    }
    let kind = match meta.is_dir() {
        true => "a folder",
        false => "a device, FIFO or socket",
    };
    Err(Error::new(
        ErrorKind::InvalidInput,
        format!("is {kind}, not a regular file"),
    ))
}

/// A file's bytes: a read-only mapping, or bytes in memory (given by the caller, or none
/// for an empty file, which cannot be mapped).
pub enum FileBytes {
    /// The mapped file.
    Mapped(memmap2::Mmap),
    /// Bytes in memory.
    Owned(Vec<u8>),
}

impl FileBytes {
    /// The regular file at `path`, mapped read-only.
    pub fn map(path: &Path) -> std::io::Result<FileBytes> {
        let len = regular_file(path)?.len();
        let file = std::fs::File::open(path)?;
        if len == 0 {
            return Ok(FileBytes::Owned(Vec::new()));
        }
        // SAFETY: the mapping is read-only; like every reader of a mapped file, we rely on
        // no one truncating or rewriting the file while it is mapped.
        Ok(FileBytes::Mapped(unsafe { memmap2::Mmap::map(&file) }?))
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        match self {
            FileBytes::Mapped(map) => map,
            FileBytes::Owned(bytes) => bytes,
        }
    }
}

/// The UTF-8 text of the regular file at `path`, as [`read_capped`] with
/// [`TEXT_FILE_LIMIT`].
pub fn read_text(path: &Path) -> std::io::Result<String> {
    let bytes = read_capped(path, TEXT_FILE_LIMIT)?;
    String::from_utf8(bytes).map_err(|e| Error::new(ErrorKind::InvalidData, e.utf8_error()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_folders_and_large_files_are_refused_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_text(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "is a device, FIFO or socket, not a regular file"
        );
        let err = read_text(dir.path()).unwrap_err();
        assert_eq!(err.to_string(), "is a folder, not a regular file");
        let file = dir.path().join("big");
        std::fs::write(&file, [b'x'; 100]).unwrap();
        let err = read_capped(&file, 99).unwrap_err();
        assert_eq!(
            err.to_string(),
            "holds 100 bytes or more, over the 99-byte limit"
        );
        assert_eq!(read_capped(&file, 100).unwrap().len(), 100);
        std::fs::write(&file, [0xff]).unwrap();
        assert_eq!(read_text(&file).unwrap_err().kind(), ErrorKind::InvalidData);
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        let err = read_text(&fifo).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
        let err = FileBytes::map(&fifo).err().unwrap();
        assert!(err.to_string().contains("not a regular file"), "{err}");
    }
}
