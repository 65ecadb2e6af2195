//! Conversions between tensors and `ndarray` arrays (copies; for loading and checking, not
//! for the inference path).

use super::{Tensor, TensorError};
use crate::dtype::{DType, Element};
use half::{bf16, f16, slice::HalfFloatSliceExt, vec::HalfFloatVecExt};
use ndarray::{ArrayBase, ArrayD, Data, Dimension, IxDyn};
use std::borrow::Cow;

/// The extents of an array as a tensor shape.
fn shape_of<S: Data, D: Dimension>(array: &ArrayBase<S, D>) -> Vec<i64> {
    // An ndarray extent never exceeds isize::MAX, so it fits in an i64.
    array.shape().iter().map(|&d| d as i64).collect()
}

/// The elements of `array` in row-major order, borrowed when already laid out that way.
fn row_major<S: Data<Elem = T>, D: Dimension, T: Copy>(array: &ArrayBase<S, D>) -> Cow<'_, [T]> {
    match array.as_slice() {
        Some(slice) => Cow::Borrowed(slice),
        None => Cow::Owned(array.iter().copied().collect()),
    }
}

impl Tensor {
    /// An owned tensor holding a copy of `array` (any layout; stored row-major).
    pub fn from_ndarray<T: Element, S: Data<Elem = T>, D: Dimension>(
        array: &ArrayBase<S, D>,
    ) -> Result<Tensor, TensorError> {
        Tensor::from_slice(&row_major(array), &shape_of(array))
    }

    /// An owned tensor of float `dtype` (f32, f16 or bf16) from f32 values, rounding to
    /// nearest when narrowing.
    pub fn from_ndarray_f32<S: Data<Elem = f32>, D: Dimension>(
        array: &ArrayBase<S, D>,
        dtype: DType,
    ) -> Result<Tensor, TensorError> {
        let values = row_major(array);
        let shape = shape_of(array);
        match dtype {
            DType::F32 => Tensor::from_slice(&values, &shape),
            DType::F16 => Tensor::from_slice(&Vec::<f16>::from_f32_slice(&values), &shape),
            DType::BF16 => Tensor::from_slice(&Vec::<bf16>::from_f32_slice(&values), &shape),
            got => Err(TensorError::NotFloat { got }),
        }
    }

    /// A copy of the elements as an array of `T` (which must match the dtype).
    pub fn to_ndarray<T: Element>(&self) -> Result<ArrayD<T>, TensorError> {
        let values = self.contiguous()?.as_slice::<T>()?.to_vec();
        Ok(self.array_of(values))
    }

    /// A copy of the elements of a float tensor (f32, f16, bf16) widened to f32.
    pub fn to_ndarray_f32(&self) -> Result<ArrayD<f32>, TensorError> {
        let tensor = self.contiguous()?;
        let values = match self.dtype() {
            DType::F32 => tensor.as_slice::<f32>()?.to_vec(),
            DType::F16 => tensor.as_slice::<f16>()?.to_f32_vec(),
            DType::BF16 => tensor.as_slice::<bf16>()?.to_f32_vec(),
            got => return Err(TensorError::NotFloat { got }),
        };
        Ok(self.array_of(values))
    }

    /// `self` if contiguous, else a contiguous copy.
    fn contiguous(&self) -> Result<Cow<'_, Tensor>, TensorError> {
        if self.is_contiguous() {
            Ok(Cow::Borrowed(self))
        } else {
            Ok(Cow::Owned(self.deep_copy()?))
        }
    }

    /// An array with this tensor's shape over row-major `values` (of `numel` elements).
    fn array_of<T>(&self, values: Vec<T>) -> ArrayD<T> {
        let dims: Vec<usize> = self.shape().iter().map(|&d| d as usize).collect();
        ArrayD::from_shape_vec(IxDyn(&dims), values)
            .unwrap_or_else(|_| unreachable!("values has exactly numel elements"))
    }
}
