//! Symbolic dims as VM dim registers: which registers a function has, and symbolic
//! expressions as the VM's [`ShapeExpr`]s.

use super::LowerError;
use oxrelax_dsl::ir::{BindingValue, Function};
use oxrelax_dsl::tir::{BinOp, PrimExpr, PrimFunc};
use oxrelax_dsl::{StructInfo, SymExpr, SymVar};
use oxrelax_runtime::vm::{DimDecl, DimReg, ShapeExpr, ShapeOp};

/// The dims of a function (or kernel), each with a register.
pub(crate) struct DimTable {
    owner: String,
    vars: Vec<SymVar>,
}

impl DimTable {
    /// A graph function's dims: those of its parameters, then those that match_casts
    /// introduce, in order of first appearance.
    pub(crate) fn for_function(name: &str, function: &Function) -> Self {
        let mut table = DimTable {
            owner: name.to_string(),
            vars: Vec::new(),
        };
        for param in &function.params {
            table.add(&param.sinfo);
        }
        for binding in function.bindings() {
            if let BindingValue::MatchCast(_, sinfo) = &binding.value {
                table.add(sinfo);
            }
        }
        table
    }

    /// A kernel's dims: its `dims` list, in order (the order the kernel receives them).
    pub(crate) fn for_kernel(name: &str, func: &PrimFunc) -> Self {
        DimTable {
            owner: name.to_string(),
            vars: func.dims.clone(),
        }
    }

    fn add(&mut self, sinfo: &StructInfo) {
        for var in sinfo.sym_vars() {
            if !self.vars.contains(&var) {
                self.vars.push(var);
            }
        }
    }

    /// The register of the dim named `name`.
    pub(crate) fn reg(&self, name: &str) -> Option<DimReg> {
        self.vars
            .iter()
            .position(|v| v.name() == name)
            .map(|i| i as DimReg)
    }

    /// Declarations of every dim register, in register order.
    pub(crate) fn decls(&self) -> Vec<DimDecl> {
        self.vars
            .iter()
            .map(|v| DimDecl {
                name: v.name().to_string(),
                upper_bound: v.upper(),
            })
            .collect()
    }

    /// `expr` over this table's dim registers.
    pub(crate) fn shape_expr(&self, expr: &SymExpr) -> Result<ShapeExpr, LowerError> {
        self.prim_to_shape(&PrimExpr::from(expr))
            .map_err(|reason| LowerError::Shape {
                function: self.owner.clone(),
                expr: expr.to_string(),
                reason,
            })
    }

    fn prim_to_shape(&self, expr: &PrimExpr) -> Result<ShapeExpr, String> {
        match expr {
            PrimExpr::Int(v, _) => Ok(ShapeExpr::Const(*v)),
            PrimExpr::Var(v) => self
                .reg(&v.name)
                .map(ShapeExpr::Dim)
                .ok_or_else(|| format!("dim `{}` is not bound here", v.name)),
            PrimExpr::Binary(op, a, b) => {
                let op = match op {
                    BinOp::Add => ShapeOp::Add,
                    BinOp::Sub => ShapeOp::Sub,
                    BinOp::Mul => ShapeOp::Mul,
                    BinOp::FloorDiv => ShapeOp::FloorDiv,
                    BinOp::FloorMod => ShapeOp::FloorMod,
                    BinOp::Min => ShapeOp::Min,
                    BinOp::Max => ShapeOp::Max,
                    other => return Err(format!("`{}` is not shape arithmetic", other.name())),
                };
                Ok(ShapeExpr::bin(
                    op,
                    self.prim_to_shape(a)?,
                    self.prim_to_shape(b)?,
                ))
            }
            other => Err(format!("`{other:?}` is not shape arithmetic")),
        }
    }
}
