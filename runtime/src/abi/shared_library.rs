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
        // SAFETY: the caller vouches for the library (see above).
        let library =
            unsafe { libloading::Library::new(path) }.map_err(|e| SharedLibraryError::Open {
                path: path.to_path_buf(),
                reason: e.to_string(),
            })?;
        // SAFETY: the library was written by the compiler (the caller's contract).
        let compiled = unsafe { signature_table(&library, path) }?;
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

/// The signatures the library records ([`SIGNATURES_SYMBOL`]).
///
/// # Safety
/// The library was written by the compiler, so the symbol, if present, is a length and
/// that many readable bytes.
unsafe fn signature_table(
    library: &libloading::Library,
    path: &Path,
) -> Result<Vec<KernelDecl>, SharedLibraryError> {
    let failed = |reason: String| SharedLibraryError::Signatures {
        path: path.to_path_buf(),
        reason,
    };
    // SAFETY: a data symbol; only its address is taken here.
    let table = unsafe { library.get::<*const u8>(SIGNATURES_SYMBOL.as_bytes()) }
        .map_err(|_| failed("is missing".into()))?;
    let start = *table;
    // SAFETY: the table is a little-endian u64 length then that many bytes (the caller's
    // contract); the length is read unaligned.
    let bytes = unsafe {
        let len = u64::from_le(start.cast::<u64>().read_unaligned());
        let len = usize::try_from(len).map_err(|_| failed(format!("claims {len} bytes")))?;
        std::slice::from_raw_parts(start.add(8), len)
    };
    serde_json::from_slice(bytes).map_err(|e| failed(format!("does not parse: {e}")))
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
