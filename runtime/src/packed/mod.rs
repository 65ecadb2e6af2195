//! Packed functions: runtime builtins registered by name and called with `&[Value]`.

mod error;
#[cfg(test)]
mod tests;

pub use error::{BuiltinError, BuiltinFailure, OffloadFailure};

use crate::tensor::Tensor;
use crate::value::{Value, ValueKind};
use std::any::{self, Any};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// The body of a packed function; arguments arrive checked against the signature.
pub type BuiltinBody = dyn Fn(&Args<'_>) -> Result<Value, BuiltinError> + Send + Sync;

/// One declared parameter of a packed function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// Its name (for error messages).
    pub name: String,
    /// The kind of value it accepts.
    pub kind: ValueKind,
}

/// A named function with a fixed signature (cheap to clone).
#[derive(Clone)]
pub struct PackedFunc {
    name: String,
    params: Vec<Param>,
    body: Arc<BuiltinBody>,
}

impl PackedFunc {
    /// The registered name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The declared parameters.
    pub fn params(&self) -> &[Param] {
        &self.params
    }

    /// The printed signature, e.g. `(cache: object, layer: int)`.
    pub fn signature(&self) -> String {
        let params: Vec<String> = self
            .params
            .iter()
            .map(|p| format!("{}: {}", p.name, p.kind))
            .collect();
        format!("({})", params.join(", "))
    }

    /// Checks the arguments' count and kinds, then runs the body.
    pub fn call(&self, values: &[Value]) -> Result<Value, BuiltinError> {
        if values.len() != self.params.len() {
            return Err(BuiltinError::ArgCount {
                func: self.name.clone(),
                signature: self.signature(),
                expected: self.params.len(),
                got: values.len(),
            });
        }
        let args = Args { func: self, values };
        for (index, (param, value)) in self.params.iter().zip(values).enumerate() {
            if value.kind() != param.kind {
                return Err(args.type_error(index, param.kind.to_string()));
            }
        }
        (self.body)(&args)
    }
}

impl fmt::Debug for PackedFunc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PackedFunc({}{})", self.name, self.signature())
    }
}

/// The arguments of one packed-function call, with typed accessors whose errors name the
/// function, the argument and the types involved.
pub struct Args<'a> {
    func: &'a PackedFunc,
    values: &'a [Value],
}

impl<'a> Args<'a> {
    /// All arguments.
    pub fn values(&self) -> &'a [Value] {
        self.values
    }

    fn param_name(&self, index: usize) -> String {
        self.func
            .params
            .get(index)
            .map_or_else(|| format!("#{index}"), |p| p.name.clone())
    }

    fn type_error(&self, index: usize, expected: String) -> BuiltinError {
        BuiltinError::ArgType {
            func: self.func.name.clone(),
            index,
            param: self.param_name(index),
            expected,
            got: self
                .values
                .get(index)
                .map_or("nothing".into(), Value::describe),
        }
    }

    fn get<T>(
        &self,
        index: usize,
        expected: impl Fn() -> String,
        pick: impl Fn(&'a Value) -> Option<T>,
    ) -> Result<T, BuiltinError> {
        self.values
            .get(index)
            .and_then(pick)
            .ok_or_else(|| self.type_error(index, expected()))
    }

    /// Argument `index` as a tensor.
    pub fn tensor(&self, index: usize) -> Result<&'a Tensor, BuiltinError> {
        self.get(index, || "tensor".into(), Value::as_tensor)
    }

    /// Argument `index` as an integer.
    pub fn int(&self, index: usize) -> Result<i64, BuiltinError> {
        self.get(index, || "int".into(), Value::as_int)
    }

    /// Argument `index` as a non-negative integer (a count, size or index).
    pub fn count(&self, index: usize) -> Result<usize, BuiltinError> {
        let value = self.int(index)?;
        usize::try_from(value).map_err(|_| self.invalid(index, value, "must be >= 0"))
    }

    /// Argument `index` as a float (integers widen).
    pub fn float(&self, index: usize) -> Result<f64, BuiltinError> {
        self.get(index, || "float".into(), Value::as_float)
    }

    /// Argument `index` as a string.
    pub fn str(&self, index: usize) -> Result<&'a str, BuiltinError> {
        self.get(index, || "str".into(), Value::as_str)
    }

    /// Argument `index` as an object holding a `T`.
    pub fn object<T: Any + Send + Sync>(&self, index: usize) -> Result<&'a T, BuiltinError> {
        let expected = || format!("object {}", any::type_name::<T>());
        self.get(index, expected, Value::as_object::<T>)
    }

    /// An error for argument `index` having an invalid value.
    pub fn invalid(&self, index: usize, value: impl fmt::Display, reason: &str) -> BuiltinError {
        self.fail(BuiltinFailure::InvalidArgument {
            index,
            param: self.param_name(index),
            value: value.to_string(),
            reason: reason.to_string(),
        })
    }

    /// Wraps a failure of the body with the function's name.
    pub fn fail(&self, source: impl Into<BuiltinFailure>) -> BuiltinError {
        BuiltinError::Failed {
            func: self.func.name.clone(),
            source: source.into(),
        }
    }
}

/// Packed functions by name.
#[derive(Clone, Default, Debug)]
pub struct Registry {
    funcs: HashMap<String, PackedFunc>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// A registry holding the runtime's builtins (`kv_cache.*`, `kv_batch.*`).
    pub fn with_builtins() -> Registry {
        let mut registry = Registry::new();
        let registered = crate::kv_cache::register_builtins(&mut registry)
            .and_then(|()| crate::kv_cache::register_batch_builtins(&mut registry));
        if let Err(err) = registered {
            unreachable!("the runtime's builtin names are distinct: {err}");
        }
        registry
    }

    /// Registers `body` under `name` with parameters `(name, kind)`; a taken name is an error.
    pub fn register(
        &mut self,
        name: &str,
        params: &[(&str, ValueKind)],
        body: impl Fn(&Args<'_>) -> Result<Value, BuiltinError> + Send + Sync + 'static,
    ) -> Result<(), BuiltinError> {
        if self.funcs.contains_key(name) {
            return Err(BuiltinError::Duplicate { name: name.into() });
        }
        let params = params
            .iter()
            .map(|&(name, kind)| Param {
                name: name.into(),
                kind,
            })
            .collect();
        let func = PackedFunc {
            name: name.into(),
            params,
            body: Arc::new(body),
        };
        self.funcs.insert(name.into(), func);
        Ok(())
    }

    /// The function registered under `name`.
    pub fn get(&self, name: &str) -> Result<&PackedFunc, BuiltinError> {
        self.funcs
            .get(name)
            .ok_or_else(|| BuiltinError::Unknown { name: name.into() })
    }

    /// Calls the function registered under `name`.
    pub fn call(&self, name: &str, args: &[Value]) -> Result<Value, BuiltinError> {
        self.get(name)?.call(args)
    }

    /// The registered names, sorted.
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.funcs.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }
}
