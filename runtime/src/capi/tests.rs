use super::handles::Handles;
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
    assert_eq!(oxrelax_close(null_mut()), oxrelax_status::OXRELAX_OK);
    assert_eq!(oxrelax_context_window(null()), 0);
    assert!(last_error().contains("`model` is null"));
    assert_eq!(
        oxrelax_reset(null_mut()),
        oxrelax_status::OXRELAX_ERROR_INVALID_ARGUMENT
    );
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
    let buffer = unsafe { IdBuffer::new(out.as_mut_ptr(), 3, "out") };
    buffer.ok().unwrap().fill(&[4, 5]).ok().unwrap();
    assert_eq!(out, [4, 5, 0]);
    // SAFETY: as above.
    let buffer = unsafe { IdBuffer::new(out.as_mut_ptr(), 3, "out") };
    let err = buffer.ok().unwrap().fill(&[1, 2, 3, 4]).err().unwrap();
    assert_eq!(err.status, oxrelax_status::OXRELAX_ERROR_BUFFER_TOO_SMALL);
    assert_eq!(out, [4, 5, 0]);
    // SAFETY: a null buffer of capacity 0 is never written.
    let buffer = unsafe { IdBuffer::new(null_mut(), 0, "out") };
    buffer.ok().unwrap().fill(&[]).ok().unwrap();
}

/// The status and message of `result`'s failure (it must be one).
fn failure(result: Result<(), Failure>) -> (oxrelax_status, String) {
    let failure = result.expect_err("refused");
    (failure.status, failure.message().to_string())
}

/// The message of `span`'s refusal as an invalid argument.
fn refusal(span: Result<(), Failure>) -> String {
    let (status, message) = failure(span);
    assert_eq!(status, oxrelax_status::OXRELAX_ERROR_INVALID_ARGUMENT);
    message
}

#[test]
fn spans_that_no_buffer_can_hold_are_refused_naming_them() {
    let values = [0u32; 4];
    let message = refusal(check_span(null::<u32>(), 8, "ids"));
    assert_eq!(message, "`ids` is null but its length is 8");
    let misaligned = values.as_ptr().cast::<u8>().wrapping_add(1).cast::<u32>();
    let message = refusal(check_span(misaligned, 1, "prompt"));
    assert!(
        message.contains("`prompt`") && message.contains("aligned to 4"),
        "{message}"
    );
    let message = refusal(check_span(values.as_ptr(), usize::MAX, "out_ids"));
    assert!(message.contains(&usize::MAX.to_string()), "{message}");
    check_span(values.as_ptr(), 4, "ids").ok().unwrap();
    check_span(null::<u32>(), 0, "ids").ok().unwrap();
    // SAFETY: null with a nonzero length is refused before anything is read.
    let err = unsafe { slice(null::<u32>(), 2, "prompt") }.err().unwrap();
    assert!(err.message().contains("`prompt` is null"));
    // SAFETY: as above, for a buffer to write.
    let err = unsafe { IdBuffer::new(null_mut(), 8, "out_ids") }
        .err()
        .unwrap();
    assert!(err
        .message()
        .contains("`out_ids` is null but its length is 8"));
}

#[test]
fn null_or_misaligned_single_values_are_refused_and_null_options_are_defaults() {
    let mut word = [0usize; 2];
    assert!(writable(word.as_mut_ptr(), "n_out").is_ok());
    let err = writable(null_mut::<usize>(), "n_out").err().unwrap();
    assert_eq!(err.message(), "`n_out` is null");
    let misaligned = word
        .as_mut_ptr()
        .cast::<u8>()
        .wrapping_add(1)
        .cast::<usize>();
    assert!(writable(misaligned, "n_out").is_err());
    // SAFETY: null stands for the defaults; nothing is read.
    let options = unsafe { optional(null::<oxrelax_generate_options>(), "options") };
    assert!(options.ok().unwrap().is_none());
}

#[test]
fn handles_that_are_not_open_are_refused_and_never_read() {
    let made_up = std::ptr::without_provenance_mut::<oxrelax_model>(0x1234);
    assert_eq!(
        oxrelax_close(made_up),
        oxrelax_status::OXRELAX_ERROR_INVALID_HANDLE
    );
    assert!(
        last_error().contains("0x1234 is not open"),
        "{}",
        last_error()
    );
    assert_eq!(
        oxrelax_reset(made_up),
        oxrelax_status::OXRELAX_ERROR_INVALID_HANDLE
    );
    assert_eq!(oxrelax_cached_tokens(made_up), 0);
    assert!(last_error().contains("is not open"));
    let mut n = 0;
    // SAFETY: the handle is refused before any other argument is read.
    let status = unsafe { oxrelax_encode(made_up, null(), 0, null_mut(), 0, &mut n) };
    assert_eq!(status, oxrelax_status::OXRELAX_ERROR_INVALID_HANDLE);
}

#[test]
fn the_defaults_are_greedy() {
    let options = oxrelax_default_generate_options();
    assert_eq!(options.temperature, 0.0);
    assert_eq!(options.max_new_tokens, 128);
    assert_eq!(options.ignore_eos, 0);
}

/// The status and message `handles` refuses a call on `handle` with.
fn refused_with(handles: &Handles<u32>, handle: *mut oxrelax_model) -> (oxrelax_status, String) {
    failure(handles.with(handle, |_| Ok(())))
}

#[test]
fn a_closed_handle_is_refused_and_its_id_never_comes_back() {
    let handles = Handles::new();
    let first = handles.open(7u32);
    assert_eq!(handles.with(first, |v| Ok(*v)).ok(), Some(7));
    handles.close(first).ok().unwrap();
    let (status, message) = refused_with(&handles, first);
    assert_eq!(status, oxrelax_status::OXRELAX_ERROR_INVALID_HANDLE);
    assert!(message.contains("0x1 is not open"), "{message}");
    let err = handles.close(first).err().unwrap();
    assert_eq!(err.status, oxrelax_status::OXRELAX_ERROR_INVALID_HANDLE);
    let second = handles.open(8u32);
    assert_ne!(second, first);
    assert_eq!(handles.with(second, |v| Ok(*v)).ok(), Some(8));
    let (status, message) = refused_with(&handles, null_mut());
    assert_eq!(status, oxrelax_status::OXRELAX_ERROR_INVALID_ARGUMENT);
    assert_eq!(message, "`model` is null");
}

#[test]
fn a_handle_in_use_is_refused_and_may_be_closed_under_its_call() {
    let handles = Handles::new();
    let handle = handles.open(1u32);
    let inner = handles.with(handle, |value| {
        let (status, message) = refused_with(&handles, handle);
        assert_eq!(status, oxrelax_status::OXRELAX_ERROR_INVALID_ARGUMENT);
        assert!(message.contains("in use by another call"), "{message}");
        handles.close(handle)?;
        *value += 1;
        Ok(*value)
    });
    assert_eq!(inner.ok(), Some(2));
    let (status, _) = refused_with(&handles, handle);
    assert_eq!(status, oxrelax_status::OXRELAX_ERROR_INVALID_HANDLE);
}

#[test]
fn a_handle_whose_call_panicked_is_refused_until_closed() {
    let handles = Handles::new();
    let handle = handles.open(1u32);
    let status = guard(|| handles.with(handle, |_| panic!("mid-update")));
    assert_eq!(status, oxrelax_status::OXRELAX_ERROR_INTERNAL);
    let (status, message) = refused_with(&handles, handle);
    assert_eq!(status, oxrelax_status::OXRELAX_ERROR_INTERNAL);
    assert!(message.contains("close it"), "{message}");
    handles.close(handle).ok().unwrap();
}
