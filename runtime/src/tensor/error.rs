//! Errors of tensor construction, views and typed access.

use crate::dtype::DType;

/// A tensor operation that cannot be done on this tensor or with these arguments.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TensorError {
    /// A shape with a negative extent.
    #[error("invalid shape {shape:?}: extents must be >= 0")]
    NegativeExtent {
        /// The offending shape.
        shape: Vec<i64>,
    },
    /// A shape whose byte size does not fit in memory.
    #[error("shape {shape:?} of {dtype} is too large to allocate")]
    TooLarge {
        /// The offending shape.
        shape: Vec<i64>,
        /// The element type.
        dtype: DType,
    },
    /// Typed access with a Rust type of another dtype.
    #[error("tensor of dtype {got} accessed as {expected}")]
    DtypeMismatch {
        /// The dtype the access wanted.
        expected: DType,
        /// The tensor's dtype.
        got: DType,
    },
    /// A float-only conversion on a tensor of another dtype.
    #[error("expected a float dtype (f32, f16, bf16), got {got}")]
    NotFloat {
        /// The dtype given.
        got: DType,
    },
    /// Data whose length does not match the shape.
    #[error("shape {shape:?} of {dtype} needs {expected} {unit}, got {got}")]
    DataLength {
        /// The shape.
        shape: Vec<i64>,
        /// The element type.
        dtype: DType,
        /// Elements or bytes the shape needs.
        expected: usize,
        /// Elements or bytes given.
        got: usize,
        /// `"elements"` or `"bytes"`.
        unit: &'static str,
    },
    /// A write past a buffer's end, or into memory the buffer only borrows.
    #[error("cannot write {len} bytes at byte {offset} of a {capacity}-byte {kind} buffer")]
    WriteOutOfBounds {
        /// Where the write starts.
        offset: usize,
        /// Bytes to write.
        len: usize,
        /// The buffer's length in bytes.
        capacity: usize,
        /// `"owned"` or `"borrowed"`.
        kind: &'static str,
    },
    /// A reshape to a shape with another number of elements.
    #[error("cannot view shape {from:?} as {to:?}: the element counts differ")]
    ReshapeCount {
        /// The tensor's shape.
        from: Vec<i64>,
        /// The shape asked for.
        to: Vec<i64>,
    },
    /// Slice access on a strided (non-row-major) view.
    #[error("tensor with shape {shape:?} and strides {strides:?} is not contiguous")]
    NotContiguous {
        /// The view's shape.
        shape: Vec<i64>,
        /// The view's strides, in elements.
        strides: Vec<i64>,
    },
    /// Typed access to memory that is not aligned for the element type.
    #[error("{dtype} data at address {addr:#x} is not aligned to {align} bytes")]
    Misaligned {
        /// The element type.
        dtype: DType,
        /// The data address.
        addr: usize,
        /// The alignment needed.
        align: usize,
    },
    /// Mutable access to storage other tensors (views, the KV cache, the VM arena) share.
    #[error("cannot mutate a tensor whose {kind:?} storage is shared with other tensors")]
    Shared {
        /// Where the storage lives.
        kind: crate::tensor::StorageKind,
    },
    /// Mutable access to borrowed (e.g. mmapped) memory.
    #[error("cannot mutate borrowed (read-only) tensor memory")]
    ReadOnly,
    /// A null pointer given for borrowed memory.
    #[error("borrowed tensor memory must not be null")]
    NullPointer,
    /// An axis past the tensor's rank.
    #[error("axis {axis} out of range for a tensor of rank {rank}")]
    AxisOutOfRange {
        /// The axis asked for.
        axis: usize,
        /// The tensor's rank.
        rank: usize,
    },
    /// A view that reaches past its storage or its parent's extent.
    #[error("view [{start}, {end}) is out of range (available: {available})")]
    OutOfRange {
        /// First element/byte of the view.
        start: i64,
        /// One past the last element/byte of the view.
        end: i64,
        /// Extent or bytes available.
        available: i64,
    },
    /// A sub-byte (u4) view that would not start on a byte or not be contiguous.
    #[error("a {dtype} view must be contiguous and start on a whole byte")]
    SubByteView {
        /// The element type.
        dtype: DType,
    },
}
