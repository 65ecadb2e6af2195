//! The test block: reshape, RMSNorm, a SiLU MLP of two 1x1 convolutions, a residual add,
//! a per-channel scale and a transpose; built with f32 or quantized tensors, and its
//! scalar reference.

use super::builder::Builder;
use crate::qnn::codes::{tensor_type, QnnDataType};
use crate::qnn::net::*;
use rand::rngs::StdRng;
use rand::Rng;
use std::collections::BTreeMap;

/// Tokens.
pub const T: usize = 5;
/// Model width.
pub const C: usize = 37;
/// Hidden width.
pub const H: usize = 48;
/// LPBQ block size.
pub const BLOCK: usize = 16;
const EPS: f32 = 1e-5;

/// Min and max of each tensor, from a Float-mode run.
pub type Ranges = BTreeMap<String, (f32, f32)>;

/// The block's parameters (filters HWIO: `[cin, cout]` row-major).
pub struct Params {
    pub gamma: Vec<f32>,
    pub beta: Vec<f32>,
    pub w1: Vec<f32>,
    pub b1: Vec<f32>,
    pub w2: Vec<f32>,
    pub b2: Vec<f32>,
    pub scale: Vec<f32>,
}

pub fn uniform(rng: &mut StdRng, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    (0..n).map(|_| rng.gen_range(lo..hi)).collect()
}

impl Params {
    /// Random parameters.
    pub fn random(rng: &mut StdRng) -> Params {
        let (a1, a2) = (1.0 / (C as f32).sqrt(), 1.0 / (H as f32).sqrt());
        Params {
            gamma: uniform(rng, C, 0.5, 1.5),
            beta: uniform(rng, C, -0.1, 0.1),
            w1: uniform(rng, C * H, -a1, a1),
            b1: uniform(rng, H, -0.1, 0.1),
            w2: uniform(rng, H * C, -a2, a2),
            b2: uniform(rng, C, -0.1, 0.1),
            scale: uniform(rng, C, 0.5, 1.5),
        }
    }
}

/// The A16 encoding of `[min, max]` (widened to hold 0).
pub fn a16((min, max): (f32, f32)) -> ScaleOffset {
    let (min, max) = (min.min(0.0), max.max(0.0));
    let scale = ((max - min) / 65535.0).max(1e-9);
    ScaleOffset {
        scale,
        offset: (min / scale).round() as i32,
    }
}

/// `data` as a static UFIXED_16 tensor with its min/max encoding.
fn constant_a16(b: &mut Builder, name: &str, data: &[f32]) {
    let so = a16(min_max(data));
    let q = |&x: &f32| ((x / so.scale).round() as i64 - so.offset as i64).clamp(0, 65535) as u16;
    let bytes = data.iter().map(q).flat_map(u16::to_le_bytes).collect();
    let quant = QuantParams::scale_offset(so.scale, so.offset);
    b.constant(name, QnnDataType::UFixed16, quant, &[data.len()], bytes);
}

/// The smallest and largest of `data`.
pub fn min_max(data: &[f32]) -> (f32, f32) {
    let min = data.iter().copied().fold(f32::INFINITY, f32::min);
    (min, data.iter().copied().fold(f32::NEG_INFINITY, f32::max))
}

/// A `[1, 1, cin, cout]` filter as SFIXED_4 LPBQ (blocks of [`BLOCK`] along `cin`,
/// block scales in 1..=16): its encoding, bytes and per-channel scales.
pub fn lpbq(w: &[f32], cin: usize, cout: usize) -> (QuantParams, Vec<u8>, Vec<f32>) {
    let blocks = cin.div_ceil(BLOCK);
    let at = |k: usize, c: usize| w[k * cout + c].abs();
    let channel: Vec<f32> = (0..cout)
        .map(|c| (0..cin).map(|k| at(k, c)).fold(1e-9, f32::max) / (7.0 * 16.0))
        .collect();
    let mut block_scales = Vec::with_capacity(cout * blocks);
    for (c, s) in channel.iter().enumerate() {
        for b in 0..blocks {
            let top = (b * BLOCK..cin.min((b + 1) * BLOCK))
                .map(|k| at(k, c))
                .fold(0.0, f32::max);
            block_scales.push((top / (7.0 * s)).ceil().clamp(1.0, 16.0) as u16);
        }
    }
    let bytes = (0..cin * cout)
        .map(|i| {
            let (k, c) = (i / cout, i % cout);
            let step = channel[c] * block_scales[c * blocks + k / BLOCK] as f32;
            (w[i] / step).round().clamp(-8.0, 7.0) as i8 as u8
        })
        .collect();
    let quant = QuantParams::blockwise_expansion(BlockwiseExpansion {
        axis: 3,
        block_axis: 2,
        block_size: BLOCK as u32,
        num_blocks_per_axis: blocks as u32,
        block_scale_bitwidth: 4,
        scale_offsets: channel
            .iter()
            .map(|&scale| ScaleOffset { scale, offset: 0 })
            .collect(),
        block_scales,
    });
    (quant, bytes, channel)
}

/// A 1x1 convolution's filter and bias: f32, or LPBQ weights and an SFIXED_32 bias in
/// units of `in_scale` times each channel's scale.
pub fn conv_constants(
    b: &mut Builder,
    name: &str,
    w: &[f32],
    bias: &[f32],
    cin: usize,
    in_scale: Option<f32>,
) {
    let cout = bias.len();
    let (wn, bn) = (format!("{name}.weight"), format!("{name}.bias"));
    let Some(in_scale) = in_scale else {
        b.constant_f32(&wn, &[1, 1, cin, cout], w);
        b.constant_f32(&bn, &[cout], bias);
        return;
    };
    let (quant, bytes, channel) = lpbq(w, cin, cout);
    b.constant(&wn, QnnDataType::SFixed4, quant, &[1, 1, cin, cout], bytes);
    let scales: Vec<ScaleOffset> = channel
        .iter()
        .map(|&s| ScaleOffset {
            scale: in_scale * s,
            offset: 0,
        })
        .collect();
    let q = |(x, so): (&f32, &ScaleOffset)| (x / so.scale).round() as i32;
    let bytes = bias
        .iter()
        .zip(&scales)
        .map(q)
        .flat_map(i32::to_le_bytes)
        .collect();
    let quant = QuantParams::axis_scale_offset(0, scales);
    b.constant(&bn, QnnDataType::SFixed32, quant, &[cout], bytes);
}

/// The block, f32 throughout (`ranges` None) or quantized with A16 activations whose
/// encodings come from `ranges`.
pub fn block(p: &Params, ranges: Option<&Ranges>) -> (NetFile, BTreeMap<String, Vec<u8>>) {
    let mut b = Builder::default();
    let enc = |name: &str| ranges.map(|r| a16(r.get(name).copied().unwrap_or((0.0, 1.0))));
    let (w, r, n) = (
        tensor_type::APP_WRITE,
        tensor_type::APP_READ,
        tensor_type::NATIVE,
    );
    let activations: [(&str, u32, &[usize]); 10] = [
        ("x", w, &[1, T, C]),
        ("x4", n, &[1, 1, T, C]),
        ("n", n, &[1, 1, T, C]),
        ("h", n, &[1, 1, T, H]),
        ("s", n, &[1, 1, T, H]),
        ("g", n, &[1, 1, T, H]),
        ("y", n, &[1, 1, T, C]),
        ("res", n, &[1, 1, T, C]),
        ("m", n, &[1, 1, T, C]),
        ("out", r, &[1, 1, C, T]),
    ];
    for (name, kind, dims) in activations {
        b.activation(name, kind, dims, enc(name));
    }
    for (name, data) in [("gamma", &p.gamma), ("beta", &p.beta), ("scale", &p.scale)] {
        match ranges {
            Some(_) => constant_a16(&mut b, name, data),
            None => b.constant_f32(name, &[data.len()], data),
        }
    }
    conv_constants(&mut b, "up", &p.w1, &p.b1, C, enc("n").map(|so| so.scale));
    conv_constants(&mut b, "down", &p.w2, &p.b2, H, enc("g").map(|so| so.scale));
    let f32_eps = [("epsilon", QnnDataType::Float32, EPS as f64)];
    b.node("reshape", "Reshape", &["x"], "x4", &[], &[]);
    b.node(
        "norm",
        "RmsNorm",
        &["x4", "gamma", "beta"],
        "n",
        &[("axes", vec![3.0])],
        &f32_eps,
    );
    b.node(
        "up",
        "Conv2d",
        &["n", "up.weight", "up.bias"],
        "h",
        &conv_params(1),
        &[],
    );
    b.node("sigmoid", "Sigmoid", &["h"], "s", &[], &[]);
    b.node("silu", "ElementWiseMultiply", &["h", "s"], "g", &[], &[]);
    b.node(
        "down",
        "Conv2d",
        &["g", "down.weight", "down.bias"],
        "y",
        &conv_params(1),
        &[],
    );
    b.node("residual", "ElementWiseAdd", &["y", "x4"], "res", &[], &[]);
    b.node(
        "scale",
        "ElementWiseMultiply",
        &["res", "scale"],
        "m",
        &[],
        &[],
    );
    b.node(
        "transpose",
        "Transpose",
        &["m"],
        "out",
        &[("perm", vec![0.0, 1.0, 3.0, 2.0])],
        &[],
    );
    b.finish("block")
}

/// A Conv2d's tensor parameters with stride `stride`.
pub fn conv_params(stride: usize) -> Vec<(&'static str, Vec<f64>)> {
    vec![
        ("stride", vec![stride as f64; 2]),
        ("pad_amount", vec![0.0; 4]),
        ("dilation", vec![1.0; 2]),
    ]
}

/// The block computed with scalar f64 loops: `[C, T]`.
pub fn reference(p: &Params, x: &[f32]) -> Vec<f32> {
    let mut out = vec![0.0; C * T];
    let sigmoid = |v: f64| 1.0 / (1.0 + (-v).exp());
    for t in 0..T {
        let row: Vec<f64> = x[t * C..(t + 1) * C].iter().map(|&v| v as f64).collect();
        let ms = row.iter().map(|v| v * v).sum::<f64>() / C as f64;
        let inv = 1.0 / (ms + EPS as f64).sqrt();
        let n: Vec<f64> = (0..C)
            .map(|k| row[k] * inv * p.gamma[k] as f64 + p.beta[k] as f64)
            .collect();
        let h: Vec<f64> = (0..H)
            .map(|j| (0..C).map(|k| n[k] * p.w1[k * H + j] as f64).sum::<f64>() + p.b1[j] as f64)
            .collect();
        let g: Vec<f64> = h.iter().map(|&v| v * sigmoid(v)).collect();
        for c in 0..C {
            let y = (0..H).map(|j| g[j] * p.w2[j * C + c] as f64).sum::<f64>() + p.b2[c] as f64;
            out[c * T + t] = ((y + row[c]) * p.scale[c] as f64) as f32;
        }
    }
    out
}

/// Random inputs for the block.
pub fn input(rng: &mut StdRng) -> Vec<f32> {
    uniform(rng, T * C, -2.0, 2.0)
}
