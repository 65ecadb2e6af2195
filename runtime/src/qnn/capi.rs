//! The NPU's entry point of the C API (`runtime/include/oxrelax.h`):
//! [`oxrelax_open_npu`], [`crate::capi`]'s `oxrelax_open` with a backend for the
//! artifact's NPU graphs.

use super::bind::{NpuBackend, BACKEND_NAMES};
use crate::capi::{open_artifact, oxrelax_model, oxrelax_status, utf8, Failure};
use std::ffi::c_char;

/// [`crate::capi::oxrelax_open`] for an artifact with NPU graphs, run by backend `npu`:
/// `"htp"` (Qualcomm's libQnnHtp.so from the folder `qnn_lib_dir`, or from
/// `OXRELAX_QNN_LIB_DIR` when it is null, on the artifact's context binary), `"sim"` or
/// `"sim-integer"` (the host reference backend).
///
/// # Safety
/// `artifact_dir` and `npu` are null or NUL-terminated strings; `qnn_lib_dir` is null or
/// a NUL-terminated string; `out` is null or points to writable storage for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn oxrelax_open_npu(
    artifact_dir: *const c_char,
    npu: *const c_char,
    qnn_lib_dir: *const c_char,
    out: *mut *mut oxrelax_model,
) -> oxrelax_status {
    let backend = || {
        // SAFETY: the caller passes NUL-terminated strings (or null: refused for `npu`,
        // the environment's folder for `qnn_lib_dir`).
        let npu = unsafe { utf8(npu, "npu") }?;
        let lib_dir = match qnn_lib_dir.is_null() {
            true => None,
            // SAFETY: as above.
            false => Some(unsafe { utf8(qnn_lib_dir, "qnn_lib_dir") }?.into()),
        };
        match NpuBackend::named(npu, lib_dir, None) {
            Some(backend) => Ok(Some(Box::new(backend) as _)),
            None => Err(Failure::invalid(format!(
                "`npu` is `{npu}`; known: {}",
                BACKEND_NAMES.join(", ")
            ))),
        }
    };
    // SAFETY: the caller's contract is `open_artifact`'s.
    unsafe { open_artifact(artifact_dir, out, backend) }
}
