//! Host buffers for benchmarked kernels: f32, 64-byte aligned, filled deterministically.

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
}

impl HostBuffer {
    /// A buffer of `len` zeros, or the allocation error.
    pub fn zeroed(len: usize) -> Result<Self, TryReserveError> {
        let total = len.saturating_add(PAD);
        let mut data = Vec::new();
        data.try_reserve_exact(total)?;
        data.resize(total, 0.0);
        let start = data.as_ptr().align_offset(ALIGN_BYTES).min(PAD);
        Ok(HostBuffer { data, start, len })
    }

    /// Fills the buffer with pseudo-random values in `[-1, 1)` from `seed` (the same seed
    /// gives the same values).
    pub fn fill_random(&mut self, seed: u64) {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        for value in self.as_mut_slice() {
            // xorshift64*: plenty for benchmark inputs.
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            let bits = state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40;
            *value = bits as f32 / (1u64 << 23) as f32 - 1.0;
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
        self.len * std::mem::size_of::<f32>()
    }
}
