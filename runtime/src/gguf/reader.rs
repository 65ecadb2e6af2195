//! A bounds-checked little-endian cursor over a file's bytes: every read checks the
//! bytes left first and fails with a typed error naming the field and its offset.

use super::GgufError;
use std::fmt;
use std::path::Path;

/// The field being read, to name in errors (formatted only when one happens).
#[derive(Clone, Copy)]
pub(super) enum Field<'a> {
    /// The magic.
    Magic,
    /// The version.
    Version,
    /// The tensor count.
    TensorCount,
    /// The metadata entry count.
    KvCount,
    /// Metadata key number `index`.
    Key(u64),
    /// The value type of a key.
    ValueType(&'a str),
    /// The value (or an array element) of a key.
    Value(&'a str),
    /// The element type of an array of a key.
    ArrayType(&'a str),
    /// The element count of an array of a key.
    ArrayLen(&'a str),
    /// The name of tensor number `index`.
    TensorName(u64),
    /// A tensor's dimension count.
    NDims(&'a str),
    /// A tensor's dimensions.
    Dims(&'a str),
    /// A tensor's type id.
    TensorType(&'a str),
    /// A tensor's data offset.
    TensorOffset(&'a str),
}

impl fmt::Display for Field<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Field::Magic => write!(f, "the magic"),
            Field::Version => write!(f, "the version"),
            Field::TensorCount => write!(f, "the tensor count"),
            Field::KvCount => write!(f, "the metadata entry count"),
            Field::Key(i) => write!(f, "metadata key #{i}"),
            Field::ValueType(k) => write!(f, "the value type of key `{k}`"),
            Field::Value(k) => write!(f, "the value of key `{k}`"),
            Field::ArrayType(k) => write!(f, "the array element type of key `{k}`"),
            Field::ArrayLen(k) => write!(f, "the array length of key `{k}`"),
            Field::TensorName(i) => write!(f, "the name of tensor #{i}"),
            Field::NDims(t) => write!(f, "the dimension count of tensor `{t}`"),
            Field::Dims(t) => write!(f, "the dimensions of tensor `{t}`"),
            Field::TensorType(t) => write!(f, "the type of tensor `{t}`"),
            Field::TensorOffset(t) => write!(f, "the data offset of tensor `{t}`"),
        }
    }
}

/// A cursor over `bytes`, the whole file.
pub(super) struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    path: &'a Path,
}

impl<'a> Reader<'a> {
    /// A cursor at the start of `bytes`, the file at `path`.
    pub(super) fn new(bytes: &'a [u8], path: &'a Path) -> Reader<'a> {
        Reader {
            bytes,
            pos: 0,
            path,
        }
    }

    /// The file, for errors.
    pub(super) fn path(&self) -> &'a Path {
        self.path
    }

    /// The current offset.
    pub(super) fn offset(&self) -> u64 {
        self.pos as u64
    }

    /// The bytes left after the current offset.
    pub(super) fn left(&self) -> u64 {
        (self.bytes.len() - self.pos) as u64
    }

    /// The next `n` bytes, or a truncation error naming `field`.
    pub(super) fn take(&mut self, n: u64, field: Field<'_>) -> Result<&'a [u8], GgufError> {
        if n > self.left() {
            return Err(GgufError::Truncated {
                path: self.path.to_path_buf(),
                offset: self.offset(),
                field: field.to_string(),
                needed: n,
                left: self.left(),
            });
        }
        // n <= left, so it fits in usize and the range is in bounds.
        let start = self.pos;
        self.pos += n as usize;
        Ok(&self.bytes[start..self.pos])
    }

    /// The next `N` bytes as an array.
    pub(super) fn array<const N: usize>(&mut self, field: Field<'_>) -> Result<[u8; N], GgufError> {
        let bytes = self.take(N as u64, field)?;
        let mut out = [0; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    /// A little-endian u32.
    pub(super) fn u32(&mut self, field: Field<'_>) -> Result<u32, GgufError> {
        self.array(field).map(u32::from_le_bytes)
    }

    /// A little-endian u64.
    pub(super) fn u64(&mut self, field: Field<'_>) -> Result<u64, GgufError> {
        self.array(field).map(u64::from_le_bytes)
    }

    /// A string: a u64 length, then that many UTF-8 bytes.
    pub(super) fn string(&mut self, field: Field<'_>) -> Result<String, GgufError> {
        let len = self.u64(field)?;
        if len > self.left() {
            return Err(GgufError::StringTooLong {
                path: self.path.to_path_buf(),
                offset: self.offset(),
                field: field.to_string(),
                len,
                left: self.left(),
            });
        }
        let offset = self.offset();
        let bytes = self.take(len, field)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_owned()),
            Err(_) => Err(GgufError::NotUtf8 {
                path: self.path.to_path_buf(),
                offset,
                field: field.to_string(),
            }),
        }
    }

    /// The first multiple of `alignment` at or after the current offset (which may be
    /// past the end of the file: a file without tensors may end before it).
    pub(super) fn aligned_offset(&self, alignment: u64) -> u64 {
        self.offset().next_multiple_of(alignment)
    }
}
