//! Substituting symbolic dims throughout graph IR: `n := 32` in every struct info, shape
//! value and scalar of a function (e.g. to specialize a function to a static size).

use super::{Binding, BindingBlock, BindingValue, Call, Expr, Function, PrimValue, Var};
use crate::struct_info::{StructInfo, TensorInfo, TensorShape};
use crate::{SymExpr, SymVar};

/// Which dims to replace: `Some(expr)` for a dim to substitute, `None` to keep it.
pub type DimMap<'a> = &'a dyn Fn(&SymVar) -> Option<SymExpr>;

impl StructInfo {
    /// This struct info with the dims `map` names substituted.
    pub fn subst_dims(&self, map: DimMap<'_>) -> StructInfo {
        let dims = |dims: &[SymExpr]| dims.iter().map(|d| d.subst(map)).collect::<Vec<_>>();
        match self {
            StructInfo::Tensor(TensorInfo {
                shape: TensorShape::Known(shape),
                dtype,
            }) => StructInfo::tensor(dims(shape), *dtype),
            StructInfo::Tuple(items) => {
                StructInfo::Tuple(items.iter().map(|s| s.subst_dims(map)).collect())
            }
            StructInfo::Shape(Some(shape)) => StructInfo::Shape(Some(dims(shape))),
            other => other.clone(),
        }
    }
}

impl Var {
    /// This variable with its struct info's dims substituted.
    pub fn subst_dims(&self, map: DimMap<'_>) -> Var {
        Var {
            sinfo: self.sinfo.subst_dims(map),
            ..self.clone()
        }
    }
}

impl Expr {
    /// This expression with the dims `map` names substituted everywhere in it.
    pub fn subst_dims(&self, map: DimMap<'_>) -> Expr {
        match self {
            Expr::Var(var) => Expr::Var(var.subst_dims(map)),
            Expr::Call(call) => Expr::Call(Box::new(Call {
                args: call.args.iter().map(|a| a.subst_dims(map)).collect(),
                sinfo: call.sinfo.subst_dims(map),
                ..(**call).clone()
            })),
            Expr::Tuple(items) => Expr::Tuple(items.iter().map(|e| e.subst_dims(map)).collect()),
            Expr::TupleGetItem(tuple, index) => {
                Expr::TupleGetItem(Box::new(tuple.subst_dims(map)), *index)
            }
            Expr::Shape(dims) => Expr::Shape(dims.iter().map(|d| d.subst(map)).collect()),
            Expr::Prim(PrimValue::Int(value, dtype)) => {
                Expr::Prim(PrimValue::Int(value.subst(map), *dtype))
            }
            other => other.clone(),
        }
    }
}

impl Function {
    /// This function with the dims `map` names substituted in its parameters, bindings
    /// and result.
    pub fn subst_dims(&self, map: DimMap<'_>) -> Function {
        let binding = |b: &Binding| Binding {
            var: b.var.subst_dims(map),
            value: match &b.value {
                BindingValue::Expr(e) => BindingValue::Expr(e.subst_dims(map)),
                BindingValue::MatchCast(e, sinfo) => {
                    BindingValue::MatchCast(e.subst_dims(map), sinfo.subst_dims(map))
                }
            },
        };
        Function {
            params: self.params.iter().map(|p| p.subst_dims(map)).collect(),
            blocks: self
                .blocks
                .iter()
                .map(|block| BindingBlock {
                    dataflow: block.dataflow,
                    bindings: block.bindings.iter().map(binding).collect(),
                })
                .collect(),
            ret: self.ret.subst_dims(map),
            ..self.clone()
        }
    }
}
