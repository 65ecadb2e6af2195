//! Values that VM registers, packed-function arguments and results hold.

use crate::tensor::Tensor;
use std::any::{self, Any};
use std::fmt;
use std::sync::Arc;

/// A runtime value.
#[derive(Clone, Debug)]
pub enum Value {
    /// A tensor (shared storage).
    Tensor(Tensor),
    /// An integer (dims, counts, indices).
    Int(i64),
    /// A float (e.g. a temperature).
    Float(f64),
    /// A string (e.g. a dtype name).
    Str(String),
    /// A tuple of values.
    Tuple(Vec<Value>),
    /// An opaque runtime object such as a KV cache.
    Object(Object),
}

/// The kind of a [`Value`], for signatures and error messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    /// [`Value::Tensor`].
    Tensor,
    /// [`Value::Int`].
    Int,
    /// [`Value::Float`].
    Float,
    /// [`Value::Str`].
    Str,
    /// [`Value::Tuple`].
    Tuple,
    /// [`Value::Object`].
    Object,
}

impl fmt::Display for ValueKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            ValueKind::Tensor => "tensor",
            ValueKind::Int => "int",
            ValueKind::Float => "float",
            ValueKind::Str => "str",
            ValueKind::Tuple => "tuple",
            ValueKind::Object => "object",
        };
        f.write_str(name)
    }
}

impl Value {
    /// Which variant this is.
    pub fn kind(&self) -> ValueKind {
        match self {
            Value::Tensor(_) => ValueKind::Tensor,
            Value::Int(_) => ValueKind::Int,
            Value::Float(_) => ValueKind::Float,
            Value::Str(_) => ValueKind::Str,
            Value::Tuple(_) => ValueKind::Tuple,
            Value::Object(_) => ValueKind::Object,
        }
    }

    /// A short description for error messages: the kind, plus the shape and dtype of a
    /// tensor or the type of an object.
    pub fn describe(&self) -> String {
        match self {
            Value::Tensor(t) => format!("tensor {:?} {}", t.shape(), t.dtype()),
            Value::Object(o) => format!("object {}", o.type_name()),
            Value::Tuple(fields) => format!("tuple of {}", fields.len()),
            other => other.kind().to_string(),
        }
    }

    /// The tensor, if this is one.
    pub fn as_tensor(&self) -> Option<&Tensor> {
        match self {
            Value::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// The integer, if this is one.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(v) => Some(*v),
            _ => None,
        }
    }

    /// The float (integers widen), if this is a number.
    pub fn as_float(&self) -> Option<f64> {
        match self {
            Value::Float(v) => Some(*v),
            Value::Int(v) => Some(*v as f64),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The fields, if this is a tuple.
    pub fn as_tuple(&self) -> Option<&[Value]> {
        match self {
            Value::Tuple(fields) => Some(fields),
            _ => None,
        }
    }

    /// The object's payload, if this is an object of type `T`.
    pub fn as_object<T: Any + Send + Sync>(&self) -> Option<&T> {
        match self {
            Value::Object(o) => o.downcast_ref(),
            _ => None,
        }
    }
}

impl From<Tensor> for Value {
    fn from(t: Tensor) -> Value {
        Value::Tensor(t)
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Value {
        Value::Int(v)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::Float(v)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::Str(s.to_string())
    }
}

/// A shared handle to a runtime object of any type (cheap to clone).
#[derive(Clone)]
pub struct Object {
    type_name: &'static str,
    payload: Arc<dyn Any + Send + Sync>,
}

impl Object {
    /// Wraps `payload`; interior mutability (e.g. a `Mutex`) is up to the payload type.
    pub fn new<T: Any + Send + Sync>(payload: T) -> Object {
        Object {
            type_name: any::type_name::<T>(),
            payload: Arc::new(payload),
        }
    }

    /// The Rust type name of the payload.
    pub fn type_name(&self) -> &'static str {
        self.type_name
    }

    /// The payload, if it is a `T`.
    pub fn downcast_ref<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.payload.downcast_ref()
    }

    /// Whether two handles refer to the same object.
    pub fn ptr_eq(&self, other: &Object) -> bool {
        Arc::ptr_eq(&self.payload, &other.payload)
    }
}

impl fmt::Debug for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Object({})", self.type_name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;
    use std::sync::Mutex;

    #[test]
    fn values_report_kinds_and_convert() {
        let t = Tensor::zeros(DType::F32, &[2, 3]).unwrap();
        let v = Value::Tuple(vec![t.into(), 3i64.into(), 0.5f64.into(), "f16".into()]);
        let fields = v.as_tuple().unwrap();
        assert_eq!(v.describe(), "tuple of 4");
        assert_eq!(fields[0].describe(), "tensor [2, 3] f32");
        assert_eq!(fields[1].as_int(), Some(3));
        assert_eq!(fields[1].as_float(), Some(3.0));
        assert_eq!(fields[2].as_float(), Some(0.5));
        assert_eq!(fields[2].as_int(), None);
        assert_eq!(fields[3].as_str(), Some("f16"));
        assert_eq!(fields[3].kind().to_string(), "str");
        assert!(fields[3].as_tensor().is_none());
    }

    #[test]
    fn objects_downcast_to_their_own_type_only() {
        let obj = Object::new(Mutex::new(41u32));
        let v = Value::Object(obj.clone());
        *v.as_object::<Mutex<u32>>().unwrap().lock().unwrap() += 1;
        assert_eq!(
            *obj.downcast_ref::<Mutex<u32>>().unwrap().lock().unwrap(),
            42
        );
        assert!(v.as_object::<Mutex<i64>>().is_none());
        assert!(obj.type_name().contains("Mutex<u32>"));
        assert!(obj.ptr_eq(&obj.clone()) && !obj.ptr_eq(&Object::new(0u8)));
        assert_eq!(v.describe(), format!("object {}", obj.type_name()));
    }
}
