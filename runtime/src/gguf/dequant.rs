//! Scalar dequantizers, one block at a time, following ggml's block layouts and the
//! arithmetic of its reference `dequantize_row_*` functions (f32 throughout, products
//! and sums in the same order, so results match ggml's bit for bit).

use half::{bf16, f16 as half16};

/// Dequantizes one block (`block_bytes` bytes) into its `block_elems` values.
pub(super) type BlockFn = fn(&[u8], &mut [f32]);

/// The f16 at `bytes[at..at + 2]`, widened.
fn half_at(bytes: &[u8], at: usize) -> f32 {
    half16::from_le_bytes([bytes[at], bytes[at + 1]]).to_f32()
}

/// F32: one little-endian value.
pub(super) fn f32(block: &[u8], out: &mut [f32]) {
    out[0] = f32::from_le_bytes([block[0], block[1], block[2], block[3]]);
}

/// F16: one little-endian half, widened exactly.
pub(super) fn f16(block: &[u8], out: &mut [f32]) {
    out[0] = half_at(block, 0);
}

/// BF16: one little-endian bfloat16, widened exactly.
pub(super) fn bf16(block: &[u8], out: &mut [f32]) {
    out[0] = bf16::from_le_bytes([block[0], block[1]]).to_f32();
}

/// Q4_0: scale `d` (f16), 16 bytes of 4-bit values; low nibbles are values 0..16, high
/// nibbles 16..32; value = (q - 8) * d.
pub(super) fn q4_0(block: &[u8], out: &mut [f32]) {
    let d = half_at(block, 0);
    let qs = &block[2..18];
    for j in 0..16 {
        out[j] = ((qs[j] & 0x0F) as i32 - 8) as f32 * d;
        out[j + 16] = ((qs[j] >> 4) as i32 - 8) as f32 * d;
    }
}

/// Q4_1: scale `d` and minimum `m` (f16), 16 bytes of 4-bit values; value = q * d + m.
pub(super) fn q4_1(block: &[u8], out: &mut [f32]) {
    let (d, m) = (half_at(block, 0), half_at(block, 2));
    let qs = &block[4..20];
    for j in 0..16 {
        out[j] = (qs[j] & 0x0F) as f32 * d + m;
        out[j + 16] = (qs[j] >> 4) as f32 * d + m;
    }
}

/// The 5-bit values of a Q5 block: low nibbles in `qs`, fifth bits in the u32 `qh` (bit
/// j for value j).
fn five_bit(qh: u32, qs: &[u8], j: usize) -> (u8, u8) {
    let high0 = ((qh >> j) << 4) & 0x10;
    let high1 = (qh >> (j + 12)) & 0x10;
    ((qs[j] & 0x0F) | high0 as u8, (qs[j] >> 4) | high1 as u8)
}

/// Q5_0: scale `d` (f16), fifth bits (u32), 16 bytes of low nibbles; value = (q - 16) * d.
pub(super) fn q5_0(block: &[u8], out: &mut [f32]) {
    let d = half_at(block, 0);
    let qh = u32::from_le_bytes([block[2], block[3], block[4], block[5]]);
    let qs = &block[6..22];
    for j in 0..16 {
        let (q0, q1) = five_bit(qh, qs, j);
        out[j] = (q0 as i32 - 16) as f32 * d;
        out[j + 16] = (q1 as i32 - 16) as f32 * d;
    }
}

/// Q5_1: scale `d` and minimum `m` (f16), fifth bits (u32), 16 bytes of low nibbles;
/// value = q * d + m.
pub(super) fn q5_1(block: &[u8], out: &mut [f32]) {
    let (d, m) = (half_at(block, 0), half_at(block, 2));
    let qh = u32::from_le_bytes([block[4], block[5], block[6], block[7]]);
    let qs = &block[8..24];
    for j in 0..16 {
        let (q0, q1) = five_bit(qh, qs, j);
        out[j] = q0 as f32 * d + m;
        out[j + 16] = q1 as f32 * d + m;
    }
}

/// Q8_0: scale `d` (f16), 32 signed bytes; value = q * d.
pub(super) fn q8_0(block: &[u8], out: &mut [f32]) {
    let d = half_at(block, 0);
    for (o, &q) in out.iter_mut().zip(&block[2..34]) {
        *o = q as i8 as f32 * d;
    }
}

/// Scale and minimum `j` (0..8) of a Q4_K/Q5_K super-block, six bits each, packed in
/// 12 bytes: 0..4 in the low six bits of bytes 0..4 and 4..8; 4..8 in the nibbles of
/// bytes 8..12 with their top two bits in the top bits of bytes 0..8.
fn scale_min_k4(j: usize, scales: &[u8]) -> (u8, u8) {
    if j < 4 {
        (scales[j] & 63, scales[j + 4] & 63)
    } else {
        (
            (scales[j + 4] & 0x0F) | ((scales[j - 4] >> 6) << 4),
            (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4),
        )
    }
}

/// Q4_K: super-block of 256 in 8 sub-blocks of 32: `d`, `dmin` (f16), 12 bytes of
/// six-bit scales and minimums, 128 bytes of nibbles (each 32 bytes: low nibbles are one
/// sub-block, high nibbles the next); value = d * scale * q - dmin * min.
pub(super) fn q4_k(block: &[u8], out: &mut [f32]) {
    k_quant(block, None, &block[16..144], out);
}

/// Q5_K: Q4_K's layout plus 32 bytes of fifth bits after the scales (bit `i` of byte
/// `l` is the fifth bit of value `l` of sub-block `i`); value = d * scale * q - dmin * min.
pub(super) fn q5_k(block: &[u8], out: &mut [f32]) {
    k_quant(block, Some(&block[16..48]), &block[48..176], out);
}

/// Q4_K and Q5_K: nibbles `qs`, with the fifth bits `qh` for Q5_K.
fn k_quant(block: &[u8], qh: Option<&[u8]>, qs: &[u8], out: &mut [f32]) {
    let (d, dmin) = (half_at(block, 0), half_at(block, 2));
    let scales = &block[4..16];
    let high = |l: usize, sub: usize| match qh {
        Some(qh) if qh[l] & (1u8 << sub) != 0 => 16,
        _ => 0,
    };
    for chunk in 0..4 {
        let q = &qs[32 * chunk..32 * chunk + 32];
        let y = &mut out[64 * chunk..64 * chunk + 64];
        let (sc0, m0) = scale_min_k4(2 * chunk, scales);
        let (sc1, m1) = scale_min_k4(2 * chunk + 1, scales);
        let (d0, min0) = (d * sc0 as f32, dmin * m0 as f32);
        let (d1, min1) = (d * sc1 as f32, dmin * m1 as f32);
        for l in 0..32 {
            y[l] = d0 * ((q[l] & 0x0F) + high(l, 2 * chunk)) as f32 - min0;
            y[32 + l] = d1 * ((q[l] >> 4) + high(l, 2 * chunk + 1)) as f32 - min1;
        }
    }
}

/// Q6_K: super-block of 256 in 16 sub-blocks of 16: 128 bytes of low nibbles, 64 bytes
/// of high two-bit pairs, 16 signed 8-bit scales, `d` (f16); value = d * scale * (q - 32).
pub(super) fn q6_k(block: &[u8], out: &mut [f32]) {
    let d = half_at(block, 208);
    for half in 0..2 {
        let ql = &block[64 * half..64 * half + 64];
        let qh = &block[128 + 32 * half..128 + 32 * half + 32];
        let sc = &block[192 + 8 * half..192 + 8 * half + 8];
        let y = &mut out[128 * half..128 * half + 128];
        for l in 0..32 {
            let is = l / 16;
            let q = [
                (ql[l] & 0x0F) | ((qh[l] & 3) << 4),
                (ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4),
                (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4),
                (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4),
            ];
            for (k, &qk) in q.iter().enumerate() {
                let scale = sc[is + 2 * k] as i8 as f32;
                y[l + 32 * k] = d * scale * (qk as i32 - 32) as f32;
            }
        }
    }
}
