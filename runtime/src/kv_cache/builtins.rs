//! The `kv_cache.*` packed functions. A cache travels as an [`Object`] holding a
//! [`SharedKvCache`]; the mutating builtins return that same object.

use super::KvCache;
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

fn create(args: &Args<'_>) -> Result<Value, BuiltinError> {
    let dtype = args.str(4)?.parse().map_err(|e| args.fail(e))?;
    let [layers, kv_heads, head_dim, capacity] = [0, 1, 2, 3].map(|i| args.count(i));
    let cache =
        KvCache::new(layers?, kv_heads?, head_dim?, capacity?, dtype).map_err(|e| args.fail(e))?;
    Ok(Value::Object(Object::new(Mutex::new(cache))))
}

fn append(args: &Args<'_>) -> Result<Value, BuiltinError> {
    let (layer, k, v) = (args.count(1)?, args.tensor(2)?, args.tensor(3)?);
    cache(args)?.append(layer, k, v).map_err(|e| args.fail(e))?;
    Ok(args.values()[0].clone())
}

fn view(args: &Args<'_>) -> Result<Value, BuiltinError> {
    let layer = args.count(1)?;
    let (k, v) = cache(args)?.view(layer).map_err(|e| args.fail(e))?;
    Ok(Value::Tuple(vec![k.into(), v.into()]))
}

fn pop(args: &Args<'_>) -> Result<Value, BuiltinError> {
    let n = args.count(1)?;
    cache(args)?.pop(n).map_err(|e| args.fail(e))?;
    Ok(args.values()[0].clone())
}

fn clear(args: &Args<'_>) -> Result<Value, BuiltinError> {
    cache(args)?.clear();
    Ok(args.values()[0].clone())
}

fn len(args: &Args<'_>) -> Result<Value, BuiltinError> {
    Ok(Value::Int(cache(args)?.len() as i64))
}

/// Registers `kv_cache.create(layers, kv_heads, head_dim, capacity, dtype: str)`,
/// `kv_cache.append(cache, layer, k, v)`, `kv_cache.view(cache, layer) -> (k, v)`,
/// `kv_cache.pop(cache, n)`, `kv_cache.clear(cache)` and `kv_cache.len(cache) -> int`.
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
    registry.register("kv_cache.view", &[("cache", Obj), ("layer", Int)], view)?;
    registry.register("kv_cache.pop", &[("cache", Obj), ("n", Int)], pop)?;
    registry.register("kv_cache.clear", &[("cache", Obj)], clear)?;
    registry.register("kv_cache.len", &[("cache", Obj)], len)
}
