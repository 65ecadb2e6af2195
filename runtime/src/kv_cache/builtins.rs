//! The `kv_cache.*` packed functions. A cache travels as an [`Object`] holding a
//! [`SharedKvCache`] (or, in a pipelined prefill, a [`ChunkWindow`] on one); the mutating
//! builtins return that same object.

use super::{ChunkWindow, KvCache};
use crate::packed::{Args, BuiltinError, Registry};
use crate::value::{Object, Value, ValueKind};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// The payload of a KV cache object.
pub type SharedKvCache = Mutex<KvCache>;

/// The cache behind argument 0, locked. (A poisoned lock is taken over: every cache method
/// leaves the cache consistent before anything that could panic.)
fn cache<'a>(args: &Args<'a>) -> Result<MutexGuard<'a, KvCache>, BuiltinError> {
    let shared = args.object::<SharedKvCache>(0)?;
    Ok(shared.lock().unwrap_or_else(PoisonError::into_inner))
}

/// Argument 0 as a chunk's window, if it is one.
fn window<'a>(args: &Args<'a>) -> Option<&'a ChunkWindow> {
    args.values()[0].as_object::<ChunkWindow>()
}

/// An error for `pop` and `clear` on a chunk's window.
fn not_on_window(args: &Args<'_>) -> BuiltinError {
    args.invalid(
        0,
        "a prefill chunk's window",
        "only the whole cache can be cut back",
    )
}

fn create(args: &Args<'_>) -> Result<Value, BuiltinError> {
    let format: super::KvFormat = args.str(4)?.parse().map_err(|e| args.fail(e))?;
    let [layers, kv_heads, head_dim, capacity] = [0, 1, 2, 3].map(|i| args.count(i));
    let cache =
        KvCache::new(layers?, kv_heads?, head_dim?, capacity?, format).map_err(|e| args.fail(e))?;
    Ok(Value::Object(Object::new(Mutex::new(cache))))
}

/// `append` and `append_q8`: the tensors after the layer, one per stream of the cache.
fn append(args: &Args<'_>) -> Result<Value, BuiltinError> {
    let layer = args.count(1)?;
    let tensors = (2..args.values().len())
        .map(|i| args.tensor(i))
        .collect::<Result<Vec<_>, _>>()?;
    match window(args) {
        Some(window) => window.append(layer, &tensors),
        None => cache(args)?.append(layer, &tensors),
    }
    .map_err(|e| args.fail(e))?;
    Ok(args.values()[0].clone())
}

fn view(args: &Args<'_>) -> Result<Value, BuiltinError> {
    let layer = args.count(1)?;
    let views = match window(args) {
        Some(window) => window.view(layer),
        None => cache(args)?.view(layer),
    };
    let views = views.map_err(|e| args.fail(e))?;
    Ok(Value::Tuple(views.into_iter().map(Value::from).collect()))
}

fn pop(args: &Args<'_>) -> Result<Value, BuiltinError> {
    let n = args.count(1)?;
    if window(args).is_some() {
        return Err(not_on_window(args));
    }
    cache(args)?.pop(n).map_err(|e| args.fail(e))?;
    Ok(args.values()[0].clone())
}

fn clear(args: &Args<'_>) -> Result<Value, BuiltinError> {
    if window(args).is_some() {
        return Err(not_on_window(args));
    }
    cache(args)?.clear();
    Ok(args.values()[0].clone())
}

fn len(args: &Args<'_>) -> Result<Value, BuiltinError> {
    let len = match window(args) {
        Some(window) => window.end(),
        None => cache(args)?.len(),
    };
    Ok(Value::Int(len as i64))
}

/// Registers `kv_cache.create(layers, kv_heads, head_dim, capacity, dtype: str)` (`dtype`
/// a [`KvFormat`](super::KvFormat): a dtype name, or `q8`), `kv_cache.append(cache,
/// layer, k, v)`, `kv_cache.append_q8(cache, layer, k, v, k_scales, v_scales)` (an int8
/// cache), `kv_cache.view(cache, layer) -> (k, v)` (`(k, v, k_scales, v_scales)` for an
/// int8 cache), `kv_cache.pop(cache, n)`, `kv_cache.clear(cache)` and
/// `kv_cache.len(cache) -> int`.
pub fn register_builtins(registry: &mut Registry) -> Result<(), BuiltinError> {
    use ValueKind::{Int, Object as Obj, Str, Tensor};
    let sizes = [
        ("layers", Int),
        ("kv_heads", Int),
        ("head_dim", Int),
        ("capacity", Int),
    ];
    let create_params = [sizes.as_slice(), &[("dtype", Str)]].concat();
    registry.register("kv_cache.create", &create_params, create)?;
    let append_params = [("cache", Obj), ("layer", Int), ("k", Tensor), ("v", Tensor)];
    registry.register("kv_cache.append", &append_params, append)?;
    let scales = [("k_scales", Tensor), ("v_scales", Tensor)];
    let append_q8_params = [append_params.as_slice(), &scales].concat();
    registry.register("kv_cache.append_q8", &append_q8_params, append)?;
    registry.register("kv_cache.view", &[("cache", Obj), ("layer", Int)], view)?;
    registry.register("kv_cache.pop", &[("cache", Obj), ("n", Int)], pop)?;
    registry.register("kv_cache.clear", &[("cache", Obj)], clear)?;
    registry.register("kv_cache.len", &[("cache", Obj)], len)
}
