//! Grammar shared by graph and primitive functions: literals, symbolic expressions,
//! dim declarations, struct info and attributes.

use super::lexer::TokenKind;
use super::parser::Parser;
use super::ParseError;
use crate::attrs::{AttrValue, Attrs};
use crate::struct_info::{StructInfo, TensorShape};
use crate::{DType, SymExpr, SymVar, TensorInfo};

impl Parser<'_> {
    /// A data type name (`f32`, `i64`, ...).
    pub(super) fn dtype(&mut self) -> Result<DType, ParseError> {
        match self.kind(0) {
            TokenKind::Ident {
                text,
                quoted: false,
            } => {
                let dtype = text
                    .parse::<DType>()
                    .map_err(|e| self.error(e.to_string()))?;
                self.advance();
                Ok(dtype)
            }
            _ => Err(self.expected("a data type (f32, f16, bf16, i64, i32, i8, u8, u4, bool)")),
        }
    }

    /// Whether the unquoted word `ahead` is a data type name.
    pub(super) fn at_dtype(&self, ahead: usize) -> bool {
        matches!(self.kind(ahead), TokenKind::Ident { text, quoted: false }
            if text.parse::<DType>().is_ok())
    }

    /// Whether a float literal is next: `[-] (number with . or e | inf | nan)`.
    pub(super) fn at_float(&self) -> bool {
        let ahead = usize::from(self.at("-"));
        match self.kind(ahead) {
            TokenKind::Number(text) => text.contains(['.', 'e', 'E']),
            _ => self.at_word(ahead, "inf") || self.at_word(ahead, "nan"),
        }
    }

    /// A numeric literal (integer or float syntax) as an `f64`, with an optional `-`.
    pub(super) fn number(&mut self) -> Result<f64, ParseError> {
        let negative = self.eat("-");
        let value = match self.kind(0) {
            TokenKind::Number(text) => text.parse::<f64>().ok(),
            TokenKind::Ident {
                text,
                quoted: false,
            } if text == "inf" => Some(f64::INFINITY),
            TokenKind::Ident {
                text,
                quoted: false,
            } if text == "nan" => Some(f64::NAN),
            _ => None,
        };
        let value = value.ok_or_else(|| self.expected("a number"))?;
        self.advance();
        Ok(if negative { -value } else { value })
    }

    /// An integer literal with an optional `-`.
    pub(super) fn int(&mut self) -> Result<i64, ParseError> {
        let start = self.offset();
        let sign = if self.eat("-") { "-" } else { "" };
        let TokenKind::Number(text) = self.kind(0) else {
            return Err(self.expected("an integer"));
        };
        let value = format!("{sign}{text}").parse::<i64>().map_err(|_| {
            let message = format!("`{sign}{text}` is not a 64-bit integer");
            self.error_at(start, message)
        })?;
        self.advance();
        Ok(value)
    }

    /// A non-negative integer (a count, an index); `what` names it in errors.
    pub(super) fn count(&mut self, what: &str) -> Result<usize, ParseError> {
        let start = self.offset();
        let value = self.int()?;
        usize::try_from(value).map_err(|_| {
            self.error_at(start, format!("{what} must be non-negative, found {value}"))
        })
    }

    /// A string literal; `what` names it in the error.
    pub(super) fn string(&mut self, what: &str) -> Result<String, ParseError> {
        match self.kind(0) {
            TokenKind::Str(text) => {
                let text = text.clone();
                self.advance();
                Ok(text)
            }
            _ => Err(self.expected(what)),
        }
    }

    /// A symbolic expression: the tokens up to a `,`, `)` or `]` at bracket depth 0, read
    /// by [`SymExpr::parse`] with the declared dims.
    pub(super) fn sym_expr(&mut self) -> Result<SymExpr, ParseError> {
        let first = self.position();
        let mut depth = 0usize;
        loop {
            match self.kind(0) {
                TokenKind::Punct("(" | "[") => depth += 1,
                TokenKind::Punct("," | ")" | "]") if depth == 0 => break,
                TokenKind::Punct(")" | "]") => depth -= 1,
                TokenKind::Punct("{" | "}") | TokenKind::Eof => break,
                _ => {}
            }
            self.advance();
        }
        if self.position() == first {
            return Err(self.expected("a symbolic expression"));
        }
        let (start, text) = self.text_since(first);
        let dims = &self.dims;
        let lookup = |name: &str| dims.get(name).cloned();
        SymExpr::parse(text, &lookup).map_err(|e| self.error_at(start + e.position, e.message))
    }

    /// `(a, b)`, `(a,)` or `()`.
    pub(super) fn sym_tuple(&mut self) -> Result<Vec<SymExpr>, ParseError> {
        self.list("(", ")", Parser::sym_expr)
    }

    /// `n <= 2048` or `n`.
    pub(super) fn dim_decl(&mut self) -> Result<SymVar, ParseError> {
        let start = self.offset();
        let name = self.name("a dim name")?;
        let var = if self.eat("<=") {
            SymVar::bounded(&name, self.int()?)
        } else {
            SymVar::new(&name)
        };
        match self.dims.insert(name.clone(), var.clone()) {
            Some(old) if old != var => {
                let message = format!("dim `{name}` is declared twice with different bounds");
                Err(self.error_at(start, message))
            }
            _ => Ok(var),
        }
    }

    /// Dim declarations separated by commas (after `where`).
    pub(super) fn dim_decls(&mut self) -> Result<(), ParseError> {
        self.dim_decl()?;
        while self.eat(",") {
            self.dim_decl()?;
        }
        Ok(())
    }

    /// `Tensor(shape, dtype)`, `Tuple(...)`, `Shape(...)`, `Scalar(dtype)` or `Object`.
    pub(super) fn sinfo(&mut self) -> Result<StructInfo, ParseError> {
        let heads = ["Tensor", "Tuple", "Shape", "Scalar", "Object"];
        let head = heads.into_iter().find(|word| self.at_keyword(word));
        let head = head
            .ok_or_else(|| self.expected("struct info (Tensor, Tuple, Shape, Scalar or Object)"))?;
        self.advance();
        match head {
            "Object" => return Ok(StructInfo::Object),
            "Tuple" => return self.list("(", ")", Parser::sinfo).map(StructInfo::Tuple),
            _ => self.expect("(")?,
        }
        let sinfo = match head {
            "Tensor" => {
                let shape = self.tensor_shape()?;
                self.expect(",")?;
                let dtype = self.dtype()?;
                StructInfo::Tensor(TensorInfo { shape, dtype })
            }
            "Shape" if self.eat("?") => StructInfo::Shape(None),
            "Shape" => StructInfo::Shape(Some(self.sym_tuple()?)),
            _ => StructInfo::Scalar(self.dtype()?),
        };
        self.expect(")")?;
        Ok(sinfo)
    }

    /// `(dims...)`, `ndim=r` or `?`.
    fn tensor_shape(&mut self) -> Result<TensorShape, ParseError> {
        if self.eat("?") {
            Ok(TensorShape::Unknown)
        } else if self.eat_keyword("ndim") {
            self.expect("=")?;
            Ok(TensorShape::Rank(self.count("a tensor rank")?))
        } else if self.at("(") {
            Ok(TensorShape::Known(self.sym_tuple()?))
        } else {
            Err(self.expected("a shape `(...)`, `ndim=` or `?`"))
        }
    }

    /// Whether `key=` is next.
    pub(super) fn at_attr(&self) -> bool {
        self.at_name(0) && self.at_punct(1, "=")
    }

    /// `key=value`, added to `attrs` (a repeated key is an error).
    pub(super) fn attr(&mut self, attrs: &mut Attrs) -> Result<(), ParseError> {
        let start = self.offset();
        let key = self.name("an attribute name")?;
        self.expect("=")?;
        let value = self.attr_value()?;
        if attrs.insert(key.clone(), value).is_some() {
            return Err(self.error_at(start, format!("attribute `{key}` is given twice")));
        }
        Ok(())
    }

    /// Attributes in parentheses: `(key=value, ...)`.
    pub(super) fn attr_list(&mut self) -> Result<Attrs, ParseError> {
        let mut attrs = Attrs::new();
        self.list("(", ")", |p| p.attr(&mut attrs))?;
        Ok(attrs)
    }

    /// One attribute value (see [`super::syntax::attr_value`] for the forms).
    fn attr_value(&mut self) -> Result<AttrValue, ParseError> {
        if let TokenKind::Str(_) = self.kind(0) {
            return self.string("a string").map(AttrValue::Str);
        }
        if self.at("[") {
            return self.list("[", "]", Parser::int).map(AttrValue::Ints);
        }
        for (word, value) in [("true", true), ("false", false)] {
            if self.eat_keyword(word) {
                return Ok(AttrValue::Bool(value));
            }
        }
        if self.at_keyword("shape") && self.at_punct(1, "(") {
            self.advance();
            return self.list("(", ")", Parser::sym_expr).map(AttrValue::Shape);
        }
        if self.at_dtype(0) {
            return self.dtype().map(AttrValue::DType);
        }
        if self.at_float() {
            return self.number().map(AttrValue::Float);
        }
        self.int().map(AttrValue::Int)
    }
}
