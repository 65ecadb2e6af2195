//! SHA-256 of artifact files: of a file on disk ([`sha256_file`]), or of a file as it is
//! written ([`HashingFile`]).

use super::error::ArtifactError;
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// The SHA-256 of the file at `path`, as lowercase hex.
pub fn sha256_file(path: &Path) -> Result<String, ArtifactError> {
    let io = |source| ArtifactError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = File::open(path).map_err(io)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buffer).map_err(io)?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Bytes written per call: a multiple of every block size direct I/O asks for.
const CHUNK: usize = 8 << 20;

/// The alignment direct I/O asks of buffers and file offsets (the largest logical block
/// size in use).
const ALIGN: usize = 4096;

/// A new file written in 8 MiB chunks and hashed as it is written: each chunk is hashed on
/// a second thread while this one writes it. On Linux the file is opened for direct I/O
/// where the file system allows it (the chunks bypass the page cache and go to the disk
/// as they are); elsewhere, and for the last partial chunk, it is written as any file is.
pub struct HashingFile {
    path: PathBuf,
    file: File,
    direct: bool,
    /// The staging buffer: `CHUNK` bytes starting at `start` are aligned to [`ALIGN`].
    staging: Vec<u8>,
    start: usize,
    filled: usize,
    written: u64,
    hasher: Sha256,
}

impl HashingFile {
    /// Creates (or truncates) the file at `path`, with the mode a new file gets.
    pub fn create(path: &Path) -> Result<HashingFile, ArtifactError> {
        let (file, direct) = match open_direct(path) {
            Some(file) => (file, true),
            None => (File::create(path).map_err(io_at(path))?, false),
        };
        let staging = vec![0u8; CHUNK + ALIGN];
        let start = staging.as_ptr().align_offset(ALIGN).min(ALIGN);
        Ok(HashingFile {
            path: path.to_path_buf(),
            file,
            direct,
            staging,
            start,
            filled: 0,
            written: 0,
            hasher: Sha256::new(),
        })
    }

    /// Appends `bytes`.
    pub fn write(&mut self, mut bytes: &[u8]) -> Result<(), ArtifactError> {
        while !bytes.is_empty() {
            let n = bytes.len().min(CHUNK - self.filled);
            let at = self.start + self.filled;
            self.staging[at..at + n].copy_from_slice(&bytes[..n]);
            self.filled += n;
            bytes = &bytes[n..];
            if self.filled == CHUNK {
                self.flush_chunk()?;
            }
        }
        Ok(())
    }

    /// Writes what is staged and returns the file's SHA-256 as lowercase hex.
    pub fn finish(mut self) -> Result<String, ArtifactError> {
        if self.filled > 0 {
            if self.direct {
                // A partial chunk is not a whole number of blocks: written through an
                // ordinary handle at its offset.
                self.file = ordinary_handle(&self.path).map_err(io_at(&self.path))?;
                self.direct = false;
            }
            self.flush_chunk()?;
        }
        Ok(hex(&self.hasher.finalize()))
    }

    /// Hashes and writes the staged bytes (a second thread hashes while this one writes;
    /// this one, after writing, where no thread can be started).
    fn flush_chunk(&mut self) -> Result<(), ArtifactError> {
        let chunk = &self.staging[self.start..self.start + self.filled];
        let hasher = Mutex::new(std::mem::take(&mut self.hasher));
        let hash = || {
            let mut hasher = hasher.lock().unwrap_or_else(PoisonError::into_inner);
            hasher.update(chunk);
        };
        let file = &self.file;
        let written = std::thread::scope(|scope| {
            let hashing = std::thread::Builder::new().spawn_scoped(scope, hash);
            let written = match write_all_at(file, chunk, self.written) {
                // A file system that opens files for direct I/O but refuses its writes:
                // the chunk again, through an ordinary handle.
                Err(e) if self.direct && e.kind() == std::io::ErrorKind::InvalidInput => {
                    let file = ordinary_handle(&self.path)?;
                    write_all_at(&file, chunk, self.written).map(|()| Some(file))
                }
                other => other.map(|()| None),
            };
            if hashing.is_err() {
                hash();
            }
            written
        });
        self.hasher = hasher.into_inner().unwrap_or_else(PoisonError::into_inner);
        if let Some(buffered) = written.map_err(io_at(&self.path))? {
            self.file = buffered;
            self.direct = false;
        }
        self.written += self.filled as u64;
        self.filled = 0;
        Ok(())
    }
}

fn io_at(path: &Path) -> impl Fn(std::io::Error) -> ArtifactError + '_ {
    move |source| ArtifactError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The existing file at `path` opened for writing without direct I/O.
fn ordinary_handle(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new().write(true).open(path)
}

/// Writes `bytes` at `offset` (positioned writes, so a handle reopened for the last
/// chunk needs no seek).
fn write_all_at(file: &File, bytes: &[u8], offset: u64) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileExt;
        file.write_all_at(bytes, offset)
    }
    #[cfg(not(unix))]
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut file = file;
        file.seek(SeekFrom::Start(offset))?;
        file.write_all(bytes)
    }
}

/// The file at `path` created for direct I/O, where the OS and file system allow it.
#[cfg(target_os = "linux")]
fn open_direct(path: &Path) -> Option<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .ok()
}

/// Direct I/O is used on Linux only.
#[cfg(not(target_os = "linux"))]
fn open_direct(_path: &Path) -> Option<File> {
    None
}
