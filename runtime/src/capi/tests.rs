use super::*;
use std::ffi::CString;
use std::ptr::{null, null_mut};

fn last_error() -> String {
    // SAFETY: the pointer is valid until the next call on this thread.
    unsafe { CStr::from_ptr(oxrelax_last_error()) }
        .to_str()
        .unwrap()
        .to_string()
}

#[test]
fn opening_a_folder_that_is_no_artifact_is_an_artifact_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = CString::new(dir.path().to_str().unwrap()).unwrap();
    let mut model = null_mut();
    // SAFETY: valid string and output pointer.
    let status = unsafe { oxrelax_open(path.as_ptr(), &mut model) };
    assert_eq!(status, oxrelax_status::OXRELAX_ERROR_ARTIFACT);
    assert!(model.is_null());
    let message = last_error();
    assert!(message.contains("oxrelax-model.json"), "{message}");
}

#[test]
fn null_and_non_utf8_arguments_are_invalid_and_named() {
    let mut model = null_mut();
    // SAFETY: null is refused before use.
    let status = unsafe { oxrelax_open(null(), &mut model) };
    assert_eq!(status, oxrelax_status::OXRELAX_ERROR_INVALID_ARGUMENT);
    assert!(last_error().contains("`artifact_dir` is null"));
    let latin1 = CString::new(vec![b'd', 0xe9]).unwrap();
    // SAFETY: a NUL-terminated string and a valid output pointer.
    let status = unsafe { oxrelax_open(latin1.as_ptr(), &mut model) };
    assert_eq!(status, oxrelax_status::OXRELAX_ERROR_INVALID_ARGUMENT);
    assert!(last_error().contains("not UTF-8"), "{}", last_error());
    let mut n = 0;
    // SAFETY: a null model is refused before use.
    let status = unsafe {
        oxrelax_generate(
            null_mut(),
            null(),
            0,
            null(),
            None,
            null_mut(),
            null_mut(),
            0,
            &mut n,
        )
    };
    assert_eq!(status, oxrelax_status::OXRELAX_ERROR_INVALID_ARGUMENT);
    assert!(last_error().contains("`model` is null"));
    // SAFETY: null handles are ignored or refused.
    unsafe {
        oxrelax_close(null_mut());
        assert_eq!(oxrelax_context_window(null()), 0);
        assert_eq!(
            oxrelax_reset(null_mut()),
            oxrelax_status::OXRELAX_ERROR_INVALID_ARGUMENT
        );
    }
}

#[test]
fn a_success_clears_the_last_error_and_a_panic_becomes_internal() {
    assert_eq!(
        guard(|| Err(Failure::invalid("bad".into()))),
        oxrelax_status::OXRELAX_ERROR_INVALID_ARGUMENT
    );
    assert_eq!(last_error(), "bad");
    assert_eq!(guard(|| Ok(())), oxrelax_status::OXRELAX_OK);
    assert_eq!(last_error(), "");
    let status = guard(|| panic!("kaboom"));
    assert_eq!(status, oxrelax_status::OXRELAX_ERROR_INTERNAL);
    assert!(last_error().contains("kaboom"));
}

#[test]
fn ids_are_copied_only_into_a_buffer_that_holds_them() {
    let mut out = [0u32; 3];
    // SAFETY: `out` holds 3 values.
    unsafe { copy_out(&[4, 5], out.as_mut_ptr(), 3) }
        .ok()
        .unwrap();
    assert_eq!(out, [4, 5, 0]);
    // SAFETY: nothing is written when the buffer is too small.
    let err = unsafe { copy_out(&[1, 2, 3, 4], out.as_mut_ptr(), 3) }
        .err()
        .unwrap();
    assert_eq!(err.status, oxrelax_status::OXRELAX_ERROR_BUFFER_TOO_SMALL);
    assert_eq!(out, [4, 5, 0]);
    // SAFETY: no ids, a null buffer of capacity 0.
    unsafe { copy_out(&[], null_mut(), 0) }.ok().unwrap();
}

#[test]
fn the_defaults_are_greedy() {
    let options = oxrelax_default_generate_options();
    assert_eq!(options.temperature, 0.0);
    assert_eq!(options.max_new_tokens, 128);
    assert_eq!(options.ignore_eos, 0);
}
