//! The Rust types that view runtime tensors' elements ([`Element`]); the element types
//! themselves are the ABI's ([`DType`]).

use half::{bf16, f16};
pub use oxrelax_abi::dtype::{DType, UnknownDType};

mod sealed {
    pub trait Sealed {}
}

/// A Rust type whose values are exactly the elements of one [`DType`]: the types that typed
/// tensor accessors accept. Sealed: every bit pattern of the bytes must be a valid value.
pub trait Element: sealed::Sealed + Copy + Send + Sync + 'static {
    /// The dtype this Rust type views.
    const DTYPE: DType;
}

macro_rules! elements {
    ($($ty:ty => $dtype:ident),* $(,)?) => {$(
        impl sealed::Sealed for $ty {}
        impl Element for $ty {
            const DTYPE: DType = DType::$dtype;
        }
    )*};
}

elements!(f32 => F32, f16 => F16, bf16 => BF16, i64 => I64, i32 => I32, i8 => I8, u8 => U8);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn element_types_match_their_dtype_sizes() {
        fn size_matches<T: Element>() -> bool {
            std::mem::size_of::<T>() * 8 == T::DTYPE.bits() as usize
        }
        assert!(size_matches::<f32>() && size_matches::<f16>() && size_matches::<bf16>());
        assert!(size_matches::<i64>() && size_matches::<i32>());
        assert!(size_matches::<i8>() && size_matches::<u8>());
    }
}
