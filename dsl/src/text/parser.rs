//! The parser's cursor over tokens, its scopes, and the module level. The grammar of
//! types and literals is in `parse_types`, graph functions in `parse_graph`, primitive
//! functions in `parse_tir` (each an `impl Parser` block).

use super::lexer::{tokenize, Token, TokenKind};
use super::ParseError;
use crate::ir::Var;
use crate::tir::TVar;
use crate::{DType, IRModule, SymVar};
use std::collections::{BTreeMap, HashMap};

/// Tokens, a position, and the names in scope while parsing one function.
pub(super) struct Parser<'a> {
    src: &'a str,
    tokens: Vec<Token>,
    pos: usize,
    /// The function being parsed (named in errors).
    pub(super) function: Option<String>,
    /// Symbolic dims declared by the current function.
    pub(super) dims: BTreeMap<String, SymVar>,
    /// Graph variables defined so far in the current function.
    pub(super) vars: HashMap<String, Var>,
    /// TIR variables in scope, innermost last.
    pub(super) tvars: Vec<TVar>,
    /// TIR buffers in scope (name, element type), innermost last.
    pub(super) buffers: Vec<(String, DType)>,
}

/// The deepest bracket nesting the text form may have (printed modules stay far below;
/// the parser recurses once per level, so deeper input could exhaust the stack).
pub(super) const MAX_NESTING: usize = 256;

/// An error at the first bracket nested deeper than [`MAX_NESTING`].
fn check_nesting(src: &str, tokens: &[Token]) -> Result<(), ParseError> {
    let mut depth = 0usize;
    for token in tokens {
        match token.kind {
            TokenKind::Punct("(" | "[" | "{") => depth += 1,
            TokenKind::Punct(")" | "]" | "}") => depth = depth.saturating_sub(1),
            _ => continue,
        }
        if depth > MAX_NESTING {
            let message = format!("brackets nested more than {MAX_NESTING} deep");
            return Err(ParseError::at(src, token.start, message, None));
        }
    }
    Ok(())
}

impl<'a> Parser<'a> {
    /// Tokenizes `src`, checking its nesting ([`MAX_NESTING`]).
    pub(super) fn new(src: &'a str) -> Result<Self, ParseError> {
        let tokens = tokenize(src)?;
        check_nesting(src, &tokens)?;
        Ok(Parser {
            src,
            tokens,
            pos: 0,
            function: None,
            dims: BTreeMap::new(),
            vars: HashMap::new(),
            tvars: Vec::new(),
            buffers: Vec::new(),
        })
    }

    /// `(export? graph ... | prim ...)*` up to the end of the input.
    pub(super) fn module(mut self) -> Result<IRModule, ParseError> {
        let mut module = IRModule::new();
        while !matches!(self.kind(0), TokenKind::Eof) {
            self.function = None;
            self.dims.clear();
            let start = self.pos;
            let exported = self.eat_keyword("export");
            let duplicate = if exported || self.at_keyword("graph") {
                let (name, f) = self.graph_function(exported)?;
                module.functions.insert(name.clone(), f).map(|_| name)
            } else if self.at_keyword("prim") {
                let (name, f) = self.prim_func()?;
                module.prim_funcs.insert(name.clone(), f).map(|_| name)
            } else {
                return Err(self.expected("`graph`, `export graph` or `prim`"));
            };
            if let Some(name) = duplicate {
                let message = format!("function @{name} is defined twice");
                return Err(self.error_at(self.tokens[start].start, message));
            }
        }
        Ok(module)
    }

    /// The kind of the token `ahead` positions after the current one.
    pub(super) fn kind(&self, ahead: usize) -> &TokenKind {
        let last = self.tokens.len() - 1;
        &self.tokens[(self.pos + ahead).min(last)].kind
    }

    /// Consumes the current token (the end of input stays put).
    pub(super) fn advance(&mut self) -> TokenKind {
        let kind = self.kind(0).clone();
        self.pos = (self.pos + 1).min(self.tokens.len() - 1);
        kind
    }

    /// The current position, to come back to with [`Parser::seek`].
    pub(super) fn position(&self) -> usize {
        self.pos
    }

    /// Goes back (or forward) to a position from [`Parser::position`].
    pub(super) fn seek(&mut self, pos: usize) {
        self.pos = pos;
    }

    /// Byte offset of the current token.
    pub(super) fn offset(&self) -> usize {
        self.tokens[self.pos].start
    }

    /// The source text from token `from` up to (not including) the current token.
    pub(super) fn text_since(&self, from: usize) -> (usize, &'a str) {
        let start = self.tokens[from].start;
        let end = self.tokens[self.pos.max(from + 1) - 1].end;
        (start, &self.src[start..end.max(start)])
    }

    /// An error at byte `offset`.
    pub(super) fn error_at(&self, offset: usize, message: String) -> ParseError {
        ParseError::at(self.src, offset, message, self.function.clone())
    }

    /// An error at the current token.
    pub(super) fn error(&self, message: String) -> ParseError {
        self.error_at(self.offset(), message)
    }

    /// "expected `what`, found ..." at the current token.
    pub(super) fn expected(&self, what: &str) -> ParseError {
        self.error(format!(
            "expected {what}, found {}",
            self.kind(0).describe()
        ))
    }

    /// Whether the token `ahead` is the punctuation `punct`.
    pub(super) fn at_punct(&self, ahead: usize, punct: &str) -> bool {
        matches!(self.kind(ahead), TokenKind::Punct(p) if *p == punct)
    }

    /// Whether the current token is `punct`.
    pub(super) fn at(&self, punct: &str) -> bool {
        self.at_punct(0, punct)
    }

    /// Consumes `punct` if it is next.
    pub(super) fn eat(&mut self, punct: &str) -> bool {
        let found = self.at(punct);
        if found {
            self.advance();
        }
        found
    }

    /// Consumes `punct` or fails.
    pub(super) fn expect(&mut self, punct: &str) -> Result<(), ParseError> {
        if self.eat(punct) {
            Ok(())
        } else {
            Err(self.expected(&format!("`{punct}`")))
        }
    }

    /// Whether the token `ahead` is the unquoted word `word`.
    pub(super) fn at_word(&self, ahead: usize, word: &str) -> bool {
        matches!(self.kind(ahead), TokenKind::Ident { text, quoted: false } if text == word)
    }

    /// Whether the current token is the keyword `word`.
    pub(super) fn at_keyword(&self, word: &str) -> bool {
        self.at_word(0, word)
    }

    /// Consumes the keyword `word` if it is next.
    pub(super) fn eat_keyword(&mut self, word: &str) -> bool {
        let found = self.at_keyword(word);
        if found {
            self.advance();
        }
        found
    }

    /// Consumes the keyword `word` or fails.
    pub(super) fn expect_keyword(&mut self, word: &str) -> Result<(), ParseError> {
        if self.eat_keyword(word) {
            Ok(())
        } else {
            Err(self.expected(&format!("`{word}`")))
        }
    }

    /// Whether the token `ahead` is a name (bare or quoted).
    pub(super) fn at_name(&self, ahead: usize) -> bool {
        matches!(self.kind(ahead), TokenKind::Ident { .. })
    }

    /// A name (bare or quoted); `what` names it in the error.
    pub(super) fn name(&mut self, what: &str) -> Result<String, ParseError> {
        match self.kind(0) {
            TokenKind::Ident { text, .. } => {
                let text = text.clone();
                self.advance();
                Ok(text)
            }
            _ => Err(self.expected(what)),
        }
    }

    /// Items between `open` and `close` separated by commas (a trailing comma is
    /// allowed).
    pub(super) fn list<T>(
        &mut self,
        open: &str,
        close: &str,
        mut item: impl FnMut(&mut Self) -> Result<T, ParseError>,
    ) -> Result<Vec<T>, ParseError> {
        self.expect(open)?;
        let mut items = Vec::new();
        while !self.eat(close) {
            items.push(item(self)?);
            if !self.eat(",") && !self.at(close) {
                return Err(self.expected(&format!("`,` or `{close}`")));
            }
        }
        Ok(items)
    }

    /// Skips a bracketed group starting at the current `(`, `[` or `{`.
    pub(super) fn skip_group(&mut self) -> Result<(), ParseError> {
        let open = self.offset();
        let mut depth = 0usize;
        loop {
            match self.advance() {
                TokenKind::Punct("(" | "[" | "{") => depth += 1,
                TokenKind::Punct(")" | "]" | "}") => depth = depth.saturating_sub(1),
                TokenKind::Eof => return Err(self.error_at(open, "unclosed bracket".into())),
                _ => {}
            }
            if depth == 0 {
                return Ok(());
            }
        }
    }
}
