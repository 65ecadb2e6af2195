//! The C API (`runtime/include/oxrelax.h`): open an artifact, encode text, generate with
//! a token callback, reset, close. Handles are ids in a table of open models (closing
//! twice or using a closed handle is an error, never a dangling read), every call returns
//! an [`oxrelax_status`] and leaves a message for [`oxrelax_last_error`] when it fails,
//! pointers and lengths are checked before use, strings are UTF-8, and a panic never
//! crosses the boundary (it becomes [`oxrelax_status::OXRELAX_ERROR_INTERNAL`]). No Rust
//! type crosses it either.

#![allow(non_camel_case_types)]

mod error;
mod handles;
#[cfg(test)]
mod tests;

use crate::artifact::{Artifact, GraphBackend, LoadedEngine};
use crate::chat::Detokenizer;
use crate::engine::{EngineError, GenerateOptions, Step, Token};
use crate::sampler::{Sampler, SamplingConfig};
use crate::ThreadPool;
use error::guard;
pub(crate) use error::Failure;
pub use error::{oxrelax_last_error, oxrelax_status};
use handles::MODELS;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::Path;

/// An opened model as C sees it: an opaque handle. It is an id in the table of open
/// models, never an address: nothing is ever read through it.
pub enum oxrelax_model {}

/// How `oxrelax_generate` samples and when it stops.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct oxrelax_generate_options {
    /// Tokens to generate at most.
    pub max_new_tokens: u32,
    /// Sampling temperature (0: greedy).
    pub temperature: f32,
    /// Nucleus sampling mass (1: off).
    pub top_p: f32,
    /// Keep only this many most likely tokens (0: all).
    pub top_k: u32,
    /// Penalty on tokens seen already (1: off).
    pub repetition_penalty: f32,
    /// Seed of the random generator.
    pub seed: u64,
    /// Nonzero: go on past EOS tokens.
    pub ignore_eos: c_int,
}

/// Called with each generated token: its id and its text (UTF-8, NUL-terminated, empty
/// while a multi-byte character is incomplete or without a tokenizer; valid during the
/// call only) and the caller's `user_data`. Returning nonzero stops generation.
pub type oxrelax_token_callback =
    Option<unsafe extern "C" fn(id: u32, piece: *const c_char, user_data: *mut c_void) -> c_int>;

/// Greedy decoding of at most 128 tokens, stopping at EOS.
#[unsafe(no_mangle)]
pub extern "C" fn oxrelax_default_generate_options() -> oxrelax_generate_options {
    let sampling = SamplingConfig::default();
    let run = GenerateOptions::default();
    oxrelax_generate_options {
        max_new_tokens: u32::try_from(run.max_new_tokens).unwrap_or(u32::MAX),
        temperature: 0.0,
        top_p: sampling.top_p,
        top_k: 0,
        repetition_penalty: sampling.repetition_penalty,
        seed: sampling.seed,
        ignore_eos: c_int::from(run.ignore_eos),
    }
}

/// Opens the artifact folder `artifact_dir` (UTF-8 path) with every check of
/// [`Artifact::open`]; on success stores a new handle in `*out`, on failure null.
///
/// # Safety
/// `artifact_dir` is null or a NUL-terminated string; `out` is null or points to
/// writable storage for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn oxrelax_open(
    artifact_dir: *const c_char,
    out: *mut *mut oxrelax_model,
) -> oxrelax_status {
    // SAFETY: the caller's contract is `open_artifact`'s.
    unsafe { open_artifact(artifact_dir, out, || Ok(None)) }
}

/// Opens the artifact folder `artifact_dir` (UTF-8 path) with every check of
/// [`Artifact::open_with`], its graphs beside the CPU run by the backend `backend` gives (asked
/// for once the folder's name is read);
/// on success stores a new handle in `*out`, on failure null.
///
/// # Safety
/// `artifact_dir` is null or a NUL-terminated string; `out` is null or points to
/// writable storage for a pointer.
pub(crate) unsafe fn open_artifact(
    artifact_dir: *const c_char,
    out: *mut *mut oxrelax_model,
    backend: impl FnOnce() -> Result<Option<Box<dyn GraphBackend>>, Failure>,
) -> oxrelax_status {
    guard(|| {
        let out = writable(out, "out")?;
        // SAFETY: `out` is non-null, aligned and writable (the caller's contract).
        unsafe { out.write(std::ptr::null_mut()) };
        // SAFETY: the caller passes a NUL-terminated string (or null, refused).
        let dir = unsafe { utf8(artifact_dir, "artifact_dir") }?;
        let backend = backend()?;
        let artifact =
            Artifact::open_with(Path::new(dir), backend.as_deref()).map_err(Failure::artifact)?;
        let loaded = artifact
            .into_engine(ThreadPool::global())
            .map_err(Failure::artifact)?;
        // SAFETY: `out` is writable (the caller's contract).
        unsafe { out.write(MODELS.open(loaded)) };
        Ok(())
    })
}

/// Closes a handle from `oxrelax_open`; null is ignored (`OXRELAX_OK`), a handle that is
/// not open is `OXRELAX_ERROR_INVALID_HANDLE`.
#[unsafe(no_mangle)]
pub extern "C" fn oxrelax_close(model: *mut oxrelax_model) -> oxrelax_status {
    guard(|| match model.is_null() {
        true => Ok(()),
        false => MODELS.close(model),
    })
}

/// Positions the model's KV cache holds (0 for a null or closed handle, with a message
/// for [`oxrelax_last_error`]).
#[unsafe(no_mangle)]
pub extern "C" fn oxrelax_context_window(model: *const oxrelax_model) -> usize {
    query(model, |loaded| loaded.engine.config().context_window)
}

/// Tokens in the model's KV cache: the conversation so far (0 for a null or closed
/// handle, with a message for [`oxrelax_last_error`]).
#[unsafe(no_mangle)]
pub extern "C" fn oxrelax_cached_tokens(model: *const oxrelax_model) -> usize {
    query(model, |loaded| loaded.engine.len())
}

/// Encodes UTF-8 `text` with the model's tokenizer (special tokens added as its
/// post-processor does when `add_special_tokens` is nonzero) into `ids`; `*n_ids` is
/// set to the number of ids, also when `capacity` is too small
/// (`OXRELAX_ERROR_BUFFER_TOO_SMALL`: a null `ids` of capacity 0 asks for the size).
///
/// # Safety
/// `text` is null or NUL-terminated, `ids` is null or holds `capacity` values, `n_ids`
/// is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn oxrelax_encode(
    model: *mut oxrelax_model,
    text: *const c_char,
    add_special_tokens: c_int,
    ids: *mut u32,
    capacity: usize,
    n_ids: *mut usize,
) -> oxrelax_status {
    guard(|| {
        MODELS.with(model, |loaded| {
            // SAFETY: the caller's contract (see above) for each pointer.
            let text = unsafe { utf8(text, "text") }?;
            let n_ids = writable(n_ids, "n_ids")?;
            // SAFETY: as above.
            let ids = unsafe { IdBuffer::new(ids, capacity, "ids") }?;
            let tokenizer = loaded.tokenizer.as_ref().ok_or_else(|| {
                Failure::invalid("the artifact has no tokenizer: pass token ids".into())
            })?;
            let encoded = tokenizer
                .encode(text, add_special_tokens != 0)
                .map_err(Failure::tokenizer)?;
            // SAFETY: `n_ids` is non-null, aligned and writable.
            unsafe { n_ids.write(encoded.len()) };
            ids.fill(&encoded)
        })
    })
}

/// Appends `prompt` (`n_prompt` ids) to the conversation in the KV cache and generates
/// after it, calling `callback` (may be null) with each token; the generated ids go to
/// `out_ids` and their number to `*n_out` (also when `capacity` is too small:
/// `OXRELAX_ERROR_BUFFER_TOO_SMALL`, the cache then holds them all). `options` null:
/// [`oxrelax_default_generate_options`]. A prompt that does not fit in the context
/// window with the tokens cached is refused before anything is read or allocated.
///
/// # Safety
/// `prompt` is null or holds `n_prompt` ids; `options` is null or valid; `out_ids` is
/// null or holds `capacity` values; `n_out` is null or writable; `callback` is null or
/// safe to call with `user_data`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn oxrelax_generate(
    model: *mut oxrelax_model,
    prompt: *const u32,
    n_prompt: usize,
    options: *const oxrelax_generate_options,
    callback: oxrelax_token_callback,
    user_data: *mut c_void,
    out_ids: *mut u32,
    capacity: usize,
    n_out: *mut usize,
) -> oxrelax_status {
    guard(|| {
        MODELS.with(model, |loaded| {
            let n_out = writable(n_out, "n_out")?;
            // SAFETY: the caller's contract (see above) for each pointer.
            let out_ids = unsafe { IdBuffer::new(out_ids, capacity, "out_ids") }?;
            // SAFETY: as above.
            let options = unsafe { optional(options, "options") }?;
            let (mut sampler, run) = plan(options.unwrap_or(&oxrelax_default_generate_options()))?;
            let LoadedEngine { engine, tokenizer } = loaded;
            engine.check_fits(n_prompt).map_err(Failure::generation)?;
            // SAFETY: as above.
            let prompt = unsafe { slice(prompt, n_prompt, "prompt") }?;
            let mut detokenizer = tokenizer
                .as_ref()
                .map(|t| Detokenizer::with_context(t, prompt, true));
            let generation = engine
                .generate(prompt, run, &mut sampler, |token| {
                    // SAFETY: the caller vouches for `callback` with `user_data`.
                    unsafe { emit(callback, user_data, detokenizer.as_mut(), &token) }
                })
                .map_err(Failure::generation)?;
            // SAFETY: `n_out` is non-null, aligned and writable.
            unsafe { n_out.write(generation.ids.len()) };
            out_ids.fill(&generation.ids)
        })
    })
}

/// Forgets the conversation: empties the model's KV cache.
#[unsafe(no_mangle)]
pub extern "C" fn oxrelax_reset(model: *mut oxrelax_model) -> oxrelax_status {
    guard(|| {
        MODELS.with(model, |loaded| {
            loaded.engine.reset().map_err(Failure::generation)
        })
    })
}

/// `read` of the model of `model`, or 0 when the call fails (its message left for
/// [`oxrelax_last_error`]).
fn query(model: *const oxrelax_model, read: impl FnOnce(&LoadedEngine) -> usize) -> usize {
    let mut value = 0;
    guard(|| {
        MODELS.with(model, |loaded| {
            value = read(loaded);
            Ok(())
        })
    });
    value
}

/// The sampler and run options `options` ask for, refused when they cannot work.
fn plan(options: &oxrelax_generate_options) -> Result<(Sampler, GenerateOptions), Failure> {
    let config = SamplingConfig {
        temperature: options.temperature,
        top_p: options.top_p,
        top_k: options.top_k as usize,
        repetition_penalty: options.repetition_penalty,
        seed: options.seed,
    };
    config
        .check()
        .map_err(|e| Failure::invalid(e.to_string()))?;
    let run = GenerateOptions {
        max_new_tokens: options.max_new_tokens as usize,
        ignore_eos: options.ignore_eos != 0,
        keep_logits: false,
    };
    Ok((Sampler::new(config), run))
}

/// Calls `callback` (if any) with `token` and its text; its nonzero answer stops.
///
/// # Safety
/// `callback` is safe to call with `user_data`.
unsafe fn emit(
    callback: oxrelax_token_callback,
    user_data: *mut c_void,
    detokenizer: Option<&mut Detokenizer<'_>>,
    token: &Token<'_>,
) -> Result<Step, EngineError> {
    let Some(callback) = callback else {
        return Ok(Step::Continue);
    };
    let piece = match detokenizer {
        Some(d) if !token.is_eos => d.push(token.id)?.unwrap_or_default(),
        _ => String::new(),
    };
    let piece = CString::new(piece.replace('\0', "")).unwrap_or_default();
    // SAFETY: the caller vouches for `callback` with `user_data`.
    let stop = unsafe { callback(token.id, piece.as_ptr(), user_data) };
    Ok(match stop {
        0 => Step::Continue,
        _ => Step::Stop,
    })
}

/// `pointer` as a `&str`, refused when null or not UTF-8 (`what` names it).
///
/// # Safety
/// `pointer` is null or NUL-terminated.
pub(crate) unsafe fn utf8<'a>(pointer: *const c_char, what: &str) -> Result<&'a str, Failure> {
    if pointer.is_null() {
        return Err(Failure::null(what));
    }
    // SAFETY: non-null and NUL-terminated (the caller's contract).
    let bytes = unsafe { CStr::from_ptr(pointer) };
    bytes
        .to_str()
        .map_err(|e| Failure::invalid(format!("`{what}` is not UTF-8: {e}")))
}

/// Refuses `len` values at `pointer` (`what` names them) that no buffer can hold: null
/// or misaligned with `len` nonzero, or more bytes than memory has.
fn check_span<T>(pointer: *const T, len: usize, what: &str) -> Result<(), Failure> {
    let size = size_of::<T>().max(1);
    let refusal = if len == 0 {
        return Ok(());
    } else if pointer.is_null() {
        format!("`{what}` is null but its length is {len}")
    } else if !pointer.is_aligned() {
        let align = align_of::<T>();
        format!("`{what}` ({pointer:p}) is not aligned to {align} bytes")
    } else if len > isize::MAX as usize / size {
        format!("`{what}` has a length of {len} values of {size} bytes: more than memory holds")
    } else {
        return Ok(());
    };
    Err(Failure::invalid(refusal))
}

/// `len` values at `pointer` (null only when `len` is 0).
///
/// # Safety
/// `pointer` is null or holds `len` initialized values.
unsafe fn slice<'a, T>(pointer: *const T, len: usize, what: &str) -> Result<&'a [T], Failure> {
    check_span(pointer, len, what)?;
    Ok(match len {
        0 => &[],
        // SAFETY: non-null, aligned, at most `isize::MAX` bytes (checked), and holding
        // `len` values (the caller's contract).
        _ => unsafe { std::slice::from_raw_parts(pointer, len) },
    })
}

/// `pointer` to one value, refused when null or misaligned (`what` names it).
fn writable<T>(pointer: *mut T, what: &str) -> Result<*mut T, Failure> {
    match pointer.is_null() {
        true => Err(Failure::null(what)),
        false => check_span(pointer, 1, what).map(|()| pointer),
    }
}

/// `pointer` as a reference, `None` when null, refused when misaligned.
///
/// # Safety
/// `pointer` is null or points to a valid value.
unsafe fn optional<'a, T>(pointer: *const T, what: &str) -> Result<Option<&'a T>, Failure> {
    if pointer.is_null() {
        return Ok(None);
    }
    check_span(pointer, 1, what)?;
    // SAFETY: non-null and aligned (checked) and valid (the caller's contract).
    Ok(Some(unsafe { &*pointer }))
}

/// A caller's buffer for ids, checked when made and written once, at the end of a call.
struct IdBuffer {
    pointer: *mut u32,
    capacity: usize,
}

impl IdBuffer {
    /// Checks `pointer` and `capacity` (`what` names them) before the call does anything.
    ///
    /// # Safety
    /// `pointer` is null or holds `capacity` writable values.
    unsafe fn new(pointer: *mut u32, capacity: usize, what: &str) -> Result<IdBuffer, Failure> {
        check_span(pointer, capacity, what)?;
        Ok(IdBuffer { pointer, capacity })
    }

    /// Copies `ids` in; too small a buffer is `OXRELAX_ERROR_BUFFER_TOO_SMALL` and nothing
    /// is copied.
    fn fill(self, ids: &[u32]) -> Result<(), Failure> {
        if ids.len() > self.capacity {
            return Err(Failure::too_small(ids.len(), self.capacity));
        }
        if !ids.is_empty() {
            // SAFETY: `pointer` is non-null and aligned (checked in `new`, as
            // `capacity` >= `ids.len()` > 0) and holds `capacity` values.
            unsafe { std::ptr::copy_nonoverlapping(ids.as_ptr(), self.pointer, ids.len()) };
        }
        Ok(())
    }
}
