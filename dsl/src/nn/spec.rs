//! `Spec`: the functions a model exports, their inputs (with symbolic shapes), and how
//! each one runs the model.

use super::{Module, NnError, Param};
use crate::attrs::AttrValue;
use crate::ir::{Expr, Var, NUM_INPUT_ATTR};
use crate::{BlockBuilder, IRModule};

/// How an exported function runs the model: given the model, the builder (inside the
/// function's dataflow block) and the inputs, emit ops and return the result.
pub type Forward<M> = Box<dyn Fn(&M, &mut BlockBuilder, &[Expr]) -> Result<Expr, NnError>>;

struct ExportedFunction<M> {
    name: String,
    inputs: Vec<Var>,
    forward: Forward<M>,
}

/// The exported functions of a model of type `M`.
///
/// Each exported function takes its declared inputs followed by every model parameter
/// (named as [`Module::parameters`] names them; the function's `num_input` attribute
/// counts the inputs) and is built in one function scope with one dataflow block.
pub struct Spec<M> {
    functions: Vec<ExportedFunction<M>>,
}

impl<M> Default for Spec<M> {
    fn default() -> Self {
        Spec {
            functions: Vec::new(),
        }
    }
}

impl<M: Module> Spec<M> {
    /// A spec exporting nothing yet.
    pub fn new() -> Self {
        Spec::default()
    }

    /// Adds exported function `name` taking `inputs` (whose struct info may use symbolic
    /// dims such as a bounded `n`), computed by `forward`.
    pub fn function(
        mut self,
        name: &str,
        inputs: Vec<Var>,
        forward: impl Fn(&M, &mut BlockBuilder, &[Expr]) -> Result<Expr, NnError> + 'static,
    ) -> Self {
        self.functions.push(ExportedFunction {
            name: name.to_string(),
            inputs,
            forward: Box::new(forward),
        });
        self
    }

    /// The names of the exported functions, in order.
    pub fn function_names(&self) -> Vec<&str> {
        self.functions.iter().map(|f| f.name.as_str()).collect()
    }

    /// Builds a module holding every exported function of `model`.
    pub fn export(&self, model: &M) -> Result<IRModule, NnError> {
        let mut bb = BlockBuilder::new();
        self.export_into(model, &mut bb)?;
        Ok(bb.finish()?)
    }

    /// Adds every exported function of `model` to `bb`; returns their names. On an
    /// error the failing function is left open.
    pub fn export_into(&self, model: &M, bb: &mut BlockBuilder) -> Result<Vec<String>, NnError> {
        let weights: Vec<Var> = model.parameters().iter().map(Param::var).collect();
        let mut names = Vec::with_capacity(self.functions.len());
        for function in &self.functions {
            let params = function.inputs.iter().chain(&weights).cloned().collect();
            bb.begin_function(&function.name, params, true)?;
            bb.begin_dataflow()?;
            let inputs: Vec<Expr> = function.inputs.iter().map(Expr::from).collect();
            let result = (function.forward)(model, bb, &inputs)?;
            let output = match result {
                Expr::Var(var) if !var.dataflow => var,
                other => bb.emit_output(other)?,
            };
            bb.end_dataflow()?;
            let name = bb.end_function(output.into())?;
            if let Some(attrs) = bb.function_attrs_mut(&name) {
                let inputs = AttrValue::Int(function.inputs.len() as i64);
                attrs.insert(NUM_INPUT_ATTR.to_string(), inputs);
            }
            names.push(name);
        }
        Ok(names)
    }
}
