use super::programs::{add_only, program};
use super::*;

#[test]
fn executables_round_trip_through_json() {
    let exec = program();
    let json = exec.to_json().unwrap();
    assert!(json.contains(r#""name": "kv_cache.append""#));
    let loaded = Executable::from_json(&json).unwrap();
    assert_eq!(loaded, exec);
    let mut vm = vm(loaded);
    let out = vm
        .call("add", &[f32s(&[1.0], &[1]), f32s(&[2.0], &[1])])
        .unwrap();
    assert_eq!(values_of(&out), vec![3.0]);
}

#[test]
fn executables_save_and_load_as_files() {
    let path = std::env::temp_dir().join(format!("oxrelax-vm-{}.json", std::process::id()));
    add_only().save(&path).unwrap();
    let loaded = Executable::load(&path);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(loaded.unwrap(), add_only());
    let err = Executable::load(&path).unwrap_err();
    assert!(matches!(&err, ExecError::Io { path: p, .. } if p == &path));
}

#[test]
fn wrong_versions_and_malformed_json_are_refused() {
    let mut exec = add_only();
    exec.format_version = FORMAT_VERSION + 1;
    let err = Executable::from_json(&exec.to_json().unwrap()).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "executable format version {} is not supported (this runtime reads {FORMAT_VERSION})",
            FORMAT_VERSION + 1
        )
    );
    let err = Executable::from_json(r#"{"format_version": 1}"#).unwrap_err();
    assert!(matches!(err, ExecError::Json(_)));
    assert!(err
        .to_string()
        .starts_with("malformed executable: missing field `kernels`"));
}

#[test]
fn instructions_serialize_in_readable_form() {
    let instr = Instr::MatchShape {
        reg: 0,
        dtype: crate::DType::I32,
        dims: vec![DimPattern::Const(1), DimPattern::Bind(0)],
    };
    assert_eq!(
        serde_json::to_string(&instr).unwrap(),
        r#"{"match_shape":{"reg":0,"dtype":"i32","dims":[{"const":1},{"bind":0}]}}"#
    );
}
