//! `emit_te`: a tensor-expression computation lowered to a primitive function and
//! emitted as a `call_tir`.

use super::{BlockBuilder, BuildError};
use crate::ir::{Call, Callee, Expr, Var};
use crate::legalize::{OpPattern, OP_ATTR, OP_PATTERN_ATTR};
use crate::te::{self, Tensor};
use crate::{AttrValue, StructInfo, SymExpr, SymVar};
use std::collections::BTreeSet;

/// What an `emit_te` computation returns: one tensor (the call yields a tensor) or a
/// list of tensors (the call yields a tuple).
pub trait TeOutputs {
    /// The output tensors, in order.
    fn into_tensors(self) -> Vec<Tensor>;
    /// The struct info of the call's result given its outputs' struct infos.
    fn result_sinfo(fields: Vec<StructInfo>) -> StructInfo;
}

impl TeOutputs for Tensor {
    fn into_tensors(self) -> Vec<Tensor> {
        vec![self]
    }

    fn result_sinfo(mut fields: Vec<StructInfo>) -> StructInfo {
        fields.pop().unwrap_or(StructInfo::Tuple(Vec::new()))
    }
}

impl TeOutputs for Vec<Tensor> {
    fn into_tensors(self) -> Vec<Tensor> {
        self
    }

    fn result_sinfo(fields: Vec<StructInfo>) -> StructInfo {
        StructInfo::Tuple(fields)
    }
}

impl BlockBuilder {
    /// Makes one TE placeholder per argument (from its tensor struct info), runs
    /// `compute` on them, lowers the result to a primitive function (added under a name
    /// derived from `name_hint`, shared if identical) and emits a `call_tir` of it whose
    /// struct info is the outputs'.
    pub fn emit_te<O: TeOutputs>(
        &mut self,
        name_hint: &str,
        args: &[Expr],
        compute: impl FnOnce(&[Tensor]) -> O,
    ) -> Result<Var, BuildError> {
        self.emit_te_with_dims(name_hint, args, &[], compute)
    }

    /// Like [`emit_te`](Self::emit_te) for a computation with an op identity: the
    /// function records `op` and its `pattern` (as legalized ops do), so fusion and the
    /// dumps can tell what it computes.
    pub fn emit_te_op<O: TeOutputs>(
        &mut self,
        (op, pattern): (&str, OpPattern),
        args: &[Expr],
        compute: impl FnOnce(&[Tensor]) -> O,
    ) -> Result<Var, BuildError> {
        self.emit_te_inner(op, args, &[], Some(pattern), compute)
    }

    /// Like [`emit_te`](Self::emit_te) for a computation that also uses symbolic dims
    /// that no argument's shape mentions (a position offset `m`, say): the kernel
    /// receives them in its dims array (as TVM's `tir_vars`), so they must be bound in
    /// the calling function.
    pub fn emit_te_with_dims<O: TeOutputs>(
        &mut self,
        name_hint: &str,
        args: &[Expr],
        extra_dims: &[SymVar],
        compute: impl FnOnce(&[Tensor]) -> O,
    ) -> Result<Var, BuildError> {
        self.emit_te_inner(name_hint, args, extra_dims, None, compute)
    }

    /// `emit_te_with_dims`, recording `name_hint` as the op of pattern `op_pattern` if
    /// given.
    fn emit_te_inner<O: TeOutputs>(
        &mut self,
        name_hint: &str,
        args: &[Expr],
        extra_dims: &[SymVar],
        op_pattern: Option<OpPattern>,
        compute: impl FnOnce(&[Tensor]) -> O,
    ) -> Result<Var, BuildError> {
        let args = args
            .iter()
            .map(|arg| match arg {
                Expr::Call(_) => self.emit(arg.clone()).map(Expr::Var),
                leaf => Ok(leaf.clone()),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let placeholders = placeholders(name_hint, &args)?;
        let outputs = compute(&placeholders).into_tensors();
        let mut func = lower(name_hint, placeholders, extra_dims, &outputs)?;
        if let Some(pattern) = op_pattern {
            let attr = |s: &str| AttrValue::Str(s.to_string());
            func.attrs.insert(OP_ATTR.to_string(), attr(name_hint));
            func.attrs
                .insert(OP_PATTERN_ATTR.to_string(), attr(pattern.name()));
        }
        let fields = outputs
            .iter()
            .map(|t| StructInfo::tensor(t.shape().to_vec(), t.dtype()))
            .collect();
        let callee = self.add_prim_func(name_hint, func);
        let call = Call {
            callee: Callee::Tir(callee),
            args,
            attrs: Default::default(),
            sinfo: O::result_sinfo(fields),
        };
        self.emit_named(Expr::Call(Box::new(call)), name_hint)
    }
}

/// One placeholder per argument, named by position (`A`, `B`, ...) so that the same
/// computation on other variables lowers to an identical (shared) primitive function.
fn placeholders(name_hint: &str, args: &[Expr]) -> Result<Vec<Tensor>, BuildError> {
    args.iter()
        .enumerate()
        .map(|(index, arg)| {
            let sinfo = arg.sinfo();
            let (dims, dtype) = sinfo
                .as_tensor()
                .and_then(|t| Some((t.dims()?.to_vec(), t.dtype)))
                .ok_or_else(|| BuildError::TeArgument {
                    name: name_hint.to_string(),
                    index,
                    sinfo: Box::new(sinfo.clone()),
                })?;
            Ok(te::placeholder(&placeholder_name(index), dims, dtype))
        })
        .collect()
}

/// `A`..`Z`, then `arg26`, `arg27`, ...
fn placeholder_name(index: usize) -> String {
    match u8::try_from(index) {
        Ok(i) if i < 26 => char::from(b'A' + i).to_string(),
        _ => format!("arg{index}"),
    }
}

/// Lowers `outputs` from `inputs`; each extra dim not in an input's or output's shape
/// rides on a shape-only placeholder that is dropped from the parameters afterwards, so
/// it stays in the function's dims.
fn lower(
    name_hint: &str,
    mut inputs: Vec<Tensor>,
    extra_dims: &[SymVar],
    outputs: &[Tensor],
) -> Result<crate::tir::PrimFunc, BuildError> {
    let shown: BTreeSet<SymVar> = inputs
        .iter()
        .chain(outputs)
        .flat_map(|t| t.shape().iter().flat_map(SymExpr::vars))
        .collect();
    let carriers: Vec<String> = extra_dims
        .iter()
        .filter(|d| !shown.contains(*d))
        .map(|dim| {
            let name = format!("__dim_{}", dim.name());
            inputs.push(te::placeholder(&name, vec![dim.expr()], crate::DType::I8));
            name
        })
        .collect();
    let mut func = te::lower(name_hint, &inputs, outputs).map_err(|e| BuildError::TeLower {
        name: name_hint.to_string(),
        source: Box::new(e),
    })?;
    func.params.retain(|p| !carriers.contains(&p.name));
    Ok(func)
}
