//! Kernels compiled ahead of time: a shared library (`kernels.so`, `kernels.dylib`) opened
//! at run time, each kernel resolved by its [`super::kernel_symbol`] once, when opened,
//! after the library's own record of every kernel's signature ([`SIGNATURES_SYMBOL`],
//! written by the compiler) was checked against the declarations the VM will call the
//! kernels with: the buffers a kernel reads and writes are the ones it was compiled for.

use super::{kernel_symbol, KernelFn, KernelLibrary};
use crate::vm::KernelDecl;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Why a kernel library could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum SharedLibraryError {
    /// The dynamic loader refused the file.
    #[error("{path}: cannot load the kernel library: {reason}")]
    Open {
        /// The library.
        path: PathBuf,
        /// The loader's message.
        reason: String,
    },
    /// The library has no signature table, or one that does not parse.
    #[error("{path}: the kernel library's signature table ({SIGNATURES_SYMBOL}) {reason}")]
    Signatures {
        /// The library.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The executable declares a kernel otherwise than the library was compiled with.
    #[error(
        "{path}: kernel `{kernel}` was compiled as {compiled}, but the executable calls it as {declared}"
    )]
    SignatureMismatch {
        /// The library.
        path: PathBuf,
        /// The kernel.
        kernel: String,
        /// Its signature in the library (JSON).
        compiled: String,
        /// Its declaration in the executable (JSON).
        declared: String,
    },
    /// A kernel the executable calls is not exported by the library.
    #[error("{path}: the kernel library has no kernel `{kernel}` (symbol `{symbol}`)")]
    MissingKernel {
        /// The library.
        path: PathBuf,
        /// The kernel's name.
        kernel: String,
        /// The symbol looked up.
        symbol: String,
    },
}

/// The symbol of a kernel library's signature table: a little-endian `u64` length, then
/// that many bytes of JSON, the [`KernelDecl`]s of its kernels.
pub const SIGNATURES_SYMBOL: &str = "oxrelax_kernel_signatures";

/// An opened kernel library and its kernels by name.
pub struct SharedKernelLibrary {
    kernels: HashMap<String, KernelFn>,
    /// Keeps the code mapped while the kernels are used (dropped last).
    _library: libloading::Library,
}

impl SharedKernelLibrary {
    /// Opens the library at `path`, checks that it records every kernel of `decls` with
    /// exactly that signature, and resolves them.
    ///
    /// # Safety
    /// Loading runs the library's initializers, and every symbol resolved is taken to be
    /// a kernel with the ABI of [`KernelFn`] honouring [`KernelLibrary`]'s contract: the
    /// library must have been written by the compiler (the artifact's hash check is what
    /// establishes that).
    pub unsafe fn open(
        path: &Path,
        decls: &[KernelDecl],
    ) -> Result<SharedKernelLibrary, SharedLibraryError> {
        // Checked in the file before the loader maps it: a segment past the file's end
        // would fault (SIGBUS) when touched.
        let compiled = signature_table(path)?;
        // SAFETY: the caller vouches for the library (see above).
        let library =
            unsafe { libloading::Library::new(path) }.map_err(|e| SharedLibraryError::Open {
                path: path.to_path_buf(),
                reason: e.to_string(),
            })?;
        let mut kernels = HashMap::new();
        for decl in decls {
            let name = decl.name.as_str();
            let symbol = kernel_symbol(name);
            let missing = || SharedLibraryError::MissingKernel {
                path: path.to_path_buf(),
                kernel: name.to_string(),
                symbol: symbol.clone(),
            };
            let recorded = compiled
                .iter()
                .find(|k| k.name == name)
                .ok_or_else(missing)?;
            check_signature(path, recorded, decl)?;
            // SAFETY: the symbol is a kernel with `KernelFn`'s ABI (the caller's contract);
            // the pointer stays valid while `library` is held by the returned value.
            let kernel = unsafe { library.get::<KernelFn>(symbol.as_bytes()) }
                .map(|f| *f)
                .map_err(|_| missing())?;
            kernels.insert(name.to_string(), kernel);
        }
        Ok(SharedKernelLibrary {
            kernels,
            _library: library,
        })
    }
}

// SAFETY: the kernels come from a library the compiler wrote (the contract of `open`),
// and the library stays loaded as long as `self`.
unsafe impl KernelLibrary for SharedKernelLibrary {
    fn lookup(&self, name: &str) -> Option<KernelFn> {
        self.kernels.get(name).copied()
    }
}

/// The signatures the library file at `path` records ([`SIGNATURES_SYMBOL`]), read from
/// the file after checking that it is an object file whose loadable segments lie within
/// it and whose table's length fits its symbol.
fn signature_table(path: &Path) -> Result<Vec<KernelDecl>, SharedLibraryError> {
    use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol};
    let failed = |reason: String| SharedLibraryError::Signatures {
        path: path.to_path_buf(),
        reason,
    };
    let malformed = |reason: String| SharedLibraryError::Open {
        path: path.to_path_buf(),
        reason,
    };
    let data = std::fs::read(path).map_err(|e| malformed(e.to_string()))?;
    let file = object::File::parse(&*data)
        .map_err(|e| malformed(format!("not a complete library (truncated?): {e}")))?;
    for segment in file.segments() {
        let (offset, size) = segment.file_range();
        if offset
            .checked_add(size)
            .is_none_or(|end| end > data.len() as u64)
        {
            let len = data.len();
            return Err(malformed(format!(
                "a segment spans bytes {offset}..{} of a {len}-byte file (truncated?)",
                offset.saturating_add(size)
            )));
        }
    }
    let mut symbols = file.dynamic_symbols().chain(file.symbols());
    let symbol = symbols
        .find(|s| {
            s.name()
                .is_ok_and(|n| n.trim_start_matches('_') == SIGNATURES_SYMBOL)
        })
        .ok_or_else(|| failed("is missing".into()))?;
    let section = symbol
        .section_index()
        .and_then(|i| file.section_by_index(i).ok())
        .ok_or_else(|| failed("is in no section".into()))?;
    let bytes = section.data().map_err(|e| failed(e.to_string()))?;
    let start = symbol.address().wrapping_sub(section.address());
    let table = usize::try_from(start)
        .ok()
        .and_then(|start| bytes.get(start..))
        .ok_or_else(|| failed("lies outside its section".into()))?;
    let len = table
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
        .ok_or_else(|| failed("is shorter than its length".into()))?;
    let room = match symbol.size() {
        0 => table.len() as u64,
        size => size.min(table.len() as u64),
    };
    let json = usize::try_from(len)
        .ok()
        .filter(|&len| len as u64 <= room.saturating_sub(8))
        .and_then(|len| table.get(8..8 + len))
        .ok_or_else(|| {
            failed(format!(
                "claims {len} bytes, more than its {room}-byte symbol holds"
            ))
        })?;
    serde_json::from_slice(json).map_err(|e| failed(format!("does not parse: {e}")))
}

/// Checks that the executable's `declared` kernel is the `compiled` one.
fn check_signature(
    path: &Path,
    compiled: &KernelDecl,
    declared: &KernelDecl,
) -> Result<(), SharedLibraryError> {
    if compiled == declared {
        return Ok(());
    }
    let json = |decl: &KernelDecl| serde_json::to_string(decl).unwrap_or_default();
    Err(SharedLibraryError::SignatureMismatch {
        path: path.to_path_buf(),
        kernel: declared.name.clone(),
        compiled: json(compiled),
        declared: json(declared),
    })
}
