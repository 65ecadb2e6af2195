//! The state of the function being built: finished blocks, the open block, and the
//! normalizer that knows every visible variable.

use super::error::BuildError;
use crate::builder::NameSupply;
use crate::ir::{Binding, BindingBlock, BindingValue, Expr, Function, Var};
use crate::normalize::{default_hint, Normalizer, Scope};
use crate::struct_info::StructInfo;

/// One function under construction.
#[derive(Debug)]
pub(super) struct FunctionFrame {
    pub(super) name: String,
    params: Vec<Var>,
    exported: bool,
    blocks: Vec<BindingBlock>,
    current: Vec<Binding>,
    in_dataflow: bool,
    normalizer: Normalizer,
}

impl FunctionFrame {
    /// A frame for function `name`, with its parameters visible.
    pub(super) fn new(name: &str, params: Vec<Var>, exported: bool) -> Result<Self, BuildError> {
        let mut names = NameSupply::new();
        if let Some(param) = params.iter().find(|p| !names.reserve(&p.name)) {
            return Err(BuildError::DuplicateParam {
                function: name.to_string(),
                param: param.name.clone(),
            });
        }
        let mut normalizer = Normalizer::new(names);
        params.iter().for_each(|p| normalizer.define(p));
        Ok(FunctionFrame {
            name: name.to_string(),
            params,
            exported,
            blocks: Vec::new(),
            current: Vec::new(),
            in_dataflow: false,
            normalizer,
        })
    }

    /// Whether a dataflow block is open.
    pub(super) fn in_dataflow(&self) -> bool {
        self.in_dataflow
    }

    /// Closes the open plain block and opens a dataflow block.
    pub(super) fn begin_dataflow(&mut self) -> Result<(), BuildError> {
        if self.in_dataflow {
            return Err(BuildError::DataflowAlreadyOpen {
                function: self.name.clone(),
            });
        }
        self.close_block();
        self.in_dataflow = true;
        Ok(())
    }

    /// Closes the open dataflow block; its dataflow variables are no longer visible.
    pub(super) fn end_dataflow(&mut self) -> Result<(), BuildError> {
        if !self.in_dataflow {
            return Err(self.dataflow_not_open("end a dataflow block"));
        }
        for binding in self.current.iter().filter(|b| b.var.dataflow) {
            self.normalizer.forget(&binding.var.name);
        }
        self.close_block();
        self.in_dataflow = false;
        Ok(())
    }

    /// The error for an action that needs an open dataflow block.
    pub(super) fn dataflow_not_open(&self, action: &'static str) -> BuildError {
        BuildError::DataflowNotOpen {
            function: self.name.clone(),
            action,
        }
    }

    fn close_block(&mut self) {
        if !self.current.is_empty() {
            self.blocks.push(BindingBlock {
                dataflow: self.in_dataflow,
                bindings: std::mem::take(&mut self.current),
            });
        }
    }

    /// Normalizes `value` into the open block and binds it to a fresh variable named
    /// after `hint` (or the default `lv`/`gv`); `dataflow` says which kind of variable.
    /// On an error nothing is added.
    pub(super) fn bind(
        &mut self,
        value: BindingValue,
        hint: Option<&str>,
        dataflow: bool,
    ) -> Result<Var, BuildError> {
        self.check_defined(value.expr())?;
        let hint = hint.unwrap_or(default_hint(dataflow));
        let mut nested = Vec::new();
        let (value, sinfo) = match self.normalize(&value, hint, &mut nested) {
            Ok(done) => done,
            Err(e) => {
                nested
                    .iter()
                    .for_each(|b| self.normalizer.forget(&b.var.name));
                return Err(e);
            }
        };
        self.current.extend(nested);
        let var = Var {
            name: self.normalizer.names().fresh(hint),
            sinfo,
            dataflow,
        };
        self.normalizer.define(&var);
        self.current.push(Binding {
            var: var.clone(),
            value,
        });
        Ok(var)
    }

    /// Normalizes a binding's value (nested calls go into `nested`) and checks a
    /// match_cast's target against the value.
    fn normalize(
        &mut self,
        value: &BindingValue,
        hint: &str,
        nested: &mut Vec<Binding>,
    ) -> Result<(BindingValue, StructInfo), BuildError> {
        let scope = Scope {
            binding: hint,
            dataflow: self.in_dataflow,
        };
        let (value, sinfo) = self
            .normalizer
            .binding_value(value, scope, nested)
            .map_err(|source| BuildError::Normalize {
                function: self.name.clone(),
                source: Box::new(source),
            })?;
        if let BindingValue::MatchCast(expr, target) = &value {
            self.check_cast(&expr.sinfo(), target)?;
        }
        Ok((value, sinfo))
    }

    fn check_defined(&self, expr: &Expr) -> Result<(), BuildError> {
        let mut missing = None;
        expr.for_each_var(&mut |v| {
            if missing.is_none() && self.normalizer.lookup(&v.name).is_none() {
                missing = Some(v.name.clone());
            }
        });
        match missing {
            Some(var) => Err(BuildError::UndefinedVar {
                function: self.name.clone(),
                var,
            }),
            None => Ok(()),
        }
    }

    fn check_cast(&self, from: &StructInfo, to: &StructInfo) -> Result<(), BuildError> {
        if castable(from, to) {
            Ok(())
        } else {
            Err(BuildError::IncompatibleCast {
                function: self.name.clone(),
                from: from.clone(),
                to: to.clone(),
            })
        }
    }

    /// Normalizes the result `ret` (nested calls go into a plain block) and closes the
    /// open block; the frame is then ready for [`into_function`](Self::into_function).
    pub(super) fn close(&mut self, ret: &Expr) -> Result<Expr, BuildError> {
        if self.in_dataflow {
            return Err(BuildError::DataflowStillOpen {
                function: self.name.clone(),
            });
        }
        self.check_defined(ret)?;
        let ret = self
            .normalizer
            .leaf(
                ret,
                Scope {
                    binding: "return",
                    dataflow: false,
                },
                &mut self.current,
            )
            .map_err(|source| BuildError::Normalize {
                function: self.name.clone(),
                source: Box::new(source),
            })?;
        self.close_block();
        Ok(ret)
    }

    /// The finished function with result `ret` (from [`close`](Self::close)).
    pub(super) fn into_function(self, ret: Expr) -> Function {
        Function {
            params: self.params,
            blocks: self.blocks,
            ret,
            exported: self.exported,
            attrs: Default::default(),
        }
    }
}

/// Whether a value of `from` may possibly match `to` at run time (same kind, same dtype,
/// same rank where both are known).
fn castable(from: &StructInfo, to: &StructInfo) -> bool {
    match (from, to) {
        (StructInfo::Object, _) | (_, StructInfo::Object) => true,
        (StructInfo::Tensor(a), StructInfo::Tensor(b)) => {
            a.dtype == b.dtype && a.ndim().zip(b.ndim()).is_none_or(|(x, y)| x == y)
        }
        (StructInfo::Tuple(a), StructInfo::Tuple(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| castable(x, y))
        }
        (StructInfo::Shape(a), StructInfo::Shape(b)) => a
            .as_ref()
            .zip(b.as_ref())
            .is_none_or(|(x, y)| x.len() == y.len()),
        (StructInfo::Scalar(a), StructInfo::Scalar(b)) => a == b,
        _ => false,
    }
}
