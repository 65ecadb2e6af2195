//! Host buffers for benchmarked kernels: f32 slots, 64-byte aligned, filled
//! deterministically; a buffer of another dtype is sized in bytes and filled through them.

use std::collections::TryReserveError;

/// Alignment of every buffer's first element, in bytes (a cache line).
const ALIGN_BYTES: usize = 64;

/// Extra elements allocated so that an aligned start always exists.
const PAD: usize = ALIGN_BYTES / std::mem::size_of::<f32>() - 1;

/// A dense f32 buffer whose first element is [`ALIGN_BYTES`]-aligned.
#[derive(Debug)]
pub struct HostBuffer {
    data: Vec<f32>,
    start: usize,
    len: usize,
    /// Bytes in use (`4 * len`, or fewer for a buffer sized in bytes).
    bytes: usize,
}

impl HostBuffer {
    /// A buffer of `len` zeros, or the allocation error.
    pub fn zeroed(len: usize) -> Result<Self, TryReserveError> {
        let total = len.saturating_add(PAD);
        let mut data = Vec::new();
        data.try_reserve_exact(total)?;
        data.resize(total, 0.0);
        let start = data.as_ptr().align_offset(ALIGN_BYTES).min(PAD);
        let bytes = len * std::mem::size_of::<f32>();
        Ok(HostBuffer {
            data,
            start,
            len,
            bytes,
        })
    }

    /// A buffer of `bytes` zero bytes (in whole f32 slots), or the allocation error.
    pub fn zeroed_bytes(bytes: usize) -> Result<Self, TryReserveError> {
        let mut buffer = HostBuffer::zeroed(bytes.div_ceil(std::mem::size_of::<f32>()))?;
        buffer.bytes = bytes;
        Ok(buffer)
    }

    /// Fills the buffer with pseudo-random values in `[-1, 1)` from `seed` (the same seed
    /// gives the same values).
    pub fn fill_random(&mut self, seed: u64) {
        for (slot, value) in self.as_mut_slice().iter_mut().zip(random_values(seed)) {
            *slot = value;
        }
    }

    /// Fills the buffer with pseudo-random f16 values in `[-1, 1)` from `seed`.
    pub fn fill_random_f16(&mut self, seed: u64) {
        let values = random_values(seed);
        for (slot, pair) in self.as_mut_slice().iter_mut().zip(pairs(values)) {
            let [low, high] = pair.map(|v| u32::from(half::f16::from_f32(v).to_bits()));
            *slot = f32::from_bits(low | high << 16);
        }
    }

    /// The elements.
    pub fn as_slice(&self) -> &[f32] {
        &self.data[self.start..self.start + self.len]
    }

    /// The elements, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [f32] {
        &mut self.data[self.start..self.start + self.len]
    }

    /// Pointer to the first element, as the kernel ABI takes it.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.as_mut_slice().as_mut_ptr().cast()
    }

    /// Size in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// Pseudo-random values in `[-1, 1)` from `seed` (xorshift64*: plenty for benchmark
/// inputs).
fn random_values(seed: u64) -> impl Iterator<Item = f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    std::iter::repeat_with(move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        let bits = state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40;
        bits as f32 / (1u64 << 23) as f32 - 1.0
    })
}

/// `values` two at a time.
fn pairs(mut values: impl Iterator<Item = f32>) -> impl Iterator<Item = [f32; 2]> {
    std::iter::from_fn(move || Some([values.next()?, values.next()?]))
}
