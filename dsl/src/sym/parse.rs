//! Parser for the text form printed by [`super::display`].
//!
//! Grammar: `expr := term (('+' | '-') term)*`, `term := unary ('*' unary)*`,
//! `unary := '-' unary | int | name | name '(' expr (',' expr)* ')' | '(' expr ')'`.
//! Names resolve to dims through a caller-supplied lookup (which knows their bounds).

use super::{CmpOp, SymExpr, SymVar};

/// A syntax error or an unknown name in a symbolic expression.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot parse symbolic expression `{text}` at byte {position}: {message}")]
pub struct ParseSymError {
    /// The whole input.
    pub text: String,
    /// Byte offset of the problem.
    pub position: usize,
    /// What is wrong.
    pub message: String,
}

impl SymExpr {
    /// Parses `text`, resolving dim names with `lookup`.
    pub fn parse(
        text: &str,
        lookup: &dyn Fn(&str) -> Option<SymVar>,
    ) -> Result<SymExpr, ParseSymError> {
        let mut parser = Parser {
            text,
            pos: 0,
            lookup,
            depth: 0,
            operands: 0,
        };
        let expr = parser.expr()?;
        parser.skip_space();
        if parser.pos != text.len() {
            return Err(parser.error("unexpected trailing input"));
        }
        Ok(expr)
    }
}

/// The deepest nesting of operands (parentheses, calls, unary minus) parsed: the parser
/// recurses once per level.
const MAX_DEPTH: usize = 256;

/// The most operands one expression may have. Each `+`, `-` or `*` canonicalizes the
/// expression built so far, so parsing takes time quadratic in the operands (a product
/// of 10^5 factors took ~280 s); printed expressions have a handful.
const MAX_OPERANDS: usize = 4096;

struct Parser<'a> {
    text: &'a str,
    pos: usize,
    lookup: &'a dyn Fn(&str) -> Option<SymVar>,
    /// Operands being parsed, outermost first.
    depth: usize,
    /// Operands parsed so far.
    operands: usize,
}

impl Parser<'_> {
    fn error(&self, message: &str) -> ParseSymError {
        ParseSymError {
            text: self.text.to_string(),
            position: self.pos,
            message: message.to_string(),
        }
    }

    fn skip_space(&mut self) {
        let rest = &self.text[self.pos..];
        self.pos += rest.len() - rest.trim_start().len();
    }

    fn peek(&mut self) -> Option<char> {
        self.skip_space();
        self.text[self.pos..].chars().next()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char) -> Result<(), ParseSymError> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.error(&format!("expected `{c}`")))
        }
    }

    fn expr(&mut self) -> Result<SymExpr, ParseSymError> {
        let mut acc = self.term()?;
        loop {
            if self.eat('+') {
                acc = &acc + &self.term()?;
            } else if self.eat('-') {
                acc = &acc - &self.term()?;
            } else {
                return Ok(acc);
            }
        }
    }

    fn term(&mut self) -> Result<SymExpr, ParseSymError> {
        let mut acc = self.unary()?;
        while self.eat('*') {
            acc = &acc * &self.unary()?;
        }
        Ok(acc)
    }

    /// An operand, at most [`MAX_DEPTH`] deep and at most the [`MAX_OPERANDS`]th.
    fn unary(&mut self) -> Result<SymExpr, ParseSymError> {
        if self.depth == MAX_DEPTH {
            return Err(self.error(&format!("nested more than {MAX_DEPTH} deep")));
        }
        if self.operands == MAX_OPERANDS {
            return Err(self.error(&format!("more than {MAX_OPERANDS} operands")));
        }
        self.operands += 1;
        self.depth += 1;
        let operand = self.operand();
        self.depth -= 1;
        operand
    }

    fn operand(&mut self) -> Result<SymExpr, ParseSymError> {
        if self.eat('-') {
            return Ok(-self.unary()?);
        }
        if self.eat('(') {
            let inner = self.expr()?;
            self.expect(')')?;
            return Ok(inner);
        }
        match self.peek() {
            Some(c) if c.is_ascii_digit() => self.integer(),
            Some(c) if c.is_alphabetic() || c == '_' => self.name_or_call(),
            _ => Err(self.error("expected an integer, a name or `(`")),
        }
    }

    fn take_while(&mut self, keep: impl Fn(char) -> bool) -> &str {
        let start = self.pos;
        let len = self.text[start..]
            .find(|c: char| !keep(c))
            .unwrap_or(self.text.len() - start);
        self.pos += len;
        &self.text[start..self.pos]
    }

    fn integer(&mut self) -> Result<SymExpr, ParseSymError> {
        let start = self.pos;
        let digits = self.take_while(|c| c.is_ascii_digit());
        digits.parse::<i64>().map(SymExpr::int).map_err(|_| {
            self.pos = start;
            self.error("integer out of range")
        })
    }

    fn name_or_call(&mut self) -> Result<SymExpr, ParseSymError> {
        let start = self.pos;
        let name = self
            .take_while(|c| c.is_alphanumeric() || c == '_' || c == '.')
            .to_string();
        if !self.eat('(') {
            return (self.lookup)(&name).map(|v| v.expr()).ok_or_else(|| {
                self.pos = start;
                self.error(&format!("unknown symbolic dim `{name}`"))
            });
        }
        let mut args = vec![self.expr()?];
        while self.eat(',') {
            args.push(self.expr()?);
        }
        self.expect(')')?;
        self.apply(&name, &args).ok_or_else(|| {
            self.pos = start;
            self.error(&format!(
                "unknown function `{name}` with {} arguments",
                args.len()
            ))
        })
    }

    fn apply(&self, name: &str, args: &[SymExpr]) -> Option<SymExpr> {
        let cmp = |op| Some(args[0].cmp(op, &args[1]));
        match (name, args.len()) {
            ("floordiv", 2) => Some(args[0].floordiv(&args[1])),
            ("floormod", 2) => Some(args[0].floormod(&args[1])),
            ("min", 2) => Some(args[0].minimum(&args[1])),
            ("max", 2) => Some(args[0].maximum(&args[1])),
            ("lt", 2) => cmp(CmpOp::Lt),
            ("le", 2) => cmp(CmpOp::Le),
            ("eq", 2) => cmp(CmpOp::Eq),
            ("ne", 2) => cmp(CmpOp::Ne),
            ("select", 3) => Some(SymExpr::select(&args[0], &args[1], &args[2])),
            _ => None,
        }
    }
}
