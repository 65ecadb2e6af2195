//! The [`BlockBuilder`]: builds an [`IRModule`] incrementally, one function at a time.
//!
//! A function is begun with its parameters, filled with bindings (each emitted expression
//! is normalized: nested calls are bound first and op struct info is inferred), optionally
//! grouped into dataflow blocks, and ended with its result. Emitted variables get fresh,
//! readable names (`lv`, `lv1`, ... for dataflow variables, `gv`, `gv1`, ... for others,
//! or a caller's hint). Primitive functions are added with unique names, identical ones
//! are shared.

mod error;
mod frame;
mod names;
mod te;
#[cfg(test)]
mod tests;

pub use error::BuildError;
pub use names::NameSupply;
pub use te::TeOutputs;

use crate::ir::{BindingValue, Expr, Function, IRModule, Var};
use crate::struct_info::StructInfo;
use crate::tir::PrimFunc;
use frame::FunctionFrame;

/// Builds an [`IRModule`] function by function.
#[derive(Debug, Default)]
pub struct BlockBuilder {
    module: IRModule,
    global_names: NameSupply,
    frame: Option<FunctionFrame>,
}

impl BlockBuilder {
    /// A builder of an empty module.
    pub fn new() -> Self {
        BlockBuilder::default()
    }

    /// A builder that adds to `module`.
    pub fn with_module(module: IRModule) -> Self {
        let global_names = NameSupply::avoiding(
            module
                .functions
                .keys()
                .chain(module.prim_funcs.keys())
                .map(String::as_str),
        );
        BlockBuilder {
            module,
            global_names,
            frame: None,
        }
    }

    /// The module built so far (without the open function).
    pub fn module(&self) -> &IRModule {
        &self.module
    }

    /// Adds a graph function under a fresh name derived from `name`; returns the name.
    pub fn add_func(&mut self, name: &str, function: Function) -> String {
        let name = self.global_names.fresh(name);
        self.module.functions.insert(name.clone(), function);
        name
    }

    /// Adds a primitive function under a fresh name derived from `name_hint`, or returns
    /// the name of an identical one already in the module.
    pub fn add_prim_func(&mut self, name_hint: &str, func: PrimFunc) -> String {
        if let Some((name, _)) = self.module.prim_funcs.iter().find(|(_, f)| **f == func) {
            return name.clone();
        }
        let name = self.global_names.fresh(name_hint);
        self.module.prim_funcs.insert(name.clone(), func);
        name
    }

    /// Begins function `name` with `params` (whose struct info binds its symbolic dims).
    pub fn begin_function(
        &mut self,
        name: &str,
        params: Vec<Var>,
        exported: bool,
    ) -> Result<(), BuildError> {
        if let Some(open) = &self.frame {
            return Err(BuildError::FunctionAlreadyOpen {
                open: open.name.clone(),
                requested: name.to_string(),
            });
        }
        if self.global_names.contains(name) {
            return Err(BuildError::DuplicateFunction {
                name: name.to_string(),
            });
        }
        let frame = FunctionFrame::new(name, params, exported)?;
        self.global_names.reserve(name);
        self.frame = Some(frame);
        Ok(())
    }

    /// Ends the open function with result `ret` and adds it to the module; returns its name.
    pub fn end_function(&mut self, ret: Expr) -> Result<String, BuildError> {
        let frame = self.frame_mut("end a function")?;
        let ret = frame.close(&ret)?;
        let frame = self.frame.take().ok_or(BuildError::NoFunction {
            action: "end a function",
        })?;
        let name = frame.name.clone();
        self.module
            .functions
            .insert(name.clone(), frame.into_function(ret));
        Ok(name)
    }

    /// The attributes of finished function `name`, to annotate it (e.g. `num_input`).
    pub fn function_attrs_mut(&mut self, name: &str) -> Option<&mut crate::Attrs> {
        self.module.functions.get_mut(name).map(|f| &mut f.attrs)
    }

    /// Builds a whole function: begins it, runs `body` (which returns the result), ends it.
    pub fn function<E: From<BuildError>>(
        &mut self,
        name: &str,
        params: Vec<Var>,
        exported: bool,
        body: impl FnOnce(&mut Self) -> Result<Expr, E>,
    ) -> Result<String, E> {
        self.begin_function(name, params, exported)?;
        let ret = body(self)?;
        Ok(self.end_function(ret)?)
    }

    /// Opens a dataflow block in the open function.
    pub fn begin_dataflow(&mut self) -> Result<(), BuildError> {
        self.frame_mut("begin a dataflow block")?.begin_dataflow()
    }

    /// Closes the open dataflow block; later bindings go into a plain block.
    pub fn end_dataflow(&mut self) -> Result<(), BuildError> {
        self.frame_mut("end a dataflow block")?.end_dataflow()
    }

    /// Runs `body` inside a new dataflow block.
    pub fn dataflow<T, E: From<BuildError>>(
        &mut self,
        body: impl FnOnce(&mut Self) -> Result<T, E>,
    ) -> Result<T, E> {
        self.begin_dataflow()?;
        let value = body(self)?;
        self.end_dataflow()?;
        Ok(value)
    }

    /// Whether a dataflow block is open.
    pub fn in_dataflow(&self) -> bool {
        self.frame.as_ref().is_some_and(FunctionFrame::in_dataflow)
    }

    /// Binds `expr` (normalized) to a fresh variable: a dataflow variable inside a
    /// dataflow block, a plain one outside.
    pub fn emit(&mut self, expr: Expr) -> Result<Var, BuildError> {
        self.emit_value(BindingValue::Expr(expr), None, false)
    }

    /// Like [`emit`](Self::emit), naming the variable after `name_hint`.
    pub fn emit_named(&mut self, expr: Expr, name_hint: &str) -> Result<Var, BuildError> {
        self.emit_value(BindingValue::Expr(expr), Some(name_hint), false)
    }

    /// Binds `expr` inside the open dataflow block to a non-dataflow variable (one that
    /// is visible after the block).
    pub fn emit_output(&mut self, expr: Expr) -> Result<Var, BuildError> {
        self.emit_value(BindingValue::Expr(expr), None, true)
    }

    /// Like [`emit_output`](Self::emit_output), naming the variable after `name_hint`.
    pub fn emit_output_named(&mut self, expr: Expr, name_hint: &str) -> Result<Var, BuildError> {
        self.emit_value(BindingValue::Expr(expr), Some(name_hint), true)
    }

    /// Binds `match_cast(expr, sinfo)`: the variable has struct info `sinfo`, and any
    /// symbolic dim it mentions for the first time is bound from the value.
    pub fn emit_match_cast(&mut self, expr: Expr, sinfo: StructInfo) -> Result<Var, BuildError> {
        self.emit_value(BindingValue::MatchCast(expr, sinfo), None, false)
    }

    fn emit_value(
        &mut self,
        value: BindingValue,
        hint: Option<&str>,
        output: bool,
    ) -> Result<Var, BuildError> {
        let frame = self.frame_mut("emit a binding")?;
        if output && !frame.in_dataflow() {
            return Err(frame.dataflow_not_open("emit a dataflow output"));
        }
        let dataflow = frame.in_dataflow() && !output;
        frame.bind(value, hint, dataflow)
    }

    /// Returns the module; fails if a function is still open.
    pub fn finish(self) -> Result<IRModule, BuildError> {
        match self.frame {
            Some(frame) => Err(BuildError::FunctionStillOpen {
                function: frame.name,
            }),
            None => Ok(self.module),
        }
    }

    fn frame_mut(&mut self, action: &'static str) -> Result<&mut FunctionFrame, BuildError> {
        self.frame.as_mut().ok_or(BuildError::NoFunction { action })
    }
}
