//! Tokens of the text form. Names may contain dots (`model.layers.0.mlp.up_proj.weight`);
//! any other name is written in backticks. `//` starts a comment to the end of the line.

use super::ParseError;

/// Punctuation, longest first (so `->` wins over `-`).
const PUNCTS: [&str; 22] = [
    "->", "<=", ">=", "==", "!=", "(", ")", "[", "]", "{", "}", ",", ":", "=", "@", "+", "-", "*",
    "/", "<", ">", "?",
];

/// What a token is.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum TokenKind {
    /// A name, bare or in backticks (`quoted`; never a keyword then).
    Ident { text: String, quoted: bool },
    /// A number as written (`42`, `1.5`, `1e-5`); a sign is a separate token.
    Number(String),
    /// A double-quoted string, unescaped.
    Str(String),
    /// Punctuation (one of [`PUNCTS`]).
    Punct(&'static str),
    /// The end of the input.
    Eof,
}

impl TokenKind {
    /// How the token is named in "found ..." messages.
    pub(super) fn describe(&self) -> String {
        match self {
            TokenKind::Ident { text, .. } => format!("`{text}`"),
            TokenKind::Number(text) => format!("number `{text}`"),
            TokenKind::Str(text) => format!("string {text:?}"),
            TokenKind::Punct(p) => format!("`{p}`"),
            TokenKind::Eof => "end of input".to_string(),
        }
    }
}

/// A token and its byte range in the source.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Token {
    pub(super) kind: TokenKind,
    pub(super) start: usize,
    pub(super) end: usize,
}

/// 1-based line and column (in characters) of a byte offset.
pub(super) fn line_column(src: &str, offset: usize) -> (usize, usize) {
    let before = &src[..offset.min(src.len())];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

/// Splits `src` into tokens, ending with [`TokenKind::Eof`].
pub(super) fn tokenize(src: &str) -> Result<Vec<Token>, ParseError> {
    let mut lexer = Lexer { src, pos: 0 };
    let mut tokens = Vec::new();
    loop {
        lexer.skip_space_and_comments();
        let start = lexer.pos;
        let kind = lexer.token()?;
        let done = kind == TokenKind::Eof;
        tokens.push(Token {
            kind,
            start,
            end: lexer.pos,
        });
        if done {
            return Ok(tokens);
        }
    }
}

struct Lexer<'a> {
    src: &'a str,
    pos: usize,
}

impl<'a> Lexer<'a> {
    fn rest(&self) -> &'a str {
        &self.src[self.pos..]
    }

    fn error(&self, offset: usize, message: String) -> ParseError {
        ParseError::at(self.src, offset, message, None)
    }

    fn skip_space_and_comments(&mut self) {
        loop {
            let trimmed = self.rest().trim_start();
            self.pos = self.src.len() - trimmed.len();
            if !trimmed.starts_with("//") {
                return;
            }
            self.pos += trimmed.find('\n').unwrap_or(trimmed.len());
        }
    }

    fn take_while(&mut self, keep: impl Fn(char) -> bool) -> &'a str {
        let start = self.pos;
        let len = self.rest().find(|c| !keep(c)).unwrap_or(self.rest().len());
        self.pos += len;
        &self.src[start..self.pos]
    }

    fn token(&mut self) -> Result<TokenKind, ParseError> {
        let Some(c) = self.rest().chars().next() else {
            return Ok(TokenKind::Eof);
        };
        if c.is_ascii_alphabetic() || c == '_' {
            let text = self.take_while(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
            return Ok(TokenKind::Ident {
                text: text.to_string(),
                quoted: false,
            });
        }
        if c.is_ascii_digit() {
            return Ok(TokenKind::Number(self.number()));
        }
        if c == '"' || c == '`' {
            let text = self.quoted(c)?;
            return Ok(if c == '"' {
                TokenKind::Str(text)
            } else {
                TokenKind::Ident { text, quoted: true }
            });
        }
        let punct = PUNCTS.into_iter().find(|p| self.rest().starts_with(p));
        let punct =
            punct.ok_or_else(|| self.error(self.pos, format!("unexpected character `{c}`")))?;
        self.pos += punct.len();
        Ok(TokenKind::Punct(punct))
    }

    /// `digits [. digits] [e [+-] digits]`.
    fn number(&mut self) -> String {
        let start = self.pos;
        self.take_while(|c| c.is_ascii_digit());
        let digit_after =
            |s: &str, skip: usize| s[skip..].starts_with(|c: char| c.is_ascii_digit());
        if self.rest().starts_with('.') && digit_after(self.rest(), 1) {
            self.pos += 1;
            self.take_while(|c| c.is_ascii_digit());
        }
        let rest = self.rest();
        if rest.starts_with(['e', 'E']) {
            let sign = usize::from(rest[1..].starts_with(['+', '-']));
            if digit_after(rest, 1 + sign) {
                self.pos += 1 + sign;
                self.take_while(|c| c.is_ascii_digit());
            }
        }
        self.src[start..self.pos].to_string()
    }

    /// A string or a quoted name, from its opening `delim` through the closing one.
    fn quoted(&mut self, delim: char) -> Result<String, ParseError> {
        let start = self.pos;
        self.pos += 1;
        let mut out = String::new();
        loop {
            let c = self.rest().chars().next().ok_or_else(|| {
                self.error(
                    start,
                    format!("unterminated {delim}...{delim} (no closing {delim})"),
                )
            })?;
            self.pos += c.len_utf8();
            match c {
                c if c == delim => return Ok(out),
                '\\' => out.push(self.escape()?),
                c => out.push(c),
            }
        }
    }

    fn escape(&mut self) -> Result<char, ParseError> {
        let at = self.pos - 1;
        let c = self.rest().chars().next();
        self.pos += c.map_or(0, char::len_utf8);
        match c {
            Some('n') => Ok('\n'),
            Some('t') => Ok('\t'),
            Some('r') => Ok('\r'),
            Some(c @ ('\\' | '"' | '`')) => Ok(c),
            Some('u') if self.rest().starts_with('{') => {
                let close = self.rest().find('}').unwrap_or(0);
                let hex = &self.rest()[1..close.max(1)];
                let c = u32::from_str_radix(hex, 16).ok().and_then(char::from_u32);
                self.pos += close + 1;
                c.ok_or_else(|| self.error(at, format!("invalid escape `\\u{{{hex}}}`")))
            }
            _ => Err(self.error(
                at,
                "invalid escape (expected one of \\\\ \\\" \\` \\n \\t \\r \\u{..})".to_string(),
            )),
        }
    }
}
