//! Printing primitive functions (see the module docs of [`super`] for the syntax).

use super::print_graph::attr_dims;
use super::syntax::{attr_items, dim_decls, float, name, signature, sym_tuple};
use crate::tir::{BinOp, Buffer, PrimCmp, PrimExpr, PrimFunc, Stmt, TVar};
use crate::{DType, SymVar};
use std::collections::BTreeSet;
use std::fmt::Write;

/// The text form of primitive function `name`.
pub fn print_prim_func(name: &str, func: &PrimFunc) -> String {
    let mut printer = TirPrinter::default();
    printer.func(name, func);
    printer.out
}

/// The printer's state: the output and the variables and buffers in scope (whose
/// dtypes need not be written).
#[derive(Default)]
struct TirPrinter {
    out: String,
    vars: Vec<TVar>,
    buffers: Vec<(String, DType)>,
}

/// The infix symbol of `+ - * /`.
pub(super) fn infix_symbol(op: BinOp) -> Option<&'static str> {
    match op {
        BinOp::Add => Some("+"),
        BinOp::Sub => Some("-"),
        BinOp::Mul => Some("*"),
        BinOp::Div => Some("/"),
        _ => None,
    }
}

/// The symbol of a comparison.
pub(super) fn cmp_symbol(cmp: PrimCmp) -> &'static str {
    match cmp {
        PrimCmp::Lt => "<",
        PrimCmp::Le => "<=",
        PrimCmp::Gt => ">",
        PrimCmp::Ge => ">=",
        PrimCmp::Eq => "==",
        PrimCmp::Ne => "!=",
    }
}

/// `Buffer((shape), dtype[, strides=(...)])`.
fn buffer_type(buffer: &Buffer) -> String {
    let strides = match &buffer.strides {
        Some(strides) => format!(", strides={}", sym_tuple(strides)),
        None => String::new(),
    };
    let shape = sym_tuple(&buffer.shape);
    format!("Buffer({shape}, {}{strides})", buffer.dtype)
}

/// Dims in buffer shapes, strides and attributes that `dims` does not list.
fn undeclared_dims(func: &PrimFunc) -> BTreeSet<SymVar> {
    let mut all = BTreeSet::new();
    func.params.iter().for_each(|b| buffer_dims(b, &mut all));
    stmt_dims(&func.body, &mut all);
    attr_dims(&func.attrs, &mut all);
    all.retain(|d| !func.dims.contains(d));
    all
}

fn buffer_dims(buffer: &Buffer, out: &mut BTreeSet<SymVar>) {
    let strides = buffer.strides.iter().flatten();
    for d in buffer.shape.iter().chain(strides) {
        out.extend(d.vars());
    }
}

fn stmt_dims(stmt: &Stmt, out: &mut BTreeSet<SymVar>) {
    match stmt {
        Stmt::Seq(items) => items.iter().for_each(|s| stmt_dims(s, out)),
        Stmt::Allocate { buffer, body } => {
            buffer_dims(buffer, out);
            stmt_dims(body, out);
        }
        Stmt::For { body, .. } | Stmt::Let { body, .. } => stmt_dims(body, out),
        Stmt::If {
            then, otherwise, ..
        } => {
            stmt_dims(then, out);
            otherwise.iter().for_each(|s| stmt_dims(s, out));
        }
        Stmt::Store { .. } | Stmt::Evaluate(_) | Stmt::Microkernel(_) => {}
    }
}

impl TirPrinter {
    fn func(&mut self, fname: &str, func: &PrimFunc) {
        let params: Vec<String> = func
            .params
            .iter()
            .map(|b| format!("{}: {}", name(&b.name), buffer_type(b)))
            .collect();
        let head = format!("prim @{}", name(fname));
        let _ = writeln!(self.out, "{}", signature(&head, &params, ""));
        let _ = write!(self.out, "  outputs {}", func.num_outputs);
        if !func.dims.is_empty() {
            let _ = write!(self.out, " dims({})", dim_decls(&func.dims));
        }
        let undeclared = undeclared_dims(func);
        if !undeclared.is_empty() {
            let _ = write!(self.out, " where {}", dim_decls(&undeclared));
        }
        if !func.attrs.is_empty() {
            let _ = write!(self.out, " attrs({})", attr_items(&func.attrs).join(", "));
        }
        let dims = func.dims.iter().chain(&undeclared);
        self.vars = dims.map(|d| TVar::new(d.name(), DType::I64)).collect();
        self.buffers = func
            .params
            .iter()
            .map(|b| (b.name.clone(), b.dtype))
            .collect();
        self.out.push_str("\n{\n");
        self.block(&func.body, 1);
        self.out.push_str("}\n");
    }

    /// The statements inside braces: a sequence other than of one item is spread out.
    fn block(&mut self, stmt: &Stmt, depth: usize) {
        match stmt {
            Stmt::Seq(items) if items.len() != 1 => {
                items.iter().for_each(|s| self.stmt(s, depth));
            }
            _ => self.stmt(stmt, depth),
        }
    }

    /// `head {`, the body one level deeper, `}`.
    fn nested(&mut self, depth: usize, head: &str, body: &Stmt) {
        let indent = "  ".repeat(depth);
        let _ = writeln!(self.out, "{indent}{head} {{");
        self.block(body, depth + 1);
        let _ = writeln!(self.out, "{indent}}}");
    }

    fn stmt(&mut self, stmt: &Stmt, depth: usize) {
        let indent = "  ".repeat(depth);
        match stmt {
            Stmt::Seq(items) => {
                let _ = writeln!(self.out, "{indent}seq {{");
                items.iter().for_each(|s| self.stmt(s, depth + 1));
                let _ = writeln!(self.out, "{indent}}}");
            }
            Stmt::For {
                var,
                extent,
                kind,
                body,
            } => {
                let dtype = match var.dtype {
                    DType::I64 => String::new(),
                    d => format!(": {d}"),
                };
                let head = format!(
                    "for {}{dtype} in {}({})",
                    name(&var.name),
                    kind.name(),
                    self.expr(extent)
                );
                self.scoped_var(var, |p| p.nested(depth, &head, body));
            }
            Stmt::Store {
                buffer,
                indices,
                value,
            } => {
                let (indices, value) = (self.exprs(indices), self.expr(value));
                let _ = writeln!(self.out, "{indent}{}[{indices}] = {value}", name(buffer));
            }
            Stmt::Let { var, value, body } => {
                let head = format!(
                    "let {}: {} = {}",
                    name(&var.name),
                    var.dtype,
                    self.expr(value)
                );
                self.scoped_var(var, |p| p.nested(depth, &head, body));
            }
            Stmt::If {
                cond,
                then,
                otherwise,
            } => self.if_stmt(cond, then, otherwise.as_deref(), depth),
            Stmt::Allocate { buffer, body } => {
                let head = format!("alloc {}: {}", name(&buffer.name), buffer_type(buffer));
                self.buffers.push((buffer.name.clone(), buffer.dtype));
                self.nested(depth, &head, body);
                self.buffers.pop();
            }
            Stmt::Evaluate(e) => {
                let _ = writeln!(self.out, "{indent}evaluate {}", self.expr(e));
            }
            Stmt::Microkernel(call) => {
                let operands: Vec<String> = call
                    .operands
                    .iter()
                    .map(|o| format!("{} @ {}", name(&o.buffer), self.expr(&o.offset)))
                    .collect();
                let _ = writeln!(
                    self.out,
                    "{indent}microkernel {}({})({})",
                    name(&call.kernel),
                    operands.join(", "),
                    self.exprs(&call.scalars)
                );
            }
        }
    }

    fn scoped_var(&mut self, var: &TVar, print: impl FnOnce(&mut Self)) {
        self.vars.push(var.clone());
        print(self);
        self.vars.pop();
    }

    fn if_stmt(&mut self, cond: &PrimExpr, then: &Stmt, otherwise: Option<&Stmt>, depth: usize) {
        let indent = "  ".repeat(depth);
        let _ = writeln!(self.out, "{indent}if {} {{", self.expr(cond));
        self.block(then, depth + 1);
        if let Some(otherwise) = otherwise {
            let _ = writeln!(self.out, "{indent}}} else {{");
            self.block(otherwise, depth + 1);
        }
        let _ = writeln!(self.out, "{indent}}}");
    }

    fn exprs(&self, items: &[PrimExpr]) -> String {
        items
            .iter()
            .map(|e| self.expr(e))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn expr(&self, e: &PrimExpr) -> String {
        match e {
            PrimExpr::Int(v, DType::I64) => v.to_string(),
            PrimExpr::Int(v, d) => format!("{d}({v})"),
            PrimExpr::Float(v, DType::F32) => float(*v),
            PrimExpr::Float(v, d) => format!("{d}({})", float(*v)),
            PrimExpr::Var(v) => {
                let known = self.vars.iter().rev().find(|s| s.name == v.name);
                if known.is_some_and(|s| s.dtype == v.dtype) {
                    name(&v.name)
                } else {
                    format!("({}: {})", name(&v.name), v.dtype)
                }
            }
            PrimExpr::Load {
                buffer,
                dtype,
                indices,
            } => {
                let load = format!("{}[{}]", name(buffer), self.exprs(indices));
                let known = self.buffers.iter().rev().find(|(b, _)| b == buffer);
                if known.is_some_and(|(_, d)| d == dtype) {
                    load
                } else {
                    format!("({load}: {dtype})")
                }
            }
            PrimExpr::Binary(op, a, b) => match infix_symbol(*op) {
                Some(symbol) => format!("{} {symbol} {}", self.operand(a), self.operand(b)),
                None => format!("{}({}, {})", op.name(), self.expr(a), self.expr(b)),
            },
            PrimExpr::Cmp(cmp, a, b) => {
                format!(
                    "{} {} {}",
                    self.operand(a),
                    cmp_symbol(*cmp),
                    self.operand(b)
                )
            }
            PrimExpr::Not(a) => format!("not({})", self.expr(a)),
            PrimExpr::Cast(d, a) => format!("cast({d}, {})", self.expr(a)),
            PrimExpr::Select(c, a, b) => {
                format!(
                    "select({}, {}, {})",
                    self.expr(c),
                    self.expr(a),
                    self.expr(b)
                )
            }
            PrimExpr::Call(intrinsic, args) => {
                format!("{}({})", intrinsic.name(), self.exprs(args))
            }
        }
    }

    /// An operand of an infix operator, parenthesized when it is itself infix.
    fn operand(&self, e: &PrimExpr) -> String {
        let infix = match e {
            PrimExpr::Binary(op, ..) => infix_symbol(*op).is_some(),
            PrimExpr::Cmp(..) => true,
            _ => false,
        };
        if infix {
            format!("({})", self.expr(e))
        } else {
            self.expr(e)
        }
    }
}
