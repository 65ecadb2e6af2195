//! Loading a QNN backend library (`libQnnHtp.so`): where it is looked for, the provider
//! whose core API version our declarations ([`super::api`]) support, and the log the
//! library writes into (its error lines are attached to our errors).

use super::api::{FunctionTable, GetProviders, Interface, Version, GET_PROVIDERS};
use super::error::HtpError;
use std::collections::VecDeque;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

/// The environment variable naming the folder that holds `libQnnHtp.so`.
pub const LIB_DIR_ENV: &str = "OXRELAX_QNN_LIB_DIR";
/// The HTP backend library's file name.
pub const HTP_LIBRARY: &str = "libQnnHtp.so";
/// The core API major version our declarations are written for.
pub const CORE_MAJOR: u32 = 2;
/// The oldest core API minor version whose interface table and structs we have checked
/// against ours (later minors only append to the table).
pub const MIN_CORE_MINOR: u32 = 32;

/// The folder to load QNN libraries from: `dir` when given, else [`LIB_DIR_ENV`].
pub fn library_dir(dir: Option<&Path>) -> Result<PathBuf, HtpError> {
    match dir {
        Some(dir) => Ok(dir.to_path_buf()),
        None => std::env::var_os(LIB_DIR_ENV)
            .map(PathBuf::from)
            .ok_or(HtpError::NoLibraryDir),
    }
}

/// An opened QNN backend library and the provider chosen from it.
pub struct QnnLibrary {
    path: PathBuf,
    interface: *const Interface,
    // Last: dropped after nothing can use `interface` any more.
    _library: libloading::Library,
}

// SAFETY: the interface table is immutable data of the loaded library, which stays
// loaded as long as this value; QNN's entry points may be called from any thread.
unsafe impl Send for QnnLibrary {}
// SAFETY: as above; nothing here is mutated after loading.
unsafe impl Sync for QnnLibrary {}

impl QnnLibrary {
    /// Loads `libQnnHtp.so` from `dir` and picks its first provider implementing core API
    /// [`CORE_MAJOR`].x with x >= [`MIN_CORE_MINOR`].
    pub fn load_htp(dir: &Path) -> Result<Arc<QnnLibrary>, HtpError> {
        let path = dir.join(HTP_LIBRARY);
        if !path.is_file() {
            return Err(HtpError::LibraryMissing { path });
        }
        // SAFETY: loading runs the library's initializers; it is Qualcomm's backend
        // library, found where the user pointed us.
        let library =
            stdout_to_stderr(|| unsafe { libloading::Library::new(&path) }).map_err(|e| {
                HtpError::LibraryLoad {
                    path: path.clone(),
                    message: e.to_string(),
                }
            })?;
        // SAFETY: the symbol is declared by the QNN API with the signature of
        // `GetProviders`.
        let get_providers = unsafe { library.get::<GetProviders>(GET_PROVIDERS) }.map_err(|e| {
            HtpError::LibraryLoad {
                path: path.clone(),
                message: e.to_string(),
            }
        })?;
        let mut providers: *mut *const Interface = std::ptr::null_mut();
        let mut count = 0u32;
        // SAFETY: both out-pointers are valid for writes.
        let status = unsafe { get_providers(&mut providers, &mut count) };
        if status != 0 || providers.is_null() {
            return Err(HtpError::LibraryLoad {
                path,
                message: format!("QnnInterface_getProviders failed with code {status}"),
            });
        }
        let mut found = Vec::new();
        for i in 0..count as usize {
            // SAFETY: the library returned `count` provider pointers.
            let interface = unsafe { *providers.add(i) };
            if interface.is_null() {
                continue;
            }
            // SAFETY: a provider begins with its id, name and API version, in every
            // core API version.
            let version = unsafe { (*interface).api_version };
            if supported(version.core) {
                return Ok(Arc::new(QnnLibrary {
                    path,
                    interface,
                    _library: library,
                }));
            }
            found.push(version_text(version.core));
        }
        Err(HtpError::UnsupportedApi {
            path,
            found,
            supported: format!("{CORE_MAJOR}.{MIN_CORE_MINOR} or later {CORE_MAJOR}.x"),
        })
    }

    /// The library's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The provider's function table.
    pub fn functions(&self) -> &FunctionTable {
        // SAFETY: as in `api_version`; the table's layout is the one its version
        // declares, checked at load.
        unsafe { &(*self.interface).functions }
    }
}

/// Runs `load` with the C library's standard output going to standard error: the HTP
/// library's initializers print a diagnostic line with `printf`, which would otherwise
/// land in the middle of a command's output (its `--json` line). Rust's own standard
/// output is locked meanwhile, so no other thread's output is redirected.
fn stdout_to_stderr<T>(load: impl FnOnce() -> T) -> T {
    use std::io::Write;
    let mut rust_stdout = std::io::stdout().lock();
    let _ = rust_stdout.flush();
    // SAFETY: plain descriptor calls on the process's own standard streams; fd 1 is
    // restored from its duplicate before returning, and `fflush(NULL)` flushes every C
    // stream (pushing what the initializers printed to fd 1 while it points at stderr).
    unsafe {
        libc::fflush(std::ptr::null_mut());
        let saved = libc::dup(1);
        if saved < 0 || libc::dup2(2, 1) < 0 {
            if saved >= 0 {
                libc::close(saved);
            }
            return load();
        }
        let value = load();
        libc::fflush(std::ptr::null_mut());
        libc::dup2(saved, 1);
        libc::close(saved);
        value
    }
}

fn supported(core: Version) -> bool {
    core.major == CORE_MAJOR && core.minor >= MIN_CORE_MINOR
}

/// `major.minor.patch`.
fn version_text(v: Version) -> String {
    format!("{}.{}.{}", v.major, v.minor, v.patch)
}

/// Held through every use of a QNN library, so a process's QNN calls run one at a time
/// (the library's thread safety is not something we rely on).
static IN_USE: Mutex<()> = Mutex::new(());

thread_local! {
    /// Whether this thread holds [`IN_USE`] (a use inside another, such as freeing a
    /// half-built context on an error path, keeps the outer turn).
    static HOLDS_TURN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The process's turn to call into QNN, while it lives.
pub(super) struct Turn {
    guard: Option<std::sync::MutexGuard<'static, ()>>,
}

impl Drop for Turn {
    fn drop(&mut self) {
        if self.guard.is_some() {
            HOLDS_TURN.set(false);
        }
    }
}

/// Waits for, and then holds, the process's turn to call into QNN (at once when this
/// thread holds it already).
pub(super) fn exclusive() -> Turn {
    if HOLDS_TURN.get() {
        return Turn { guard: None };
    }
    let guard = IN_USE.lock().unwrap_or_else(PoisonError::into_inner);
    HOLDS_TURN.set(true);
    Turn { guard: Some(guard) }
}

/// How many of the library's latest error and warning lines are kept.
const LOG_LINES: usize = 16;

static LOG: Mutex<VecDeque<String>> = Mutex::new(VecDeque::new());

extern "C" {
    fn vsnprintf(buf: *mut c_char, size: usize, fmt: *const c_char, args: *mut c_void) -> c_int;
}

/// The log callback given to the library: formats the line and keeps the latest
/// [`LOG_LINES`].
pub(super) unsafe extern "C" fn log_line(
    fmt: *const c_char,
    _level: u32,
    _timestamp: u64,
    args: *mut c_void,
) {
    if fmt.is_null() {
        return;
    }
    let mut buf = [0 as c_char; 512];
    // SAFETY: `fmt` and `args` are the library's printf-style format and its va_list,
    // which vsnprintf consumes once; the buffer is bounded by its size.
    let written = unsafe { vsnprintf(buf.as_mut_ptr(), buf.len(), fmt, args) };
    if written < 0 {
        return;
    }
    // SAFETY: vsnprintf NUL-terminates within the buffer.
    let line = unsafe { CStr::from_ptr(buf.as_ptr()) };
    let line = line.to_string_lossy().trim().to_string();
    let mut log = LOG.lock().unwrap_or_else(PoisonError::into_inner);
    if log.len() == LOG_LINES {
        log.pop_front();
    }
    log.push_back(line);
}

/// Takes the library's log lines written since the last call.
pub fn take_log() -> Vec<String> {
    let mut log = LOG.lock().unwrap_or_else(PoisonError::into_inner);
    log.drain(..).collect()
}
