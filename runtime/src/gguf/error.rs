//! Errors of reading GGUF files. Every variant names the file and, where one is
//! involved, the offset, key or tensor, with the values found.

use std::path::PathBuf;

/// Why a GGUF file could not be opened, or a tensor or metadata value not read from it.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    /// The file could not be opened, read or mapped.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS reported.
        source: std::io::Error,
    },
    /// The file ends inside a field.
    #[error("{}: truncated at offset {offset}: {field} needs {needed} bytes, {left} left", path.display())]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Where the field starts.
        offset: u64,
        /// Which field.
        field: String,
        /// Its size.
        needed: u64,
        /// The bytes left in the file there.
        left: u64,
    },
    /// The file does not start with `GGUF`.
    #[error("{}: not a GGUF file (starts with {found:02x?}, not \"GGUF\")", path.display())]
    BadMagic {
        /// The file.
        path: PathBuf,
        /// Its first bytes.
        found: Vec<u8>,
    },
    /// A GGUF v1 file (32-bit counts and lengths), which this reader does not read.
    #[error("{}: GGUF version 1 is not supported (only versions 2 and 3)", path.display())]
    Version1 {
        /// The file.
        path: PathBuf,
    },
    /// A big-endian GGUF file.
    #[error("{}: big-endian GGUF (version {version}) is not supported, only little-endian", path.display())]
    BigEndian {
        /// The file.
        path: PathBuf,
        /// The version, read big-endian.
        version: u32,
    },
    /// A version other than 1, 2 or 3.
    #[error("{}: unknown GGUF version {version} (only versions 2 and 3 are supported)", path.display())]
    UnknownVersion {
        /// The file.
        path: PathBuf,
        /// The version read.
        version: u32,
    },
    /// More tensors or metadata entries than the rest of the file could hold.
    #[error("{}: {count} {what} at offset {offset} cannot fit in the {left} bytes left (each takes at least {min_size})", path.display())]
    TooMany {
        /// The file.
        path: PathBuf,
        /// `tensors` or `metadata entries`.
        what: &'static str,
        /// The count read.
        count: u64,
        /// Where the entries start.
        offset: u64,
        /// The bytes left there.
        left: u64,
        /// The fewest bytes one entry takes.
        min_size: u64,
    },
    /// A string whose length runs past the end of the file.
    #[error("{}: {field} at offset {offset} is {len} bytes long, past the end of the file ({left} bytes left)", path.display())]
    StringTooLong {
        /// The file.
        path: PathBuf,
        /// Where its bytes start.
        offset: u64,
        /// Which string.
        field: String,
        /// The length read.
        len: u64,
        /// The bytes left there.
        left: u64,
    },
    /// A string that is not UTF-8.
    #[error("{}: {field} at offset {offset} is not UTF-8", path.display())]
    NotUtf8 {
        /// The file.
        path: PathBuf,
        /// Where its bytes start.
        offset: u64,
        /// Which string.
        field: String,
    },
    /// An array whose elements could not fit in the rest of the file.
    #[error("{}: key `{key}`: array of {count} {elem} at offset {offset} cannot fit in the {left} bytes left", path.display())]
    ArrayTooLong {
        /// The file.
        path: PathBuf,
        /// The key.
        key: String,
        /// Where its elements start.
        offset: u64,
        /// The element count read.
        count: u64,
        /// The element type.
        elem: &'static str,
        /// The bytes left there.
        left: u64,
    },
    /// Arrays nested deeper than this reader follows.
    #[error("{}: key `{key}`: arrays nested deeper than {max} levels at offset {offset}", path.display())]
    NestedTooDeep {
        /// The file.
        path: PathBuf,
        /// The key.
        key: String,
        /// Where the innermost array starts.
        offset: u64,
        /// The deepest nesting read.
        max: usize,
    },
    /// A metadata value type id GGUF does not define.
    #[error("{}: key `{key}`: unknown value type {type_id} at offset {offset}", path.display())]
    UnknownValueType {
        /// The file.
        path: PathBuf,
        /// The key.
        key: String,
        /// Where the type id is.
        offset: u64,
        /// The id read.
        type_id: u32,
    },
    /// A bool stored as a byte other than 0 or 1.
    #[error("{}: key `{key}`: bool at offset {offset} is {byte}, not 0 or 1", path.display())]
    BadBool {
        /// The file.
        path: PathBuf,
        /// The key.
        key: String,
        /// Where the byte is.
        offset: u64,
        /// The byte.
        byte: u8,
    },
    /// A metadata key stored twice.
    #[error("{}: metadata key `{key}` appears twice (again at offset {offset})", path.display())]
    DuplicateKey {
        /// The file.
        path: PathBuf,
        /// The key.
        key: String,
        /// Where the second one starts.
        offset: u64,
    },
    /// `general.alignment` that is not a nonzero power of two fitting in a u32.
    #[error("{}: `general.alignment` is {found}, not a nonzero power of two", path.display())]
    BadAlignment {
        /// The file.
        path: PathBuf,
        /// The value found, with its type.
        found: String,
    },
    /// A tensor with more than four dimensions.
    #[error("{}: tensor `{tensor}` has {n_dims} dimensions (at most 4)", path.display())]
    TooManyDims {
        /// The file.
        path: PathBuf,
        /// The tensor.
        tensor: String,
        /// The count read.
        n_dims: u32,
    },
    /// A tensor with a dimension of 0, or whose element count overflows.
    #[error("{}: tensor `{tensor}` has invalid dimensions {dims:?} (a zero, or more than 2^63 elements)", path.display())]
    BadDims {
        /// The file.
        path: PathBuf,
        /// The tensor.
        tensor: String,
        /// Its dimensions, innermost first.
        dims: Vec<u64>,
    },
    /// A tensor type id ggml does not define.
    #[error("{}: tensor `{tensor}`: unknown ggml type id {type_id}", path.display())]
    UnknownTensorType {
        /// The file.
        path: PathBuf,
        /// The tensor.
        tensor: String,
        /// The id read.
        type_id: u32,
    },
    /// A tensor whose rows are not whole blocks of its type.
    #[error("{}: tensor `{tensor}`: {ty} rows of {row} values are not whole blocks of {block}", path.display())]
    PartialBlock {
        /// The file.
        path: PathBuf,
        /// The tensor.
        tensor: String,
        /// Its type's name.
        ty: &'static str,
        /// Its first (innermost) dimension.
        row: u64,
        /// Its type's block size in values.
        block: u64,
    },
    /// A tensor name stored twice.
    #[error("{}: tensor `{tensor}` appears twice", path.display())]
    DuplicateTensor {
        /// The file.
        path: PathBuf,
        /// The tensor.
        tensor: String,
    },
    /// A tensor whose data offset is not a multiple of the alignment.
    #[error("{}: tensor `{tensor}`: data offset {offset} is not a multiple of the alignment {alignment}", path.display())]
    Misaligned {
        /// The file.
        path: PathBuf,
        /// The tensor.
        tensor: String,
        /// Its offset in the data section.
        offset: u64,
        /// The file's alignment.
        alignment: u64,
    },
    /// A tensor whose data runs past the end of the file (or whose end overflows).
    #[error("{}: tensor `{tensor}`: data at {start}..{end} runs past the end of the file ({len} bytes)", path.display())]
    DataPastEnd {
        /// The file.
        path: PathBuf,
        /// The tensor.
        tensor: String,
        /// Its first byte in the file.
        start: u128,
        /// One past its last byte.
        end: u128,
        /// The file's length.
        len: u64,
    },
    /// Two tensors whose data overlap.
    #[error("{}: tensors `{first}` (data at {first_start}..{first_end}) and `{second}` (data at {second_start}..{second_end}) overlap", path.display())]
    Overlap {
        /// The file.
        path: PathBuf,
        /// The tensor whose data starts first.
        first: String,
        /// Its first byte.
        first_start: u64,
        /// One past its last byte.
        first_end: u64,
        /// The other tensor.
        second: String,
        /// Its first byte.
        second_start: u64,
        /// One past its last byte.
        second_end: u64,
    },
    /// A tensor the file does not hold.
    #[error("{}: no tensor `{tensor}`", path.display())]
    NoTensor {
        /// The file.
        path: PathBuf,
        /// The name asked for.
        tensor: String,
    },
    /// A tensor of a type this reader cannot dequantize.
    #[error("{}: tensor `{tensor}`: unsupported tensor type {ty} ({type_id})", path.display())]
    UnsupportedType {
        /// The file.
        path: PathBuf,
        /// The tensor.
        tensor: String,
        /// The type's name.
        ty: &'static str,
        /// The type's id.
        type_id: u32,
    },
    /// A metadata key the file does not hold.
    #[error("{}: no metadata key `{key}`", path.display())]
    MissingKey {
        /// The file.
        path: PathBuf,
        /// The key asked for.
        key: String,
    },
    /// A metadata value not of the type asked for (or out of its range).
    #[error("{}: metadata key `{key}` is {found}, not a {wanted}", path.display())]
    WrongType {
        /// The file.
        path: PathBuf,
        /// The key.
        key: String,
        /// The type asked for.
        wanted: &'static str,
        /// The value found, with its type.
        found: String,
    },
    /// A model architecture (`general.architecture`) this compiler does not build from GGUF.
    #[error("{}: architecture `{arch}` is not supported from GGUF (supported: {supported})", path.display())]
    UnsupportedArchitecture {
        /// The file.
        path: PathBuf,
        /// The architecture named.
        arch: String,
        /// The architectures supported, comma-separated.
        supported: String,
    },
    /// A tensor with no Hugging Face counterpart in the architecture's layout.
    #[error("{}: tensor `{tensor}` has no counterpart in a Hugging Face `{arch}` model", path.display())]
    UnmappedTensor {
        /// The file.
        path: PathBuf,
        /// The tensor.
        tensor: String,
        /// The architecture.
        arch: String,
    },
    /// A metadata value the model or tokenizer cannot use.
    #[error("{}: metadata key `{key}`: {reason}", path.display())]
    BadValue {
        /// The file.
        path: PathBuf,
        /// The key.
        key: String,
        /// What is wrong with it, with the values.
        reason: String,
    },
    /// A tensor whose shape does not fit the model the metadata describes.
    #[error("{}: tensor `{tensor}`: {reason}", path.display())]
    BadTensor {
        /// The file.
        path: PathBuf,
        /// The tensor.
        tensor: String,
        /// What is wrong, with the values.
        reason: String,
    },
}
