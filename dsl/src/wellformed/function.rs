//! The checks of one graph function, binding by binding.

use super::error::{Problem, Site};
use crate::ir::{
    BindingBlock, BindingValue, Call, Callee, Expr, Function, IRModule, PrimValue, Var,
};
use crate::normalize::infer_op;
use crate::struct_info::StructInfo;
use std::collections::{BTreeSet, HashMap, HashSet};

/// What is known while walking one function.
pub(super) struct FunctionChecker<'m> {
    module: &'m IRModule,
    /// Variables in scope, by name, with their defining struct info.
    visible: HashMap<&'m str, &'m StructInfo>,
    /// Dataflow variables of blocks that have ended.
    ended_dataflow: HashSet<&'m str>,
    /// Every name defined so far.
    names: HashSet<&'m str>,
    /// Names of the symbolic dims bound so far.
    dims: HashSet<String>,
}

impl<'m> FunctionChecker<'m> {
    /// A checker of functions of `module`.
    pub(super) fn new(module: &'m IRModule) -> Self {
        FunctionChecker {
            module,
            visible: HashMap::new(),
            ended_dataflow: HashSet::new(),
            names: HashSet::new(),
            dims: HashSet::new(),
        }
    }

    /// Checks `function`, returning the first problem.
    pub(super) fn check(mut self, function: &'m Function) -> Result<(), Problem> {
        function
            .params
            .iter()
            .for_each(|p| self.bind_dims(&p.sinfo));
        for param in &function.params {
            let site = Site::Param(param.name.clone());
            self.check_dims(&param.sinfo, &site)?;
            self.define(param, site)?;
        }
        for block in &function.blocks {
            self.check_block(block)?;
        }
        if !function.ret.is_leaf() {
            return Err(Problem::NotNormalized { site: Site::Result });
        }
        self.check_expr(&function.ret, &Site::Result)
    }

    fn check_block(&mut self, block: &'m BindingBlock) -> Result<(), Problem> {
        for binding in &block.bindings {
            let var = &binding.var;
            let site = Site::Binding(var.name.clone());
            if var.dataflow && !block.dataflow {
                return Err(Problem::DataflowVarInPlainBlock {
                    var: var.name.clone(),
                });
            }
            let value = binding.value.expr();
            check_normal_form(&binding.value, &site)?;
            self.check_expr(value, &site)?;
            let value_sinfo = value.sinfo();
            match &binding.value {
                BindingValue::Expr(_) => check_accepts(var, &var.sinfo, &value_sinfo)?,
                BindingValue::MatchCast(_, target) => {
                    check_accepts(var, &var.sinfo, target)?;
                    check_accepts(var, target, &var.sinfo)?;
                    self.bind_dims(target);
                }
            }
            self.check_dims(&var.sinfo, &site)?;
            self.define(var, site)?;
        }
        if block.dataflow {
            for var in block.bindings.iter().map(|b| &b.var).filter(|v| v.dataflow) {
                self.visible.remove(var.name.as_str());
                self.ended_dataflow.insert(&var.name);
            }
        }
        Ok(())
    }

    fn define(&mut self, var: &'m Var, site: Site) -> Result<(), Problem> {
        if !self.names.insert(&var.name) {
            return Err(Problem::DuplicateName {
                site,
                name: var.name.clone(),
            });
        }
        self.visible.insert(&var.name, &var.sinfo);
        Ok(())
    }

    /// Binds the dims that `sinfo` mentions as a whole dim (`n` in `[1, n]`, not in
    /// `[2 * n]`): the ones a run-time shape match can solve for.
    fn bind_dims(&mut self, sinfo: &StructInfo) {
        match sinfo {
            StructInfo::Tensor(t) => self.bind_dim_list(t.dims().unwrap_or(&[])),
            StructInfo::Shape(Some(values)) => self.bind_dim_list(values),
            StructInfo::Tuple(items) => items.iter().for_each(|i| self.bind_dims(i)),
            StructInfo::Shape(None) | StructInfo::Scalar(_) | StructInfo::Object => {}
        }
    }

    fn bind_dim_list(&mut self, dims: &[crate::SymExpr]) {
        let bare = dims.iter().filter_map(|d| d.as_var());
        self.dims.extend(bare.map(|v| v.name().to_string()));
    }

    fn check_dims(&self, sinfo: &StructInfo, site: &Site) -> Result<(), Problem> {
        self.check_dim_names(sinfo.sym_vars().iter().map(|v| v.name()), site)
    }

    fn check_dim_names<'a>(
        &self,
        mut names: impl Iterator<Item = &'a str>,
        site: &Site,
    ) -> Result<(), Problem> {
        match names.find(|name| !self.dims.contains(*name)) {
            Some(dim) => Err(Problem::UnboundDim {
                site: site.clone(),
                dim: dim.to_string(),
            }),
            None => Ok(()),
        }
    }

    /// Checks every part of `expr`: variables, symbolic dims, calls and projections.
    fn check_expr(&self, expr: &Expr, site: &Site) -> Result<(), Problem> {
        match expr {
            Expr::Var(v) => self.check_reference(v, site),
            Expr::Call(call) => {
                call.args
                    .iter()
                    .try_for_each(|a| self.check_expr(a, site))?;
                self.check_dims(&call.sinfo, site)?;
                self.check_call(call, site)
            }
            Expr::Tuple(items) => items.iter().try_for_each(|i| self.check_expr(i, site)),
            Expr::TupleGetItem(tuple, index) => {
                self.check_expr(tuple, site)?;
                match tuple.sinfo() {
                    StructInfo::Tuple(items) if *index < items.len() => Ok(()),
                    sinfo => Err(Problem::BadProjection {
                        site: site.clone(),
                        index: *index,
                        sinfo,
                    }),
                }
            }
            Expr::Shape(values) => self.check_sym_exprs(values, site),
            Expr::Prim(PrimValue::Int(value, _)) => {
                self.check_sym_exprs(std::slice::from_ref(value), site)
            }
            Expr::Prim(PrimValue::Float(..)) | Expr::Constant(_) | Expr::Str(_) => Ok(()),
        }
    }

    fn check_sym_exprs(&self, values: &[crate::SymExpr], site: &Site) -> Result<(), Problem> {
        let vars: BTreeSet<_> = values.iter().flat_map(|v| v.vars()).collect();
        self.check_dim_names(vars.iter().map(|v| v.name()), site)
    }

    fn check_reference(&self, var: &Var, site: &Site) -> Result<(), Problem> {
        let Some(definition) = self.visible.get(var.name.as_str()) else {
            let name = var.name.clone();
            return Err(if self.ended_dataflow.contains(var.name.as_str()) {
                Problem::DataflowVarEscapes {
                    site: site.clone(),
                    var: name,
                }
            } else {
                Problem::UndefinedVar {
                    site: site.clone(),
                    var: name,
                }
            });
        };
        if !var.sinfo.accepts(definition) {
            return Err(Problem::StaleReference {
                site: site.clone(),
                var: var.name.clone(),
                reference: var.sinfo.clone(),
                definition: (*definition).clone(),
            });
        }
        Ok(())
    }

    fn check_call(&self, call: &Call, site: &Site) -> Result<(), Problem> {
        match &call.callee {
            Callee::Op(op) => {
                let binding = match site {
                    Site::Binding(name) | Site::Param(name) => name.as_str(),
                    Site::Result => "return",
                };
                let inferred = infer_op(op, call, binding).map_err(|e| Problem::OpInference {
                    site: site.clone(),
                    source: Box::new(e),
                })?;
                if inferred.accepts(&call.sinfo) && call.sinfo.accepts(&inferred) {
                    Ok(())
                } else {
                    Err(Problem::OpStructInfo {
                        site: site.clone(),
                        op: op.clone(),
                        recorded: call.sinfo.clone(),
                        inferred,
                    })
                }
            }
            Callee::Tir(callee) => {
                let Some(func) = self.module.prim_funcs.get(callee) else {
                    return Err(Problem::UnknownPrimFunc {
                        site: site.clone(),
                        callee: callee.clone(),
                    });
                };
                let expected = func.inputs().len();
                if call.args.len() != expected {
                    return Err(Problem::CallTirArity {
                        site: site.clone(),
                        callee: callee.clone(),
                        expected,
                        got: call.args.len(),
                    });
                }
                // A dim that no buffer has as a whole extent (such as a position offset)
                // is passed by name from the caller, which must bind it.
                let free = func.dims.iter().filter(|dim| {
                    !func
                        .params
                        .iter()
                        .any(|b| b.shape.iter().any(|d| d.as_var() == Some(*dim)))
                });
                self.check_dim_names(free.map(|d| d.name()), site)
            }
            Callee::Packed(_) => Ok(()),
        }
    }
}

/// A binding value is in normal form when call arguments and match_cast values are leaves.
fn check_normal_form(value: &BindingValue, site: &Site) -> Result<(), Problem> {
    let normal = match value {
        BindingValue::Expr(Expr::Call(call)) => call.args.iter().all(Expr::is_leaf),
        BindingValue::Expr(expr) | BindingValue::MatchCast(expr, _) => expr.is_leaf(),
    };
    if normal {
        Ok(())
    } else {
        Err(Problem::NotNormalized { site: site.clone() })
    }
}

fn check_accepts(var: &Var, declared: &StructInfo, value: &StructInfo) -> Result<(), Problem> {
    if declared.accepts(value) {
        Ok(())
    } else {
        Err(Problem::StructInfoMismatch {
            var: var.name.clone(),
            declared: declared.clone(),
            value: value.clone(),
        })
    }
}
