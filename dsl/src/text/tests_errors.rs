//! Tests of parse errors: positions and messages.

use super::*;

fn error(text: &str) -> ParseError {
    parse_module(text).expect_err("the text should not parse")
}

#[test]
fn unknown_variable_is_reported_where_it_is_used() {
    let e = error("graph @f(x: Tensor((2,), f32)) -> Tensor((2,), f32)\n{\n  return y\n}\n");
    assert_eq!((e.line, e.column), (3, 10));
    assert_eq!(e.message, "unknown variable `y`");
    assert_eq!(
        e.to_string(),
        "line 3, column 10 (in @f): unknown variable `y`"
    );
}

#[test]
fn missing_punctuation_names_what_was_expected() {
    let e = error("graph @f(x Tensor((2,), f32)) {\n  return x\n}");
    assert_eq!((e.line, e.column), (1, 12));
    assert_eq!(e.message, "expected `:`, found `Tensor`");
    let e = error("prim @g(a: Buffer((4,), f32)) outputs 0 {\n  for i in sideways(4) {\n  }\n}");
    assert_eq!(
        (e.line, e.column, e.function.as_deref()),
        (2, 12, Some("g"))
    );
    assert_eq!(
        e.message,
        "expected a loop kind (serial, parallel, vectorized, unrolled), found `sideways`"
    );
    let e = error("module");
    assert_eq!((e.line, e.column), (1, 1));
    assert_eq!(
        e.message,
        "expected `graph`, `export graph` or `prim`, found `module`"
    );
}

#[test]
fn undeclared_dims_and_types_are_rejected() {
    let e = error("graph @f(x: Tensor((1, k + 1), f32)) {\n  return x\n}");
    assert_eq!((e.line, e.column), (1, 24));
    assert_eq!(e.message, "unknown symbolic dim `k`");
    let e = error("graph @f(x: Tensor((2,), f8)) {\n  return x\n}");
    assert_eq!((e.line, e.column), (1, 26));
    assert!(e.message.starts_with("unknown dtype `f8`"), "{}", e.message);
    let e = error("graph @f(x: Tensor((2,), f32)) -> Object {\n  return x\n}");
    assert_eq!((e.line, e.column), (1, 35));
    assert_eq!(
        e.message,
        "the declared result `Object` differs from the returned value's `Tensor((2,), f32)`"
    );
}

#[test]
fn nested_calls_need_struct_info() {
    let e = error("graph @f(x: Tensor((2,), f32)) {\n  return (exp(x),)\n}");
    assert_eq!((e.line, e.column), (2, 17));
    assert_eq!(
        e.message,
        "expected `-> struct info` after the call of `exp`, found `,`"
    );
    let e = error("graph @f(x: Tensor((2,), f32)) {\n  y: Object = split(x)[0]\n  return y\n}");
    assert_eq!((e.line, e.column), (2, 23));
    assert_eq!(
        e.message,
        "a call inside an expression needs `-> struct info`"
    );
}

#[test]
fn lexical_errors_and_duplicates_are_reported() {
    let e = error("graph @f(x: Object) {\n  y: Object = call_packed(\"open, [x], Object)\n");
    assert_eq!((e.line, e.column), (2, 27));
    assert_eq!(e.message, "unterminated \"...\" (no closing \")");
    let e = error("graph @f() {\n  return #\n}");
    assert_eq!(
        (e.line, e.column, e.message.as_str()),
        (2, 10, "unexpected character `#`")
    );
    let twice = "graph @f(x: Object) {\n  return x\n}\n";
    let e = error(&format!("{twice}{twice}"));
    assert_eq!((e.line, e.column), (4, 1));
    assert_eq!(e.message, "function @f is defined twice");
}

#[test]
fn tir_scoping_and_arity_errors() {
    let e = error("prim @g(a: Buffer((4,), f32)) outputs 0 {\n  b[0] = a[0]\n  evaluate q\n}");
    assert_eq!((e.line, e.column), (3, 12));
    assert_eq!(
        e.message,
        "unknown variable `q` (declare it or write `(q: dtype)`)"
    );
    let e = error("prim @g(a: Buffer((4,), f32)) outputs 0 {\n  a[0] = select(1, 2)\n}");
    assert_eq!((e.line, e.column), (2, 10));
    assert_eq!(e.message, "`select` takes 3 arguments, found 2");
    let e = error("prim @g(a: Buffer((4,), f32)) outputs 0 {\n  a[0] = frobnicate(1)\n}");
    assert_eq!(e.message, "unknown function `frobnicate`");
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let deep = format!(
        "graph @f(x: Tensor((2,), f32)) -> Tensor((2,), f32)\n{{\n  return {}x{}\n}}\n",
        "(".repeat(100_000),
        ",)".repeat(100_000)
    );
    let e = error(&deep);
    assert_eq!(e.message, "brackets nested more than 256 deep");
    assert_eq!(e.line, 3);
}
