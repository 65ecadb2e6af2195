//! The C API's status codes, the last error message of each thread, and the guard that
//! turns errors and panics into both.

use std::cell::RefCell;
use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// What a C API call returns.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum oxrelax_status {
    /// Success.
    OXRELAX_OK = 0,
    /// A null pointer, a string that is not UTF-8, or an impossible value.
    OXRELAX_ERROR_INVALID_ARGUMENT = 1,
    /// The artifact failed a check or could not be loaded.
    OXRELAX_ERROR_ARTIFACT = 2,
    /// The tokenizer failed.
    OXRELAX_ERROR_TOKENIZER = 3,
    /// Generation failed (the context window is full, an id is out of the vocabulary).
    OXRELAX_ERROR_GENERATION = 4,
    /// An output buffer is too small (the needed size was still reported).
    OXRELAX_ERROR_BUFFER_TOO_SMALL = 5,
    /// A bug in oxrelax (a panic, caught at the boundary).
    OXRELAX_ERROR_INTERNAL = 6,
    /// A model handle that is not open: closed already, or never returned by `oxrelax_open`.
    OXRELAX_ERROR_INVALID_HANDLE = 7,
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// The message of the last failed call on this thread (UTF-8, empty after a success);
/// valid until the next call on this thread.
#[unsafe(no_mangle)]
pub extern "C" fn oxrelax_last_error() -> *const c_char {
    LAST_ERROR.with(|last| last.borrow().as_ptr())
}

/// Why a call failed: its status and message.
pub(crate) struct Failure {
    pub(super) status: oxrelax_status,
    message: String,
}

impl Failure {
    /// What went wrong.
    #[cfg(test)]
    pub(super) fn message(&self) -> &str {
        &self.message
    }

    fn new(status: oxrelax_status, message: String) -> Failure {
        Failure { status, message }
    }

    /// A null pointer for argument `what`.
    pub(super) fn null(what: &str) -> Failure {
        Failure::invalid(format!("`{what}` is null"))
    }

    /// A model handle `id` that is not open.
    pub(super) fn closed(id: usize) -> Failure {
        let message = format!(
            "model handle {id:#x} is not open: closed already, or never returned by oxrelax_open"
        );
        Failure::new(oxrelax_status::OXRELAX_ERROR_INVALID_HANDLE, message)
    }

    /// A model handle `id` that another call is using.
    pub(super) fn busy(id: usize) -> Failure {
        Failure::invalid(format!(
            "model handle {id:#x} is in use by another call (from another thread or a token \
             callback): a handle serves one call at a time"
        ))
    }

    /// A model handle `id` whose model a panicking call may have left half-updated.
    pub(super) fn poisoned(id: usize) -> Failure {
        let message = format!(
            "model handle {id:#x} is unusable: an earlier call on it failed with an internal \
             error; close it"
        );
        Failure::new(oxrelax_status::OXRELAX_ERROR_INTERNAL, message)
    }

    /// An invalid argument.
    pub(crate) fn invalid(message: String) -> Failure {
        Failure::new(oxrelax_status::OXRELAX_ERROR_INVALID_ARGUMENT, message)
    }

    /// An output buffer of `capacity` values where `needed` are.
    pub(super) fn too_small(needed: usize, capacity: usize) -> Failure {
        let message = format!("the output buffer holds {capacity} ids, {needed} are needed");
        Failure::new(oxrelax_status::OXRELAX_ERROR_BUFFER_TOO_SMALL, message)
    }

    /// An artifact that failed to open.
    pub(super) fn artifact(error: impl std::error::Error) -> Failure {
        Failure::new(oxrelax_status::OXRELAX_ERROR_ARTIFACT, chain(&error))
    }

    /// A tokenizer failure.
    pub(super) fn tokenizer(error: impl std::error::Error) -> Failure {
        Failure::new(oxrelax_status::OXRELAX_ERROR_TOKENIZER, chain(&error))
    }

    /// A generation failure.
    pub(super) fn generation(error: impl std::error::Error) -> Failure {
        Failure::new(oxrelax_status::OXRELAX_ERROR_GENERATION, chain(&error))
    }
}

/// `error` and its causes, each once, separated by `: `.
fn chain(error: &dyn std::error::Error) -> String {
    crate::report::error_chain(error).join(": ")
}

/// Runs `call`, recording its error (or panic) as this thread's last error.
pub(super) fn guard(call: impl FnOnce() -> Result<(), Failure>) -> oxrelax_status {
    let outcome = catch_unwind(AssertUnwindSafe(call)).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(Failure::new(
            oxrelax_status::OXRELAX_ERROR_INTERNAL,
            format!("internal error (panic): {what}"),
        ))
    });
    let (status, message) = match outcome {
        Ok(()) => (oxrelax_status::OXRELAX_OK, String::new()),
        Err(failure) => (failure.status, failure.message),
    };
    let message = CString::new(message.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|last| *last.borrow_mut() = message);
    status
}
