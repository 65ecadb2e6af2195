use super::*;
use crate::{DType, KvCacheError};

fn scale_registry() -> Registry {
    let mut registry = Registry::new();
    registry
        .register(
            "test.scale",
            &[("x", ValueKind::Tensor), ("factor", ValueKind::Float)],
            |args| {
                let (x, factor) = (args.tensor(0)?, args.float(1)? as f32);
                let values = x.as_slice::<f32>().map_err(|e| args.fail(e))?;
                let scaled: Vec<f32> = values.iter().map(|v| v * factor).collect();
                Tensor::from_slice(&scaled, x.shape())
                    .map(Value::Tensor)
                    .map_err(|e| args.fail(e))
            },
        )
        .unwrap();
    registry
}

#[test]
fn registered_functions_are_called_by_name() {
    let registry = scale_registry();
    let x = Tensor::from_slice(&[1.0f32, -2.0], &[2]).unwrap();
    let out = registry
        .call("test.scale", &[x.into(), Value::Float(1.5)])
        .unwrap();
    assert_eq!(
        out.as_tensor().unwrap().as_slice::<f32>().unwrap(),
        &[1.5, -3.0]
    );
    assert_eq!(registry.names(), vec!["test.scale"]);
    assert_eq!(
        registry.get("test.scale").unwrap().signature(),
        "(x: tensor, factor: float)"
    );
}

#[test]
fn unknown_and_duplicate_names_are_errors() {
    let mut registry = scale_registry();
    let err = registry.call("test.nope", &[]).unwrap_err();
    assert_eq!(err.to_string(), "unknown packed function `test.nope`");
    let err = registry
        .register("test.scale", &[], |_| Ok(Value::Int(0)))
        .unwrap_err();
    assert!(matches!(err, BuiltinError::Duplicate { name } if name == "test.scale"));
}

#[test]
fn wrong_argument_count_names_function_and_signature() {
    let registry = scale_registry();
    let err = registry.call("test.scale", &[Value::Int(1)]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "`test.scale` takes 2 argument(s) (x: tensor, factor: float), got 1"
    );
}

#[test]
fn wrong_argument_type_names_index_expected_and_got() {
    let registry = scale_registry();
    let err = registry
        .call("test.scale", &[Value::Int(3), Value::Float(1.0)])
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "`test.scale` argument 0 (`x`): expected tensor, got int"
    );
    let x = Tensor::zeros(DType::F32, &[1]).unwrap();
    let err = registry
        .call("test.scale", &[x.into(), "2".into()])
        .unwrap_err();
    assert!(
        matches!(err, BuiltinError::ArgType { index: 1, ref expected, ref got, .. }
        if expected == "float" && got == "str")
    );
}

#[test]
fn body_failures_are_wrapped_with_the_function_name() {
    let registry = scale_registry();
    let ints = Tensor::zeros(DType::I32, &[2]).unwrap();
    let err = registry
        .call("test.scale", &[ints.into(), Value::Float(2.0)])
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "`test.scale` failed: tensor of dtype i32 accessed as f32"
    );
}

#[test]
fn objects_of_the_wrong_type_and_negative_counts_are_rejected() {
    let registry = Registry::with_builtins();
    let err = registry
        .call("kv_cache.len", &[Value::Object(crate::Object::new(7u8))])
        .unwrap_err();
    let BuiltinError::ArgType {
        func,
        index,
        expected,
        got,
        ..
    } = err
    else {
        panic!("expected an argument type error, got {err}");
    };
    assert_eq!((func.as_str(), index), ("kv_cache.len", 0));
    assert!(expected.contains("KvCache") && got == "object u8");
    let make = |layers: i64| {
        let args = [layers, 2, 4, 8].map(Value::Int);
        registry.call("kv_cache.create", &[&args[..], &["f32".into()]].concat())
    };
    let err = make(-1).unwrap_err();
    assert_eq!(
        err.to_string(),
        "`kv_cache.create` failed: argument 0 (`layers`) = -1: must be >= 0"
    );
    let err = registry
        .call(
            "kv_cache.create",
            &[1, 1, 1, 1]
                .map(Value::Int)
                .into_iter()
                .chain(["u4".into()])
                .collect::<Vec<_>>(),
        )
        .unwrap_err();
    assert!(matches!(
        err,
        BuiltinError::Failed {
            source: BuiltinFailure::KvCache(KvCacheError::UnsupportedDtype { dtype: DType::U4 }),
            ..
        }
    ));
}
