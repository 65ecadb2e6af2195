//! The C API (`runtime/include/oxrelax.h`): open an artifact, encode text, generate with
//! a token callback, reset, close. Handles are opaque, every call returns an
//! [`oxrelax_status`] and leaves a message for [`oxrelax_last_error`] when it fails,
//! strings are UTF-8, and a panic never crosses the boundary (it becomes
//! [`oxrelax_status::OXRELAX_ERROR_INTERNAL`]). No Rust type crosses it either.

#![allow(non_camel_case_types)]

mod error;
#[cfg(test)]
mod tests;

use crate::artifact::{Artifact, LoadedEngine};
use crate::chat::Detokenizer;
use crate::engine::{GenerateOptions, Step};
use crate::sampler::{Sampler, SamplingConfig};
use crate::ThreadPool;
use error::{guard, Failure};
pub use error::{oxrelax_last_error, oxrelax_status};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::Path;

/// An opened model: an artifact's engine (one KV cache) and its tokenizer.
pub struct oxrelax_model {
    loaded: LoadedEngine,
}

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
/// [`Artifact::open`]; on success stores a new handle in `*out`.
///
/// # Safety
/// `artifact_dir` is a NUL-terminated string; `out` points to writable storage for a
/// pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn oxrelax_open(
    artifact_dir: *const c_char,
    out: *mut *mut oxrelax_model,
) -> oxrelax_status {
    guard(|| {
        // SAFETY: the caller passes a NUL-terminated string (or null, refused).
        let dir = unsafe { utf8(artifact_dir, "artifact_dir") }?;
        let out = non_null(out, "out")?;
        let artifact = Artifact::open(Path::new(dir)).map_err(Failure::artifact)?;
        let loaded = artifact
            .into_engine(ThreadPool::global())
            .map_err(Failure::artifact)?;
        let model = Box::into_raw(Box::new(oxrelax_model { loaded }));
        // SAFETY: `out` is non-null and writable (the caller's contract).
        unsafe { out.write(model) };
        Ok(())
    })
}

/// Closes a handle from `oxrelax_open` (null is ignored).
///
/// # Safety
/// `model` came from `oxrelax_open` and is not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn oxrelax_close(model: *mut oxrelax_model) {
    if !model.is_null() {
        // SAFETY: `model` came from `Box::into_raw` in `oxrelax_open`, closed once.
        drop(unsafe { Box::from_raw(model) });
    }
}

/// Positions the model's KV cache holds (0 for a null handle).
///
/// # Safety
/// `model` is null or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn oxrelax_context_window(model: *const oxrelax_model) -> usize {
    // SAFETY: null or a live handle (the caller's contract).
    unsafe { model.as_ref() }.map_or(0, |m| m.loaded.engine.config().context_window)
}

/// Tokens in the model's KV cache: the conversation so far (0 for a null handle).
///
/// # Safety
/// `model` is null or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn oxrelax_cached_tokens(model: *const oxrelax_model) -> usize {
    // SAFETY: null or a live handle (the caller's contract).
    unsafe { model.as_ref() }.map_or(0, |m| m.loaded.engine.len())
}

/// Encodes UTF-8 `text` with the model's tokenizer (special tokens added as its
/// post-processor does when `add_special_tokens` is nonzero) into `ids`; `*n_ids` is
/// set to the number of ids, also when `capacity` is too small
/// (`OXRELAX_ERROR_BUFFER_TOO_SMALL`).
///
/// # Safety
/// `model` is a live handle, `text` NUL-terminated, `ids` holds `capacity` values (or is
/// null with `capacity` 0), `n_ids` writable.
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
        // SAFETY: the caller's contract (see above) for each pointer.
        let model = unsafe { model.as_mut() }.ok_or_else(|| Failure::null("model"))?;
        let text = unsafe { utf8(text, "text") }?;
        let n_ids = non_null(n_ids, "n_ids")?;
        let tokenizer = model.loaded.tokenizer.as_ref().ok_or_else(|| {
            Failure::invalid("the artifact has no tokenizer: pass token ids".into())
        })?;
        let encoded = tokenizer
            .encode(text, add_special_tokens != 0)
            .map_err(Failure::tokenizer)?;
        // SAFETY: `n_ids` is non-null and writable; `ids` holds `capacity` values.
        unsafe {
            n_ids.write(encoded.len());
            copy_out(&encoded, ids, capacity)
        }
    })
}

/// Appends `prompt` (`n_prompt` ids) to the conversation in the KV cache and generates
/// after it, calling `callback` (may be null) with each token; the generated ids go to
/// `out_ids` and their number to `*n_out` (also when `capacity` is too small:
/// `OXRELAX_ERROR_BUFFER_TOO_SMALL`, the cache then holds them all). `options` null:
/// [`oxrelax_default_generate_options`].
///
/// # Safety
/// `model` is a live handle; `prompt` holds `n_prompt` ids; `options` is null or valid;
/// `out_ids` holds `capacity` values (or is null with `capacity` 0); `n_out` writable;
/// `callback` is null or safe to call with `user_data`.
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
        // SAFETY: the caller's contract (see above) for each pointer.
        let model = unsafe { model.as_mut() }.ok_or_else(|| Failure::null("model"))?;
        let prompt = unsafe { slice(prompt, n_prompt, "prompt") }?;
        let options = unsafe { options.as_ref() }
            .copied()
            .unwrap_or_else(|| oxrelax_default_generate_options());
        let n_out = non_null(n_out, "n_out")?;
        let LoadedEngine { engine, tokenizer } = &mut model.loaded;
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
        let mut sampler = Sampler::new(config);
        let run = GenerateOptions {
            max_new_tokens: options.max_new_tokens as usize,
            ignore_eos: options.ignore_eos != 0,
            keep_logits: false,
        };
        let mut detokenizer = tokenizer
            .as_ref()
            .map(|t| Detokenizer::with_context(t, prompt, true));
        let generation = engine
            .generate(prompt, run, &mut sampler, |token| {
                let Some(callback) = callback else {
                    return Ok(Step::Continue);
                };
                let piece = match detokenizer.as_mut() {
                    Some(d) if !token.is_eos => d.push(token.id)?.unwrap_or_default(),
                    _ => String::new(),
                };
                let piece = CString::new(piece.replace('\0', "")).unwrap_or_default();
                // SAFETY: the caller vouches for `callback` with `user_data`.
                let stop = unsafe { callback(token.id, piece.as_ptr(), user_data) };
                Ok(if stop != 0 {
                    Step::Stop
                } else {
                    Step::Continue
                })
            })
            .map_err(Failure::generation)?;
        // SAFETY: `n_out` is non-null and writable; `out_ids` holds `capacity` values.
        unsafe {
            n_out.write(generation.ids.len());
            copy_out(&generation.ids, out_ids, capacity)
        }
    })
}

/// Forgets the conversation: empties the model's KV cache.
///
/// # Safety
/// `model` is a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn oxrelax_reset(model: *mut oxrelax_model) -> oxrelax_status {
    guard(|| {
        // SAFETY: a live handle (the caller's contract).
        let model = unsafe { model.as_mut() }.ok_or_else(|| Failure::null("model"))?;
        model.loaded.engine.reset().map_err(Failure::generation)
    })
}

/// `pointer` as a `&str`, refused when null or not UTF-8 (`what` names it).
///
/// # Safety
/// `pointer` is null or NUL-terminated.
unsafe fn utf8<'a>(pointer: *const c_char, what: &str) -> Result<&'a str, Failure> {
    if pointer.is_null() {
        return Err(Failure::null(what));
    }
    // SAFETY: non-null and NUL-terminated (the caller's contract).
    let bytes = unsafe { CStr::from_ptr(pointer) };
    bytes
        .to_str()
        .map_err(|e| Failure::invalid(format!("`{what}` is not UTF-8: {e}")))
}

/// `len` values at `pointer` (null only when `len` is 0).
///
/// # Safety
/// `pointer` holds `len` initialized values.
unsafe fn slice<'a, T>(pointer: *const T, len: usize, what: &str) -> Result<&'a [T], Failure> {
    match (pointer.is_null(), len) {
        (_, 0) => Ok(&[]),
        (true, _) => Err(Failure::null(what)),
        // SAFETY: non-null with `len` values (the caller's contract).
        (false, _) => Ok(unsafe { std::slice::from_raw_parts(pointer, len) }),
    }
}

/// `pointer`, refused when null (`what` names it).
fn non_null<T>(pointer: *mut T, what: &str) -> Result<*mut T, Failure> {
    match pointer.is_null() {
        true => Err(Failure::null(what)),
        false => Ok(pointer),
    }
}

/// Copies `values` into `out` (`capacity` values); too small a buffer is
/// `OXRELAX_ERROR_BUFFER_TOO_SMALL` and nothing is copied.
///
/// # Safety
/// `out` holds `capacity` values (null only when `capacity` is 0).
unsafe fn copy_out(values: &[u32], out: *mut u32, capacity: usize) -> Result<(), Failure> {
    if values.len() > capacity {
        return Err(Failure::too_small(values.len(), capacity));
    }
    if !values.is_empty() {
        // SAFETY: `out` holds `capacity` >= `values.len()` values.
        unsafe { std::ptr::copy_nonoverlapping(values.as_ptr(), out, values.len()) };
    }
    Ok(())
}
