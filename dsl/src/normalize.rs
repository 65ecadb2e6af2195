//! A-normal form and struct-info re-inference.
//!
//! After normalization every call argument is a leaf (a variable, a constant, a shape, a
//! scalar, or a tuple/projection of leaves): nested calls are bound to fresh variables in
//! the block where they occur (dataflow variables inside dataflow blocks). Op calls get
//! their struct info re-inferred, and every variable reference carries the struct info of
//! its (re-normalized) definition, so struct info flows forward by name. Normalizing a
//! normalized function changes nothing.

use crate::builder::NameSupply;
use crate::ir::{Binding, BindingBlock, BindingValue, Call, Callee, Expr, Function, IRModule, Var};
use crate::op::InferError;
use crate::struct_info::StructInfo;
use std::collections::HashMap;

#[cfg(test)]
mod tests;

/// Why a function could not be normalized.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NormalizeError {
    /// The struct info of an op call could not be inferred.
    #[error("cannot infer the struct info of op `{op}` (in the binding of `{binding}`): {source}")]
    Infer {
        /// The op.
        op: String,
        /// The variable of the binding the call is in (`return` for the result).
        binding: String,
        /// What inference reported.
        source: Box<InferError>,
    },
    /// An error inside a named function of a module.
    #[error("in function `{function}`: {source}")]
    InFunction {
        /// The function.
        function: String,
        /// The error.
        source: Box<NormalizeError>,
    },
}

/// Normalizes every graph function of a module (primitive functions are kept).
pub fn normalize_module(module: &IRModule) -> Result<IRModule, NormalizeError> {
    let mut functions = module.functions.clone();
    for (name, function) in functions.iter_mut() {
        *function = normalize_function(function).map_err(|e| NormalizeError::InFunction {
            function: name.clone(),
            source: Box::new(e),
        })?;
    }
    Ok(IRModule {
        functions,
        prim_funcs: module.prim_funcs.clone(),
    })
}

/// Puts a function into A-normal form and re-infers the struct info of its op calls.
pub fn normalize_function(function: &Function) -> Result<Function, NormalizeError> {
    let names = function
        .params
        .iter()
        .chain(function.bindings().map(|b| &b.var))
        .map(|v| v.name.as_str());
    let mut normalizer = Normalizer::new(NameSupply::avoiding(names));
    for param in &function.params {
        normalizer.define(param);
    }
    let mut blocks = Vec::with_capacity(function.blocks.len());
    for block in &function.blocks {
        let mut bindings = Vec::with_capacity(block.bindings.len());
        for binding in &block.bindings {
            let binding = normalizer.binding(binding, block.dataflow, &mut bindings)?;
            bindings.push(binding);
        }
        blocks.push(BindingBlock {
            dataflow: block.dataflow,
            bindings,
        });
    }
    let mut tail = Vec::new();
    let scope = Scope {
        binding: "return",
        dataflow: false,
    };
    let ret = normalizer.leaf(&function.ret, scope, &mut tail)?;
    append_plain(&mut blocks, tail);
    Ok(Function {
        params: function.params.clone(),
        blocks,
        ret,
        exported: function.exported,
        attrs: function.attrs.clone(),
    })
}

/// Appends `bindings` to the last block when it is a plain one, else as a new plain block.
fn append_plain(blocks: &mut Vec<BindingBlock>, bindings: Vec<Binding>) {
    if bindings.is_empty() {
        return;
    }
    match blocks.last_mut() {
        Some(last) if !last.dataflow => last.bindings.extend(bindings),
        _ => blocks.push(BindingBlock {
            dataflow: false,
            bindings,
        }),
    }
}

/// The default name hint of a variable introduced by normalization.
pub(crate) fn default_hint(dataflow: bool) -> &'static str {
    if dataflow {
        "lv"
    } else {
        "gv"
    }
}

/// Normalization state of one function: the struct info of every variable defined so
/// far (by name) and the names in use.
#[derive(Clone, Debug)]
pub(crate) struct Normalizer {
    sinfo: HashMap<String, StructInfo>,
    names: NameSupply,
}

impl Normalizer {
    /// A normalizer whose fresh names avoid those of `names`.
    pub(crate) fn new(names: NameSupply) -> Self {
        Normalizer {
            sinfo: HashMap::new(),
            names,
        }
    }

    /// The supply of fresh names.
    pub(crate) fn names(&mut self) -> &mut NameSupply {
        &mut self.names
    }

    /// Records `var`'s struct info so later references to it carry it.
    pub(crate) fn define(&mut self, var: &Var) {
        self.sinfo.insert(var.name.clone(), var.sinfo.clone());
    }

    /// Makes the variable named `name` invisible (its block ended).
    pub(crate) fn forget(&mut self, name: &str) {
        self.sinfo.remove(name);
    }

    /// The struct info recorded for the variable named `name`.
    pub(crate) fn lookup(&self, name: &str) -> Option<&StructInfo> {
        self.sinfo.get(name)
    }

    /// `var` with the struct info of its definition (unchanged when it is not defined).
    fn refresh_var(&self, var: &Var) -> Var {
        match self.sinfo.get(&var.name) {
            Some(sinfo) if *sinfo != var.sinfo => Var {
                sinfo: sinfo.clone(),
                ..var.clone()
            },
            _ => var.clone(),
        }
    }

    /// Normalizes one binding; nested calls are bound into `out` first. The bound
    /// variable takes the struct info of its normalized value (or of the cast).
    fn binding(
        &mut self,
        binding: &Binding,
        dataflow: bool,
        out: &mut Vec<Binding>,
    ) -> Result<Binding, NormalizeError> {
        let scope = Scope {
            binding: &binding.var.name,
            dataflow,
        };
        let (value, sinfo) = self.binding_value(&binding.value, scope, out)?;
        let var = Var {
            sinfo,
            ..binding.var.clone()
        };
        self.define(&var);
        Ok(Binding { var, value })
    }

    /// Normalizes the right side of a binding (nested calls are bound into `out`) and
    /// returns it with the struct info its variable gets.
    pub(crate) fn binding_value(
        &mut self,
        value: &BindingValue,
        scope: Scope<'_>,
        out: &mut Vec<Binding>,
    ) -> Result<(BindingValue, StructInfo), NormalizeError> {
        Ok(match value {
            BindingValue::Expr(expr) => {
                let value = self.value(expr, scope, out)?;
                let sinfo = value.sinfo();
                (BindingValue::Expr(value), sinfo)
            }
            BindingValue::MatchCast(expr, target) => {
                let value = self.leaf(expr, scope, out)?;
                (
                    BindingValue::MatchCast(value, target.clone()),
                    target.clone(),
                )
            }
        })
    }

    /// Normalizes `expr` into a leaf, binding it to a fresh variable in `out` if needed.
    pub(crate) fn leaf(
        &mut self,
        expr: &Expr,
        scope: Scope<'_>,
        out: &mut Vec<Binding>,
    ) -> Result<Expr, NormalizeError> {
        let value = self.value(expr, scope, out)?;
        if !matches!(value, Expr::Call(_)) {
            return Ok(value);
        }
        let var = Var {
            name: self.names.fresh(default_hint(scope.dataflow)),
            sinfo: value.sinfo(),
            dataflow: scope.dataflow,
        };
        self.define(&var);
        out.push(Binding {
            var: var.clone(),
            value: BindingValue::Expr(value),
        });
        Ok(Expr::Var(var))
    }

    /// Normalizes `expr` into a binding value (a call of leaves, or a leaf); nested
    /// calls are bound into `out`.
    fn value(
        &mut self,
        expr: &Expr,
        scope: Scope<'_>,
        out: &mut Vec<Binding>,
    ) -> Result<Expr, NormalizeError> {
        Ok(match expr {
            Expr::Var(v) => Expr::Var(self.refresh_var(v)),
            Expr::Call(call) => {
                let args = call
                    .args
                    .iter()
                    .map(|a| self.leaf(a, scope, out))
                    .collect::<Result<Vec<_>, _>>()?;
                let mut call = Call {
                    callee: call.callee.clone(),
                    args,
                    attrs: call.attrs.clone(),
                    sinfo: call.sinfo.clone(),
                };
                if let Callee::Op(op) = &call.callee {
                    call.sinfo = infer_op(op, &call, scope.binding)?;
                }
                Expr::Call(Box::new(call))
            }
            Expr::Tuple(items) => Expr::Tuple(
                items
                    .iter()
                    .map(|i| self.leaf(i, scope, out))
                    .collect::<Result<_, _>>()?,
            ),
            Expr::TupleGetItem(tuple, index) => {
                Expr::TupleGetItem(Box::new(self.leaf(tuple, scope, out)?), *index)
            }
            Expr::Constant(_) | Expr::Shape(_) | Expr::Prim(_) | Expr::Str(_) => expr.clone(),
        })
    }
}

/// Where normalization is working: the binding being normalized (named in errors) and
/// whether it is in a dataflow block (which decides the kind of fresh variables).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Scope<'a> {
    /// The variable of the binding (or `return` for the result).
    pub(crate) binding: &'a str,
    /// Whether fresh variables are dataflow variables.
    pub(crate) dataflow: bool,
}

/// The struct info of an op call with normalized arguments (the one place inference runs).
pub(crate) fn infer_op(op: &str, call: &Call, binding: &str) -> Result<StructInfo, NormalizeError> {
    crate::op::infer(op, &call.args, &call.attrs).map_err(|source| NormalizeError::Infer {
        op: op.to_string(),
        binding: binding.to_string(),
        source: Box::new(source),
    })
}
