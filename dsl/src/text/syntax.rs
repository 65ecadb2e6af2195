//! Lexical conventions shared by the printers: how names, strings, floats, tuples,
//! attributes and dim declarations are written. The parser reads exactly these forms.

use crate::attrs::{AttrValue, Attrs};
use crate::{DType, SymExpr, SymVar};

/// Words that start a statement, a binding or a literal where a name could also stand.
/// A name equal to one of them is written in backticks.
pub(super) const KEYWORDS: [&str; 14] = [
    "dataflow", "block", "output", "return", "for", "in", "let", "if", "else", "alloc", "evaluate",
    "seq", "inf", "nan",
];

/// Heads of special graph expressions; an op with one of these names is written in
/// backticks (`` `const`(x) ``).
pub(super) const EXPR_HEADS: [&str; 5] =
    ["const", "call_tir", "call_packed", "shape", "match_cast"];

/// The longest function header kept on one line.
const LINE_WIDTH: usize = 100;

/// Whether `text` can be written without backticks (before checking reserved words).
pub(super) fn is_bare_ident(text: &str) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

fn is_dtype_name(text: &str) -> bool {
    DType::ALL.iter().any(|d| d.name() == text)
}

/// A variable, buffer, loop variable or function name.
pub(super) fn name(text: &str) -> String {
    quote_unless(text, is_bare_ident(text) && !KEYWORDS.contains(&text))
}

/// An op name at the head of a call.
pub(super) fn op_name(text: &str) -> String {
    let plain = is_bare_ident(text) && !EXPR_HEADS.contains(&text) && !is_dtype_name(text);
    quote_unless(text, plain)
}

/// An attribute key (always followed by `=`, so reserved words need no quoting).
pub(super) fn key(text: &str) -> String {
    quote_unless(text, is_bare_ident(text))
}

fn quote_unless(text: &str, plain: bool) -> String {
    if plain {
        text.to_string()
    } else {
        quote(text, '`')
    }
}

/// `text` between `delim`s, with `\\`, `\<delim>`, `\n`, `\t`, `\r` and `\u{..}` escapes.
pub(super) fn quote(text: &str, delim: char) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push(delim);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c == delim => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out.push(delim);
    out
}

/// A float that reads back bit-exactly (except NaN payloads): the shortest round-trip
/// form (`1.0`, `1e-5`), or `inf`, `-inf`, `nan`. Always contains `.`, `e`, `inf` or
/// `nan`, so it never reads as an integer.
pub(super) fn float(value: f64) -> String {
    if value.is_nan() {
        "nan".to_string()
    } else if value.is_infinite() {
        if value > 0.0 { "inf" } else { "-inf" }.to_string()
    } else {
        format!("{value:?}")
    }
}

/// A parenthesized list with a trailing comma for one item: `()`, `(a,)`, `(a, b)`.
pub(super) fn tuple(items: &[String]) -> String {
    match items {
        [one] => format!("({one},)"),
        _ => format!("({})", items.join(", ")),
    }
}

/// A shape as a tuple of symbolic expressions.
pub(super) fn sym_tuple(dims: &[SymExpr]) -> String {
    tuple(&dims.iter().map(|d| d.to_string()).collect::<Vec<_>>())
}

/// Symbolic expressions separated by commas (inside `shape(...)`).
pub(super) fn sym_list(dims: &[SymExpr]) -> String {
    dims.iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A dim declaration: `n <= 2048`, or `k` when unbounded.
pub(super) fn dim_decl(var: &SymVar) -> String {
    match var.upper() {
        Some(upper) => format!("{} <= {upper}", var.name()),
        None => var.name().to_string(),
    }
}

/// Dim declarations separated by commas.
pub(super) fn dim_decls<'a>(vars: impl IntoIterator<Item = &'a SymVar>) -> String {
    vars.into_iter()
        .map(dim_decl)
        .collect::<Vec<_>>()
        .join(", ")
}

/// One attribute value: `-1`, `[0, 2]`, `1e-5`, `true`, `"tanh"`, `f16`, `shape(1, n)`.
pub(super) fn attr_value(value: &AttrValue) -> String {
    match value {
        AttrValue::Int(v) => v.to_string(),
        AttrValue::Ints(vs) => {
            let items: Vec<String> = vs.iter().map(i64::to_string).collect();
            format!("[{}]", items.join(", "))
        }
        AttrValue::Float(v) => float(*v),
        AttrValue::Bool(b) => b.to_string(),
        AttrValue::Str(s) => quote(s, '"'),
        AttrValue::DType(d) => d.name().to_string(),
        AttrValue::Shape(dims) => format!("shape({})", sym_list(dims)),
    }
}

/// Attributes as `key=value` items, in key order.
pub(super) fn attr_items(attrs: &Attrs) -> Vec<String> {
    attrs
        .iter()
        .map(|(k, v)| format!("{}={}", key(k), attr_value(v)))
        .collect()
}

/// `head(params)tail`: on one line when it fits in [`LINE_WIDTH`], else one parameter
/// per line.
pub(super) fn signature(head: &str, params: &[String], tail: &str) -> String {
    let one_line = format!("{head}({}){tail}", params.join(", "));
    if one_line.len() <= LINE_WIDTH {
        return one_line;
    }
    let lines: Vec<String> = params.iter().map(|p| format!("  {p},\n")).collect();
    format!("{head}(\n{}){tail}", lines.concat())
}
