//! The text form of an [`IRModule`]: a deterministic printer and a parser that reads
//! it back, so that `parse_module(&print_module(m)) == Ok(m)`.
//!
//! A graph function:
//!
//! ```text
//! export graph @main(
//!   x: Tensor((1, n, 64), f32),
//!   model.layers.0.mlp.weight: Tensor((64, 128), f32),
//!   cache: Object,
//! ) -> Tensor((1, n, 128), f32)
//!   where n <= 2048
//! {
//!   dataflow {
//!     lv: Tensor((1, n, 128), f32) = matmul(x, model.layers.0.mlp.weight)
//!     output gv: Tensor((1, n, 128), f32) = call_tir(@silu, [lv], Tensor((1, n, 128), f32))
//!   }
//!   c: Object = call_packed("kv_cache.append", [cache, gv], Object)
//!   return gv
//! }
//! ```
//!
//! - `where` declares every symbolic dim the function mentions, with its bound.
//! - A binding is `name: StructInfo = value`; `output` marks a non-dataflow variable in a
//!   dataflow block, `dataflow` a dataflow variable elsewhere. Bindings outside any
//!   `dataflow { }` form one plain block; `block { }` delimits further plain blocks.
//! - Op calls take attributes as `key=value` after the arguments (`sum(x, axis=[1])`).
//!   An op call's struct info is the bound variable's unless written `-> StructInfo`;
//!   `call_tir` and `call_packed` always state theirs.
//! - Other expressions: `const((2, 2), f32, [0.0, -inf, 0.0, 0.0])`, `(a, b)`, `(a,)`,
//!   `t[0]`, `shape(1, n)`, `i64(n + 1)`, `f32(0.5)`, `"text"`, and `(x: StructInfo)` for a
//!   reference whose struct info differs from the variable's definition.
//!
//! A primitive function:
//!
//! ```text
//! prim @silu(x: Buffer((n, 128), f32), out: Buffer((n, 128), f32))
//!   outputs 1 dims(n <= 2048) attrs(op_pattern="elemwise")
//! {
//!   for i0 in serial(n) {
//!     for i1 in serial(128) {
//!       out[i0, i1] = x[i0, i1] * sigmoid(x[i0, i1])
//!     }
//!   }
//! }
//! ```
//!
//! - Statements: `for i in parallel(n) { }` (`for i: i32 in ...` when the loop variable
//!   is not `i64`), `buf[i, j] = value`, `let v: f32 = value { }`, `if c { } else { }`,
//!   `alloc t: Buffer((64,), f32) { }`, `evaluate e`, and `seq { }` for a nested sequence.
//! - Expressions: `+ - * /` and comparisons infix (compound operands parenthesized), other
//!   binary ops as functions (`floordiv(a, b)`, `max(a, b)`, `shl(a, b)`), `not(c)`,
//!   `cast(f16, e)`, `select(c, a, b)`, intrinsics (`exp(x)`, `fma(a, b, c)`). Literals are
//!   `i64` (`3`) or `f32` (`1.5`, `-inf`) unless typed (`i32(3)`, `f16(0.5)`). Variables
//!   and loads take their dtype from their declaration (dims and loop variables are
//!   `i64`); otherwise they are written `(x: i32)`, `(buf[i]: f16)`.
//!
//! Names are bare identifiers (dots allowed) or quoted in backticks.

pub mod finite_f64;
mod lexer;
mod parse_graph;
mod parse_tir;
mod parse_types;
mod parser;
mod print_graph;
mod print_tir;
mod syntax;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_errors;
#[cfg(test)]
mod tests_syntax;
#[cfg(test)]
mod tests_tir;

pub use print_graph::print_function;
pub use print_tir::print_prim_func;

use crate::IRModule;

/// A syntax or scoping error in the text form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}{}: {message}", in_function(.function))]
pub struct ParseError {
    /// 1-based line of the problem.
    pub line: usize,
    /// 1-based column (in characters) of the problem.
    pub column: usize,
    /// What was expected and what was found, or what is wrong.
    pub message: String,
    /// The function being parsed, if any.
    pub function: Option<String>,
}

fn in_function(function: &Option<String>) -> String {
    function
        .as_ref()
        .map_or_else(String::new, |f| format!(" (in @{f})"))
}

impl ParseError {
    /// An error at byte `offset` of `src`.
    fn at(src: &str, offset: usize, message: String, function: Option<String>) -> Self {
        let (line, column) = lexer::line_column(src, offset);
        ParseError {
            line,
            column,
            message,
            function,
        }
    }
}

/// Prints every graph function, then every primitive function, each in name order,
/// separated by blank lines.
pub fn print_module(module: &IRModule) -> String {
    let graphs = module
        .functions
        .iter()
        .map(|(name, f)| print_function(name, f));
    let prims = module
        .prim_funcs
        .iter()
        .map(|(name, f)| print_prim_func(name, f));
    graphs.chain(prims).collect::<Vec<_>>().join("\n")
}

/// Attributes as their text form prints them, `key=value` items in key order separated
/// by `, `.
pub fn print_attrs(attrs: &crate::Attrs) -> String {
    syntax::attr_items(attrs).join(", ")
}

/// Parses the text form printed by [`print_module`] (comments and trailing commas are
/// allowed).
pub fn parse_module(text: &str) -> Result<IRModule, ParseError> {
    parser::Parser::new(text)?.module()
}
