//! A function's arena: one allocation made once, carved into tensor views by the memory plan.

use super::buffer::{Buffer, StorageKind};
use super::{Tensor, TensorError};
use crate::dtype::DType;
use std::sync::Arc;

/// A zeroed, 64-byte aligned region that planned intermediates are views into.
#[derive(Debug, Clone)]
pub struct Arena {
    buffer: Arc<Buffer>,
}

impl Arena {
    /// Allocates an arena of `size` bytes.
    pub fn new(size: usize) -> Result<Arena, TensorError> {
        let buffer = Buffer::zeroed(size, StorageKind::Arena).ok_or(TensorError::TooLarge {
            shape: vec![size as i64],
            dtype: DType::U8,
        })?;
        Ok(Arena {
            buffer: Arc::new(buffer),
        })
    }

    /// Size in bytes.
    pub fn size(&self) -> usize {
        self.buffer.len()
    }

    /// Address of the first byte.
    pub fn base_ptr(&self) -> *const u8 {
        self.buffer.ptr_at(0)
    }

    /// A row-major view of `shape` starting at byte `offset`; checked to fit in the arena.
    pub fn view(&self, offset: usize, dtype: DType, shape: &[i64]) -> Result<Tensor, TensorError> {
        Tensor::view_of(self.buffer.clone(), offset, dtype, shape)
    }

    /// How many handles (the arena and its live views) share the region.
    pub(crate) fn handles(&self) -> usize {
        Arc::strong_count(&self.buffer)
    }

    /// Whether `t` is a view of this arena.
    pub(crate) fn contains(&self, t: &Tensor) -> bool {
        Arc::ptr_eq(&t.buffer, &self.buffer)
    }
}
