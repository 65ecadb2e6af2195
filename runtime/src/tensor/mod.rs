//! Runtime tensors: a dtype, a shape, strides in elements, and shared byte storage that is
//! owned (64-byte aligned), borrowed (e.g. an mmapped file) or a region of a VM arena.

mod arena;
pub(crate) mod buffer;
mod convert;
mod error;
#[cfg(test)]
mod tests;

pub use arena::Arena;
pub use buffer::{StorageKind, BUFFER_ALIGN, HUGE_PAGES_ENV};
pub use error::TensorError;

use crate::dtype::{DType, Element};
use buffer::Buffer;
use smallvec::SmallVec;
use std::any::Any;
use std::fmt;
use std::sync::Arc;

/// A tensor's extents or strides: inline up to rank 4, so making or cloning a tensor of
/// such a rank does not allocate.
type Dims = SmallVec<[i64; 4]>;

/// An n-dimensional array handle. Cloning is cheap and shares the storage.
#[derive(Clone)]
pub struct Tensor {
    dtype: DType,
    shape: Dims,
    strides: Dims,
    buffer: Arc<Buffer>,
    byte_offset: usize,
}

/// The number of elements of `shape`, checking extents are non-negative.
pub(crate) fn numel_of(shape: &[i64]) -> Result<usize, TensorError> {
    shape.iter().try_fold(1usize, |acc, &d| {
        let d = usize::try_from(d).map_err(|_| TensorError::NegativeExtent {
            shape: shape.to_vec(),
        })?;
        Ok(acc.saturating_mul(d))
    })
}

/// Row-major strides (in elements) of `shape`, innermost first.
fn compact_strides_rev(shape: &[i64]) -> impl Iterator<Item = i64> + '_ {
    let mut next = 1i64;
    shape.iter().rev().map(move |&extent| {
        let stride = next;
        // Wrapping: the product past the outermost axis is never used as a stride.
        next = next.wrapping_mul(extent.max(1));
        stride
    })
}

/// Row-major strides (in elements) of `shape`.
fn compact_strides(shape: &[i64]) -> Dims {
    let mut strides: Dims = compact_strides_rev(shape).collect();
    strides.reverse();
    strides
}

/// Bytes a tensor of `shape` and `dtype` takes (an error for a negative extent, or a size
/// no allocation can have).
pub fn storage_bytes(dtype: DType, shape: &[i64]) -> Result<usize, TensorError> {
    let too_large = || TensorError::TooLarge {
        shape: shape.to_vec(),
        dtype,
    };
    let bytes = dtype
        .storage_bytes(numel_of(shape)?)
        .ok_or_else(too_large)?;
    isize::try_from(bytes).map_err(|_| too_large())?;
    Ok(bytes)
}

impl Tensor {
    /// A view of `shape` at `byte_offset` of `buffer`, row-major; checked to fit.
    pub(crate) fn view_of(
        buffer: Arc<Buffer>,
        byte_offset: usize,
        dtype: DType,
        shape: &[i64],
    ) -> Result<Tensor, TensorError> {
        let end = byte_offset.saturating_add(storage_bytes(dtype, shape)?);
        if end > buffer.len() {
            return Err(TensorError::OutOfRange {
                start: byte_offset as i64,
                end: end as i64,
                available: buffer.len() as i64,
            });
        }
        Ok(Tensor {
            dtype,
            strides: compact_strides(shape),
            shape: Dims::from_slice(shape),
            buffer,
            byte_offset,
        })
    }

    /// A new zero-filled tensor with owned storage.
    pub fn zeros(dtype: DType, shape: &[i64]) -> Result<Tensor, TensorError> {
        let bytes = storage_bytes(dtype, shape)?;
        let buffer = Buffer::zeroed(bytes, StorageKind::Owned).ok_or(TensorError::TooLarge {
            shape: shape.to_vec(),
            dtype,
        })?;
        Tensor::view_of(Arc::new(buffer), 0, dtype, shape)
    }

    /// A new owned tensor holding a copy of `data` (row-major) with `shape`.
    pub fn from_slice<T: Element>(data: &[T], shape: &[i64]) -> Result<Tensor, TensorError> {
        let numel = numel_of(shape)?;
        if data.len() != numel {
            return Err(TensorError::DataLength {
                shape: shape.to_vec(),
                dtype: T::DTYPE,
                expected: numel,
                got: data.len(),
                unit: "elements",
            });
        }
        let mut tensor = Tensor::zeros(T::DTYPE, shape)?;
        tensor.as_mut_slice::<T>()?.copy_from_slice(data);
        Ok(tensor)
    }

    /// A new owned tensor holding a copy of raw `bytes` (any dtype, including u4 and bool).
    pub fn from_bytes(dtype: DType, shape: &[i64], bytes: &[u8]) -> Result<Tensor, TensorError> {
        let expected = storage_bytes(dtype, shape)?;
        if bytes.len() != expected {
            return Err(TensorError::DataLength {
                shape: shape.to_vec(),
                dtype,
                expected,
                got: bytes.len(),
                unit: "bytes",
            });
        }
        let mut tensor = Tensor::zeros(dtype, shape)?;
        tensor.as_mut_bytes()?.copy_from_slice(bytes);
        Ok(tensor)
    }

    /// A read-only tensor over `len` bytes at `ptr` that `owner` keeps alive (e.g. a region
    /// of an mmapped weight file). `len` must be exactly the tensor's byte size.
    ///
    /// # Safety
    /// `ptr` must be valid for reads of `len` bytes while `owner` is alive, and the memory
    /// must not be written by anyone during that time.
    pub unsafe fn from_borrowed(
        ptr: *const u8,
        len: usize,
        owner: Arc<dyn Any + Send + Sync>,
        dtype: DType,
        shape: &[i64],
    ) -> Result<Tensor, TensorError> {
        let expected = storage_bytes(dtype, shape)?;
        if len != expected {
            return Err(TensorError::DataLength {
                shape: shape.to_vec(),
                dtype,
                expected,
                got: len,
                unit: "bytes",
            });
        }
        // SAFETY: forwarded from this function's contract.
        let buffer =
            unsafe { Buffer::borrowed(ptr, len, owner) }.ok_or(TensorError::NullPointer)?;
        Tensor::view_of(Arc::new(buffer), 0, dtype, shape)
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The extents, outermost first.
    pub fn shape(&self) -> &[i64] {
        &self.shape
    }

    /// The strides in elements, outermost first.
    pub fn strides(&self) -> &[i64] {
        &self.strides
    }

    /// The rank.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// The number of elements.
    pub fn numel(&self) -> usize {
        // Checked at construction: extents are non-negative and the product fits.
        self.shape.iter().map(|&d| d as usize).product()
    }

    /// The bytes the elements take when stored contiguously.
    pub fn nbytes(&self) -> usize {
        self.dtype.storage_bytes(self.numel()).unwrap_or(usize::MAX)
    }

    /// Where the storage lives.
    pub fn storage_kind(&self) -> StorageKind {
        self.buffer.kind()
    }

    /// For borrowed storage, the owner given to [`Tensor::from_borrowed`].
    pub fn borrowed_owner(&self) -> Option<&(dyn Any + Send + Sync)> {
        self.buffer.owner()
    }

    /// Whether the elements are laid out row-major without gaps.
    pub fn is_contiguous(&self) -> bool {
        self.numel() == 0
            || self
                .strides
                .iter()
                .rev()
                .copied()
                .eq(compact_strides_rev(&self.shape))
    }

    /// The same elements as `shape` (row-major), sharing the storage: no copy. The tensor
    /// must be contiguous and `shape` must hold as many elements.
    pub fn reshaped(&self, shape: &[i64]) -> Result<Tensor, TensorError> {
        self.check_contiguous()?;
        if numel_of(shape)? != self.numel() {
            return Err(TensorError::ReshapeCount {
                from: self.shape.to_vec(),
                to: shape.to_vec(),
            });
        }
        Tensor::view_of(self.buffer.clone(), self.byte_offset, self.dtype, shape)
    }

    /// Address of the first element (what a kernel receives for this tensor).
    pub fn data_ptr(&self) -> *mut u8 {
        self.buffer.ptr_at(self.byte_offset)
    }

    fn check_contiguous(&self) -> Result<(), TensorError> {
        if self.is_contiguous() {
            Ok(())
        } else {
            Err(TensorError::NotContiguous {
                shape: self.shape.to_vec(),
                strides: self.strides.to_vec(),
            })
        }
    }

    fn check_element<T: Element>(&self) -> Result<(), TensorError> {
        if self.dtype != T::DTYPE {
            return Err(TensorError::DtypeMismatch {
                expected: T::DTYPE,
                got: self.dtype,
            });
        }
        self.check_contiguous()?;
        let addr = self.data_ptr() as usize;
        let align = std::mem::align_of::<T>();
        if !addr.is_multiple_of(align) {
            return Err(TensorError::Misaligned {
                dtype: self.dtype,
                addr,
                align,
            });
        }
        Ok(())
    }

    /// The raw bytes of a contiguous tensor.
    pub fn as_bytes(&self) -> Result<&[u8], TensorError> {
        self.check_contiguous()?;
        // SAFETY: a contiguous view covers `nbytes` bytes from `data_ptr`, inside the buffer
        // (checked at construction); the buffer lives as long as `self`. Writers never touch
        // bytes a live tensor can read through `&self` (see `Buffer`).
        Ok(unsafe { std::slice::from_raw_parts(self.data_ptr(), self.nbytes()) })
    }

    /// The elements of a contiguous tensor of `T`'s dtype.
    pub fn as_slice<T: Element>(&self) -> Result<&[T], TensorError> {
        self.check_element::<T>()?;
        // SAFETY: dtype, contiguity and alignment are checked; the view covers `numel`
        // elements of T inside the live buffer, and every bit pattern is a valid T.
        Ok(unsafe { std::slice::from_raw_parts(self.data_ptr().cast::<T>(), self.numel()) })
    }

    /// Checks that `self` holds the only reference to writable storage.
    fn check_unique(&mut self) -> Result<(), TensorError> {
        let kind = self.buffer.kind();
        if kind == StorageKind::Borrowed {
            return Err(TensorError::ReadOnly);
        }
        match Arc::get_mut(&mut self.buffer) {
            Some(_) => Ok(()),
            None => Err(TensorError::Shared { kind }),
        }
    }

    /// The raw bytes of a contiguous tensor that holds the only reference to its storage.
    pub fn as_mut_bytes(&mut self) -> Result<&mut [u8], TensorError> {
        self.check_contiguous()?;
        self.check_unique()?;
        // SAFETY: as in `as_bytes`, and `self` is the only handle to the buffer, so the
        // mutable borrow of `self` excludes every other access.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.data_ptr(), self.nbytes()) })
    }

    /// The elements of a contiguous tensor that holds the only reference to its storage.
    pub fn as_mut_slice<T: Element>(&mut self) -> Result<&mut [T], TensorError> {
        self.check_element::<T>()?;
        self.check_unique()?;
        // SAFETY: as in `as_slice`, and `self` is the only handle to the buffer.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.data_ptr().cast::<T>(), self.numel()) })
    }

    /// A view of `len` entries of `axis` starting at `start` (shares the storage; may be
    /// strided). Sub-byte views must stay contiguous and start on a whole byte.
    pub fn narrow(&self, axis: usize, start: i64, len: i64) -> Result<Tensor, TensorError> {
        let rank = self.ndim();
        let extent = *self
            .shape
            .get(axis)
            .ok_or(TensorError::AxisOutOfRange { axis, rank })?;
        if start < 0 || len < 0 || start.saturating_add(len) > extent {
            return Err(TensorError::OutOfRange {
                start,
                end: start.saturating_add(len),
                available: extent,
            });
        }
        let mut view = self.clone();
        view.shape[axis] = len;
        let elem_offset = start * self.strides[axis];
        let bits = elem_offset * i64::from(self.dtype.bits());
        if self.dtype.is_sub_byte() && (bits % 8 != 0 || !view.is_contiguous()) {
            return Err(TensorError::SubByteView { dtype: self.dtype });
        }
        view.byte_offset += (bits / 8) as usize;
        Ok(view)
    }

    /// A contiguous copy with owned storage (gathers strided views).
    pub fn deep_copy(&self) -> Result<Tensor, TensorError> {
        let mut copy = Tensor::zeros(self.dtype, &self.shape)?;
        if self.is_contiguous() {
            copy.as_mut_bytes()?.copy_from_slice(self.as_bytes()?);
            return Ok(copy);
        }
        // Strided views are never sub-byte (see `narrow`), so elements are whole bytes.
        let size = (self.dtype.bits() / 8) as usize;
        let src = self.data_ptr();
        let dst = copy.as_mut_bytes()?;
        for (i, offset) in strided_offsets(&self.shape, &self.strides).enumerate() {
            // SAFETY: every multi-index is inside the view, so `offset` elements from the
            // first element stays inside the buffer (checked by `view_of` and `narrow`).
            let elem =
                unsafe { std::slice::from_raw_parts(src.offset(offset * size as isize), size) };
            dst[i * size..(i + 1) * size].copy_from_slice(elem);
        }
        Ok(copy)
    }
}

/// Element offsets (relative to the first element) of every multi-index, row-major.
fn strided_offsets<'a>(shape: &'a [i64], strides: &'a [i64]) -> impl Iterator<Item = isize> + 'a {
    let numel: i64 = shape.iter().product();
    (0..numel.max(0)).map(move |mut linear| {
        let mut offset = 0i64;
        for (&extent, &stride) in shape.iter().zip(strides).rev() {
            offset += (linear % extent) * stride;
            linear /= extent;
        }
        offset as isize
    })
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Tensor({:?} {}, {:?})",
            self.shape,
            self.dtype,
            self.storage_kind()
        )
    }
}
