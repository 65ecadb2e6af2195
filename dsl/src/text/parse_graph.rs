//! Parsing graph functions (the inverse of `print_graph`).

use super::lexer::TokenKind;
use super::parser::Parser;
use super::ParseError;
use crate::attrs::Attrs;
use crate::ir::{Binding, BindingBlock, BindingValue, Call, Callee, Constant, Expr, PrimValue};
use crate::{Function, StructInfo, Var};

impl Parser<'_> {
    /// `[export] graph @name(params) [-> sinfo] [attrs(..)] [where dims] { body }`.
    pub(super) fn graph_function(
        &mut self,
        exported: bool,
    ) -> Result<(String, Function), ParseError> {
        self.expect_keyword("graph")?;
        self.expect("@")?;
        let name = self.name("a function name")?;
        self.function = Some(name.clone());
        self.vars.clear();
        let params_at = self.position();
        let body_at = self.graph_dims()?;
        self.seek(params_at);
        let params = self.list("(", ")", |p| p.var_decl(false))?;
        for param in &params {
            self.vars.insert(param.name.clone(), param.clone());
        }
        let declared = if self.eat("->") {
            Some((self.offset(), self.sinfo()?))
        } else {
            None
        };
        let attrs = if self.eat_keyword("attrs") {
            self.attr_list()?
        } else {
            Attrs::new()
        };
        if !self.at_keyword("where") && !self.at("{") {
            return Err(self.expected("`where` or `{`"));
        }
        self.seek(body_at);
        let (blocks, ret) = self.graph_body()?;
        let function = Function {
            params,
            blocks,
            ret,
            exported,
            attrs,
        };
        match declared {
            Some((at, sinfo)) if sinfo != function.ret_sinfo() => {
                let message = format!(
                    "the declared result `{sinfo}` differs from the returned value's `{}`",
                    function.ret_sinfo()
                );
                Err(self.error_at(at, message))
            }
            _ => Ok((name, function)),
        }
    }

    /// Reads the `where` clause ahead of the parameters (which use its dims) and returns
    /// the position of the body.
    fn graph_dims(&mut self) -> Result<usize, ParseError> {
        if !self.at("(") {
            return Err(self.expected("`(`"));
        }
        self.skip_group()?;
        if self.eat("->") {
            self.name("struct info")?;
            if self.at("(") {
                self.skip_group()?;
            }
        }
        if self.eat_keyword("attrs") {
            self.skip_group()?;
        }
        if self.eat_keyword("where") {
            self.dim_decls()?;
        }
        Ok(self.position())
    }

    /// `{ (dataflow { .. } | block { .. } | binding)* return expr }`.
    fn graph_body(&mut self) -> Result<(Vec<BindingBlock>, Expr), ParseError> {
        self.expect("{")?;
        let mut blocks = Vec::new();
        while !self.eat_keyword("return") {
            let braced = ["dataflow", "block"]
                .into_iter()
                .find(|word| self.at_keyword(word) && self.at_punct(1, "{"));
            let block = match braced {
                Some(word) => self.braced_block(word == "dataflow")?,
                None => self.bare_block()?,
            };
            blocks.push(block);
        }
        let ret = self.expr(None)?;
        self.expect("}")?;
        Ok((blocks, ret))
    }

    fn braced_block(&mut self, dataflow: bool) -> Result<BindingBlock, ParseError> {
        self.advance();
        self.expect("{")?;
        let mut bindings = Vec::new();
        while !self.eat("}") {
            bindings.push(self.binding(dataflow)?);
        }
        Ok(BindingBlock { dataflow, bindings })
    }

    /// Bindings up to the next `dataflow {`, `block {` or `return`.
    fn bare_block(&mut self) -> Result<BindingBlock, ParseError> {
        let mut bindings = Vec::new();
        loop {
            let at_block = ["dataflow", "block"]
                .iter()
                .any(|word| self.at_keyword(word) && self.at_punct(1, "{"));
            if at_block || self.at_keyword("return") {
                break;
            }
            if !self.at_name(0) {
                return Err(self.expected("a binding, `dataflow {`, `block {` or `return`"));
            }
            bindings.push(self.binding(false)?);
        }
        Ok(BindingBlock {
            dataflow: false,
            bindings,
        })
    }

    /// `[dataflow|output] name: sinfo`; the flag defaults to `default_dataflow`.
    fn var_decl(&mut self, default_dataflow: bool) -> Result<Var, ParseError> {
        let modifier = ["dataflow", "output"]
            .into_iter()
            .find(|word| self.at_keyword(word) && self.at_name(1));
        let dataflow = match modifier {
            Some(word) => {
                self.advance();
                word == "dataflow"
            }
            None => default_dataflow,
        };
        let name = self.name("a variable name")?;
        self.expect(":")?;
        let sinfo = self.sinfo()?;
        Ok(Var {
            name,
            sinfo,
            dataflow,
        })
    }

    /// `decl = expr` or `decl = match_cast(expr, sinfo)`.
    fn binding(&mut self, dataflow_block: bool) -> Result<Binding, ParseError> {
        let var = self.var_decl(dataflow_block)?;
        self.expect("=")?;
        let value = if self.at_keyword("match_cast") && self.at_punct(1, "(") {
            self.advance();
            self.expect("(")?;
            let e = self.expr(None)?;
            self.expect(",")?;
            let sinfo = self.sinfo()?;
            self.expect(")")?;
            BindingValue::MatchCast(e, sinfo)
        } else {
            BindingValue::Expr(self.expr(Some(&var.sinfo))?)
        };
        self.vars.insert(var.name.clone(), var.clone());
        Ok(Binding { var, value })
    }

    /// An expression; an op call without `-> sinfo` takes `implied` (only allowed when
    /// the call is the whole expression).
    fn expr(&mut self, implied: Option<&StructInfo>) -> Result<Expr, ParseError> {
        let (mut e, used_implied) = self.primary(implied)?;
        while self.at("[") {
            if used_implied {
                return Err(self.error("a call inside an expression needs `-> struct info`".into()));
            }
            self.advance();
            let index = self.count("a tuple index")?;
            self.expect("]")?;
            e = Expr::TupleGetItem(Box::new(e), index);
        }
        Ok(e)
    }

    fn primary(&mut self, implied: Option<&StructInfo>) -> Result<(Expr, bool), ParseError> {
        let (name, quoted) = match self.kind(0) {
            TokenKind::Str(_) => return Ok((Expr::Str(self.string("a string")?), false)),
            TokenKind::Punct("(") => return Ok((self.paren_expr()?, false)),
            TokenKind::Ident { text, quoted } => (text.clone(), *quoted),
            _ => return Err(self.expected("an expression")),
        };
        if !self.at_punct(1, "(") {
            let var = self.vars.get(&name).cloned();
            let var = var.ok_or_else(|| self.error(format!("unknown variable `{name}`")))?;
            self.advance();
            return Ok((Expr::Var(var), false));
        }
        let special = match name.as_str() {
            _ if quoted => None,
            "const" => Some(self.constant()?),
            "call_tir" | "call_packed" => Some(self.extern_call()?),
            "shape" => {
                self.advance();
                Some(Expr::Shape(self.list("(", ")", Parser::sym_expr)?))
            }
            _ if self.at_dtype(0) => Some(self.prim_value()?),
            _ => None,
        };
        match special {
            Some(e) => Ok((e, false)),
            None => self.op_call(implied),
        }
    }

    /// `(x: sinfo)` (a reference with its own struct info) or a tuple.
    fn paren_expr(&mut self) -> Result<Expr, ParseError> {
        let annotated = (self.at_word(1, "dataflow") && self.at_name(2) && self.at_punct(3, ":"))
            || (self.at_name(1) && self.at_punct(2, ":"));
        if !annotated {
            return self.list("(", ")", |p| p.expr(None)).map(Expr::Tuple);
        }
        self.advance();
        let var = self.var_decl(false)?;
        self.expect(")")?;
        Ok(Expr::Var(var))
    }

    /// `const((shape), dtype, [values])`.
    fn constant(&mut self) -> Result<Expr, ParseError> {
        self.advance();
        self.expect("(")?;
        let shape = self.list("(", ")", Parser::int)?;
        self.expect(",")?;
        let dtype = self.dtype()?;
        self.expect(",")?;
        let values = self.list("[", "]", Parser::number)?;
        self.eat(",");
        self.expect(")")?;
        Ok(Expr::Constant(Constant {
            dtype,
            shape,
            values,
        }))
    }

    /// `dtype(float)` or `dtype(symbolic int)`.
    fn prim_value(&mut self) -> Result<Expr, ParseError> {
        let dtype = self.dtype()?;
        self.expect("(")?;
        let value = if self.at_float() {
            PrimValue::Float(self.number()?, dtype)
        } else {
            PrimValue::Int(self.sym_expr()?, dtype)
        };
        self.expect(")")?;
        Ok(Expr::Prim(value))
    }

    /// `op(args, key=value) [-> sinfo]`.
    fn op_call(&mut self, implied: Option<&StructInfo>) -> Result<(Expr, bool), ParseError> {
        let op = self.name("an op name")?;
        let (mut args, mut attrs) = (Vec::new(), Attrs::new());
        self.list("(", ")", |p| {
            if p.at_attr() {
                p.attr(&mut attrs)
            } else {
                p.expr(None).map(|e| args.push(e))
            }
        })?;
        let (sinfo, used_implied) = match (self.eat("->"), implied) {
            (true, _) => (self.sinfo()?, false),
            (false, Some(sinfo)) => (sinfo.clone(), true),
            (false, None) => {
                let message = format!("`-> struct info` after the call of `{op}`");
                return Err(self.expected(&message));
            }
        };
        let call = Call {
            callee: Callee::Op(op),
            args,
            attrs,
            sinfo,
        };
        Ok((Expr::Call(Box::new(call)), used_implied))
    }

    /// `call_tir(@f, [args], sinfo, key=value)` or `call_packed("f", [args], sinfo, ...)`.
    fn extern_call(&mut self) -> Result<Expr, ParseError> {
        let tir = self.at_keyword("call_tir");
        self.advance();
        self.expect("(")?;
        let callee = if tir {
            self.expect("@")?;
            Callee::Tir(self.name("a primitive function name")?)
        } else {
            Callee::Packed(self.string("a builtin name string")?)
        };
        self.expect(",")?;
        let args = self.list("[", "]", |p| p.expr(None))?;
        self.expect(",")?;
        let sinfo = self.sinfo()?;
        let mut attrs = Attrs::new();
        while !self.eat(")") {
            self.expect(",")?;
            if !self.at(")") {
                self.attr(&mut attrs)?;
            }
        }
        let call = Call {
            callee,
            args,
            attrs,
            sinfo,
        };
        Ok(Expr::Call(Box::new(call)))
    }
}
