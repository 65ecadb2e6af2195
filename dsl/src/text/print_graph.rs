//! Printing graph functions (see the module docs of [`super`] for the syntax).

use super::syntax::{
    attr_items, dim_decls, float, name, op_name, quote, signature, sym_list, tuple,
};
use crate::attrs::{AttrValue, Attrs};
use crate::ir::{Binding, BindingBlock, BindingValue, Call, Callee, Constant, Expr, PrimValue};
use crate::{Function, StructInfo, SymVar, Var};
use std::collections::{BTreeSet, HashMap};
use std::fmt::Write;

/// The text form of graph function `name`.
pub fn print_function(name: &str, function: &Function) -> String {
    GraphPrinter::default().function(name, function)
}

/// The printer's state: the output and the variables defined so far (a reference that
/// matches its definition is printed by name alone).
#[derive(Default)]
struct GraphPrinter {
    out: String,
    vars: HashMap<String, Var>,
}

impl GraphPrinter {
    fn function(mut self, fname: &str, f: &Function) -> String {
        let params: Vec<String> = f.params.iter().map(|p| decl(p, false)).collect();
        for p in &f.params {
            self.vars.insert(p.name.clone(), p.clone());
        }
        let export = if f.exported { "export " } else { "" };
        let head = format!("{export}graph @{}", name(fname));
        let mut tail = format!(" -> {}", f.ret_sinfo());
        if !f.attrs.is_empty() {
            let _ = write!(tail, " attrs({})", attr_items(&f.attrs).join(", "));
        }
        let _ = writeln!(self.out, "{}", signature(&head, &params, &tail));
        let dims = function_dims(f);
        if !dims.is_empty() {
            let _ = writeln!(self.out, "  where {}", dim_decls(&dims));
        }
        self.out.push_str("{\n");
        self.blocks(&f.blocks);
        let ret = self.expr(&f.ret, None);
        let _ = writeln!(self.out, "  return {ret}\n}}");
        self.out
    }

    /// Dataflow blocks in `dataflow { }`; a plain block bare when that cannot merge it
    /// with a neighbour (non-empty, after a dataflow block or first), else in `block { }`.
    fn blocks(&mut self, blocks: &[BindingBlock]) {
        let mut after_plain = false;
        for block in blocks {
            let braced = block.dataflow || after_plain || block.bindings.is_empty();
            let indent = if braced { "    " } else { "  " };
            if braced {
                let keyword = if block.dataflow { "dataflow" } else { "block" };
                let _ = writeln!(self.out, "  {keyword} {{");
            }
            for binding in &block.bindings {
                self.binding(binding, indent, block.dataflow);
            }
            if braced {
                self.out.push_str("  }\n");
            }
            after_plain = !block.dataflow;
        }
    }

    fn binding(&mut self, binding: &Binding, indent: &str, dataflow_block: bool) {
        let value = match &binding.value {
            BindingValue::Expr(e) => self.expr(e, Some(&binding.var.sinfo)),
            BindingValue::MatchCast(e, sinfo) => {
                format!("match_cast({}, {sinfo})", self.expr(e, None))
            }
        };
        let decl = decl(&binding.var, dataflow_block);
        let _ = writeln!(self.out, "{indent}{decl} = {value}");
        self.vars
            .insert(binding.var.name.clone(), binding.var.clone());
    }

    /// An expression; an op call whose struct info equals `implied` omits it.
    fn expr(&self, e: &Expr, implied: Option<&StructInfo>) -> String {
        match e {
            Expr::Var(v) if self.vars.get(&v.name) == Some(v) => name(&v.name),
            Expr::Var(v) => format!("({})", decl(v, false)),
            Expr::Constant(c) => constant(c),
            Expr::Call(call) => self.call(call, implied),
            Expr::Tuple(items) => tuple(&self.exprs(items)),
            Expr::TupleGetItem(t, index) => format!("{}[{index}]", self.expr(t, None)),
            Expr::Shape(dims) => format!("shape({})", sym_list(dims)),
            Expr::Prim(PrimValue::Int(value, dtype)) => format!("{dtype}({value})"),
            Expr::Prim(PrimValue::Float(value, dtype)) => format!("{dtype}({})", float(*value)),
            Expr::Str(s) => quote(s, '"'),
        }
    }

    fn exprs(&self, items: &[Expr]) -> Vec<String> {
        items.iter().map(|e| self.expr(e, None)).collect()
    }

    fn call(&self, call: &Call, implied: Option<&StructInfo>) -> String {
        let args = self.exprs(&call.args);
        let attrs = attr_items(&call.attrs);
        let (head, mut parts) = match &call.callee {
            Callee::Op(op) => {
                let text = format!("{}({})", op_name(op), [args, attrs].concat().join(", "));
                return if implied == Some(&call.sinfo) {
                    text
                } else {
                    format!("{text} -> {}", call.sinfo)
                };
            }
            Callee::Tir(f) => ("call_tir", vec![format!("@{}", name(f))]),
            Callee::Packed(f) => ("call_packed", vec![quote(f, '"')]),
        };
        parts.push(format!("[{}]", args.join(", ")));
        parts.push(call.sinfo.to_string());
        parts.extend(attrs);
        format!("{head}({})", parts.join(", "))
    }
}

/// `name: sinfo` with `dataflow`/`output` when the flag differs from `default_dataflow`.
fn decl(var: &Var, default_dataflow: bool) -> String {
    let modifier = match (var.dataflow, default_dataflow) {
        (true, false) => "dataflow ",
        (false, true) => "output ",
        _ => "",
    };
    format!("{modifier}{}: {}", name(&var.name), var.sinfo)
}

/// `const((2, 2), f32, [0.0, -inf, 0.0, 0.0])`; integer and bool values without `.0`.
fn constant(c: &Constant) -> String {
    let shape: Vec<String> = c.shape.iter().map(i64::to_string).collect();
    let integral = !c.dtype.is_float();
    let values: Vec<String> = c
        .values
        .iter()
        .map(|&v| {
            if integral && is_small_integer(v) {
                format!("{}", v as i64)
            } else {
                float(v)
            }
        })
        .collect();
    format!(
        "const({}, {}, [{}])",
        tuple(&shape),
        c.dtype,
        values.join(", ")
    )
}

/// Whether `v` prints as an integer and reads back with the same bits (not `-0.0`).
fn is_small_integer(v: f64) -> bool {
    v.abs() < 1e15 && ((v as i64) as f64).to_bits() == v.to_bits()
}

/// Every symbolic dim a function mentions (parameters, bindings, calls, match casts,
/// shape and scalar values, attributes), sorted by name.
fn function_dims(f: &Function) -> BTreeSet<SymVar> {
    let mut dims = BTreeSet::new();
    for p in &f.params {
        dims.extend(p.sinfo.sym_vars());
    }
    for b in f.bindings() {
        dims.extend(b.var.sinfo.sym_vars());
        let value = match &b.value {
            BindingValue::Expr(e) => e,
            BindingValue::MatchCast(e, sinfo) => {
                dims.extend(sinfo.sym_vars());
                e
            }
        };
        expr_dims(value, &mut dims);
    }
    expr_dims(&f.ret, &mut dims);
    dims
}

fn expr_dims(e: &Expr, dims: &mut BTreeSet<SymVar>) {
    match e {
        Expr::Var(v) => dims.extend(v.sinfo.sym_vars()),
        Expr::Call(call) => {
            dims.extend(call.sinfo.sym_vars());
            attr_dims(&call.attrs, dims);
            call.args.iter().for_each(|a| expr_dims(a, dims));
        }
        Expr::Tuple(items) => items.iter().for_each(|a| expr_dims(a, dims)),
        Expr::TupleGetItem(t, _) => expr_dims(t, dims),
        Expr::Shape(values) => values.iter().for_each(|v| dims.extend(v.vars())),
        Expr::Prim(PrimValue::Int(value, _)) => dims.extend(value.vars()),
        Expr::Constant(_) | Expr::Prim(PrimValue::Float(..)) | Expr::Str(_) => {}
    }
}

/// Dims mentioned by `Shape` attribute values.
pub(super) fn attr_dims(attrs: &Attrs, dims: &mut BTreeSet<SymVar>) {
    for value in attrs.values() {
        if let AttrValue::Shape(values) = value {
            values.iter().for_each(|v| dims.extend(v.vars()));
        }
    }
}
