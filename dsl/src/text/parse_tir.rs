//! Parsing primitive functions (the inverse of `print_tir`).

use super::lexer::TokenKind;
use super::parser::Parser;
use super::print_tir::{cmp_symbol, infix_symbol};
use super::ParseError;
use crate::attrs::Attrs;
use crate::tir::{
    BinOp, Buffer, BufferRegion, ForKind, Intrinsic, MicrokernelCall, PrimCmp, PrimExpr, PrimFunc,
    Stmt, TVar,
};
use crate::DType;

const CMPS: [PrimCmp; 6] = [
    PrimCmp::Lt,
    PrimCmp::Le,
    PrimCmp::Gt,
    PrimCmp::Ge,
    PrimCmp::Eq,
    PrimCmp::Ne,
];

const FOR_KINDS: [ForKind; 4] = [
    ForKind::Serial,
    ForKind::Parallel,
    ForKind::Vectorized,
    ForKind::Unrolled,
];

impl Parser<'_> {
    /// `prim @name(params) outputs k [dims(..)] [where ..] [attrs(..)] { body }`.
    pub(super) fn prim_func(&mut self) -> Result<(String, PrimFunc), ParseError> {
        self.expect_keyword("prim")?;
        self.expect("@")?;
        let name = self.name("a function name")?;
        self.function = Some(name.clone());
        let params_at = self.position();
        if !self.at("(") {
            return Err(self.expected("`(`"));
        }
        self.skip_group()?;
        self.expect_keyword("outputs")?;
        let num_outputs = self.count("the number of outputs")?;
        let dims = if self.eat_keyword("dims") {
            self.list("(", ")", Parser::dim_decl)?
        } else {
            Vec::new()
        };
        if self.eat_keyword("where") {
            self.dim_decls()?;
        }
        let attrs = if self.eat_keyword("attrs") {
            self.attr_list()?
        } else {
            Attrs::new()
        };
        let body_at = self.position();
        self.seek(params_at);
        let params = self.list("(", ")", |p| {
            let name = p.name("a buffer name")?;
            p.expect(":")?;
            p.buffer_type(name)
        })?;
        self.seek(body_at);
        self.tvars = self.dims.keys().map(|d| TVar::new(d, DType::I64)).collect();
        self.buffers = params.iter().map(|b| (b.name.clone(), b.dtype)).collect();
        let body = self.block()?;
        let func = PrimFunc {
            params,
            num_outputs,
            dims,
            body,
            attrs,
        };
        Ok((name, func))
    }

    /// `Buffer((shape), dtype[, strides=(...)])`.
    fn buffer_type(&mut self, name: String) -> Result<Buffer, ParseError> {
        self.expect_keyword("Buffer")?;
        self.expect("(")?;
        let shape = self.sym_tuple()?;
        self.expect(",")?;
        let dtype = self.dtype()?;
        let strides = if self.eat(",") && self.eat_keyword("strides") {
            self.expect("=")?;
            Some(self.sym_tuple()?)
        } else {
            None
        };
        self.expect(")")?;
        Ok(Buffer {
            name,
            dtype,
            shape,
            strides,
        })
    }

    /// `{ stmt* }`: one statement stands alone, any other number forms a sequence.
    fn block(&mut self) -> Result<Stmt, ParseError> {
        let mut items = self.stmts()?;
        match items.len() {
            1 => Ok(items.remove(0)),
            _ => Ok(Stmt::Seq(items)),
        }
    }

    fn stmts(&mut self) -> Result<Vec<Stmt>, ParseError> {
        self.expect("{")?;
        let mut items = Vec::new();
        while !self.eat("}") {
            items.push(self.stmt()?);
        }
        Ok(items)
    }

    fn stmt(&mut self) -> Result<Stmt, ParseError> {
        if self.eat_keyword("seq") {
            return self.stmts().map(Stmt::Seq);
        }
        if self.eat_keyword("for") {
            return self.for_stmt();
        }
        if self.eat_keyword("let") {
            let var = self.typed_var(None)?;
            self.expect("=")?;
            let value = self.prim_expr()?;
            let body = Box::new(self.scoped_var(var.clone(), Parser::block)?);
            return Ok(Stmt::Let { var, value, body });
        }
        if self.eat_keyword("if") {
            let cond = self.prim_expr()?;
            let then = Box::new(self.block()?);
            let otherwise = if self.eat_keyword("else") {
                Some(Box::new(self.block()?))
            } else {
                None
            };
            return Ok(Stmt::If {
                cond,
                then,
                otherwise,
            });
        }
        if self.eat_keyword("alloc") {
            let name = self.name("a buffer name")?;
            self.expect(":")?;
            let buffer = self.buffer_type(name)?;
            self.buffers.push((buffer.name.clone(), buffer.dtype));
            let body = self.block();
            self.buffers.pop();
            return Ok(Stmt::Allocate {
                buffer,
                body: Box::new(body?),
            });
        }
        if self.eat_keyword("evaluate") {
            return self.prim_expr().map(Stmt::Evaluate);
        }
        if self.eat_keyword("microkernel") {
            return self.microkernel_call();
        }
        if !self.at_name(0) || !self.at_punct(1, "[") {
            return Err(self.expected(
                "a statement (for, let, if, alloc, evaluate, microkernel, seq or a store)",
            ));
        }
        let buffer = self.name("a buffer name")?;
        let indices = self.list("[", "]", Parser::prim_expr)?;
        self.expect("=")?;
        let value = self.prim_expr()?;
        Ok(Stmt::Store {
            buffer,
            indices,
            value,
        })
    }

    /// `kernel(buffer @ offset, ...)(scalar, ...)` after `microkernel`.
    fn microkernel_call(&mut self) -> Result<Stmt, ParseError> {
        let kernel = self.name("a microkernel name")?;
        let operands = self.list("(", ")", |p| {
            let buffer = p.name("a buffer name")?;
            p.expect("@")?;
            let offset = p.prim_expr()?;
            Ok(BufferRegion { buffer, offset })
        })?;
        let scalars = self.list("(", ")", Parser::prim_expr)?;
        Ok(Stmt::Microkernel(MicrokernelCall {
            kernel,
            operands,
            scalars,
        }))
    }

    /// `name[: dtype]` (or `name: dtype` when `default` is `None`).
    fn typed_var(&mut self, default: Option<DType>) -> Result<TVar, ParseError> {
        let name = self.name("a variable name")?;
        let dtype = match (default, self.at(":")) {
            (Some(d), false) => d,
            _ => {
                self.expect(":")?;
                self.dtype()?
            }
        };
        Ok(TVar { name, dtype })
    }

    /// `for i[: dtype] in kind(extent) { body }`.
    fn for_stmt(&mut self) -> Result<Stmt, ParseError> {
        let var = self.typed_var(Some(DType::I64))?;
        self.expect_keyword("in")?;
        let kind = FOR_KINDS.into_iter().find(|k| self.at_keyword(k.name()));
        let kind = kind
            .ok_or_else(|| self.expected("a loop kind (serial, parallel, vectorized, unrolled)"))?;
        self.advance();
        self.expect("(")?;
        let extent = self.prim_expr()?;
        self.expect(")")?;
        let body = Box::new(self.scoped_var(var.clone(), Parser::block)?);
        Ok(Stmt::For {
            var,
            extent,
            kind,
            body,
        })
    }

    fn scoped_var<T>(
        &mut self,
        var: TVar,
        parse: impl FnOnce(&mut Self) -> Result<T, ParseError>,
    ) -> Result<T, ParseError> {
        self.tvars.push(var);
        let result = parse(self);
        self.tvars.pop();
        result
    }

    /// `additive [cmp additive]`.
    fn prim_expr(&mut self) -> Result<PrimExpr, ParseError> {
        let lhs = self.binary_level(&[BinOp::Add, BinOp::Sub], Parser::term)?;
        let cmp = CMPS.into_iter().find(|c| self.at(cmp_symbol(*c)));
        match cmp {
            Some(cmp) => {
                self.advance();
                let rhs = self.binary_level(&[BinOp::Add, BinOp::Sub], Parser::term)?;
                Ok(lhs.compare(cmp, rhs))
            }
            None => Ok(lhs),
        }
    }

    fn term(&mut self) -> Result<PrimExpr, ParseError> {
        self.binary_level(&[BinOp::Mul, BinOp::Div], Parser::unary)
    }

    /// `operand (op operand)*`, left-associative, for infix `ops`.
    fn binary_level(
        &mut self,
        ops: &[BinOp],
        operand: fn(&mut Self) -> Result<PrimExpr, ParseError>,
    ) -> Result<PrimExpr, ParseError> {
        let mut acc = operand(self)?;
        while let Some(op) = ops
            .iter()
            .find(|op| infix_symbol(**op).is_some_and(|s| self.at(s)))
        {
            self.advance();
            acc = acc.binary(*op, operand(self)?);
        }
        Ok(acc)
    }

    /// A literal, `( expr )`, a call form, a load or a variable.
    fn unary(&mut self) -> Result<PrimExpr, ParseError> {
        if self.eat("(") {
            let e = self.prim_expr()?;
            self.expect(")")?;
            return Ok(e);
        }
        if self.at_float() {
            return Ok(PrimExpr::Float(self.number()?, DType::F32));
        }
        if self.at("-") || matches!(self.kind(0), TokenKind::Number(_)) {
            return Ok(PrimExpr::Int(self.int()?, DType::I64));
        }
        let TokenKind::Ident { text, quoted } = self.kind(0) else {
            return Err(self.expected("an expression"));
        };
        let (text, quoted, start) = (text.clone(), *quoted, self.offset());
        if !quoted && self.at_punct(1, "(") {
            return self.call_form(&text);
        }
        self.advance();
        if self.at("[") {
            let indices = self.list("[", "]", Parser::prim_expr)?;
            let known = self.buffers.iter().rev().find(|(b, _)| *b == text);
            let build = |dtype| PrimExpr::Load {
                buffer: text.clone(),
                dtype,
                indices,
            };
            return self.annotated(known.map(|(_, d)| *d), (&text, start), "buffer", build);
        }
        let known = self.tvars.iter().rev().find(|v| v.name == text);
        let build = |dtype| PrimExpr::Var(TVar::new(&text, dtype));
        self.annotated(known.map(|v| v.dtype), (&text, start), "variable", build)
    }

    /// Builds a var or load with the dtype after `:`, else the declared one.
    fn annotated(
        &mut self,
        declared: Option<DType>,
        (name, start): (&str, usize),
        what: &str,
        build: impl FnOnce(DType) -> PrimExpr,
    ) -> Result<PrimExpr, ParseError> {
        if self.eat(":") {
            return self.dtype().map(build);
        }
        declared.map(build).ok_or_else(|| {
            let message =
                format!("unknown {what} `{name}` (declare it or write `({name}: dtype)`)");
            self.error_at(start, message)
        })
    }

    /// `dtype(literal)`, `cast(..)`, `select(..)`, `not(..)`, binary ops and intrinsics.
    fn call_form(&mut self, head: &str) -> Result<PrimExpr, ParseError> {
        let start = self.offset();
        if self.at_dtype(0) {
            let dtype = self.dtype()?;
            self.expect("(")?;
            let value = if self.at_float() {
                PrimExpr::Float(self.number()?, dtype)
            } else {
                PrimExpr::Int(self.int()?, dtype)
            };
            self.expect(")")?;
            return Ok(value);
        }
        self.advance();
        if head == "cast" {
            self.expect("(")?;
            let dtype = self.dtype()?;
            self.expect(",")?;
            let value = self.prim_expr()?;
            self.expect(")")?;
            return Ok(PrimExpr::Cast(dtype, Box::new(value)));
        }
        let args = self.list("(", ")", Parser::prim_expr)?;
        let bin_op = BinOp::ALL.into_iter().find(|op| op.name() == head);
        match (head, bin_op) {
            ("select", _) => {
                let [cond, then, otherwise] = self.arguments(head, start, args)?;
                Ok(PrimExpr::select(cond, then, otherwise))
            }
            ("not", _) => {
                let [value] = self.arguments(head, start, args)?;
                Ok(PrimExpr::Not(Box::new(value)))
            }
            (_, Some(op)) => {
                let [a, b] = self.arguments(head, start, args)?;
                Ok(a.binary(op, b))
            }
            _ => match Intrinsic::from_name(head) {
                Some(intrinsic) => Ok(PrimExpr::Call(intrinsic, args)),
                None => Err(self.error_at(start, format!("unknown function `{head}`"))),
            },
        }
    }

    /// Exactly `N` arguments of `head`.
    fn arguments<const N: usize>(
        &self,
        head: &str,
        start: usize,
        args: Vec<PrimExpr>,
    ) -> Result<[PrimExpr; N], ParseError> {
        let found = args.len();
        args.try_into().map_err(|_| {
            self.error_at(
                start,
                format!("`{head}` takes {N} arguments, found {found}"),
            )
        })
    }
}
