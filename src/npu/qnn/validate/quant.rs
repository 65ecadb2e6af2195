//! The quantization rules: data type and encoding pairs, LPBQ consistency (and the
//! layouts Qualcomm's HTP backend computes), LPBQ code ranges and Conv2d bias scales.

use super::context::{Ctx, Findings};
use oxrelax_runtime::qnn::codes::{definition, encoding as enc, tensor_type};
use oxrelax_runtime::qnn::net::{BlockwiseExpansion, ScaleOffset};
use oxrelax_runtime::qnn::{NetTensor, QnnDataType, QuantParams};

/// Relative tolerance of a bias scale against input scale x weight scale.
const BIAS_SCALE_TOLERANCE: f64 = 1e-5;

/// The size of axis `axis` of `dims`, if it is an axis.
fn axis_dim(dims: &[u32], axis: i32) -> Option<u32> {
    usize::try_from(axis)
        .ok()
        .and_then(|a| dims.get(a).copied())
}

/// Rule `encoding`: a known data type; fixed point DEFINED with an encoding of the kind
/// the tensor allows, scales finite and positive, offsets in range; others UNDEFINED.
pub(crate) fn encoding(ctx: &Ctx, f: &mut Findings) {
    for (name, tensor) in &ctx.net.graph.tensors {
        let at = format!("tensor {name}");
        let q = &tensor.quant_params;
        match tensor.dtype() {
            None => f.push(
                &at,
                format!(
                    "data_type {:#06x} is not a known QnnDataType",
                    tensor.data_type
                ),
            ),
            Some(QnnDataType::SFixed4) => f.push(
                &at,
                "SFIXED_POINT_4 means two codes per byte, which HTP rejects at graph build: \
                 declare 4-bit codes as SFIXED_POINT_8 holding values in [-8, 7]",
            ),
            Some(dtype) if dtype.is_fixed_point() => fixed_point(tensor, dtype, &at, f),
            Some(dtype) => {
                let extra = q.scale_offset.is_some()
                    || q.axis_scale_offset.is_some()
                    || q.blockwise_expansion.is_some();
                if q.encoding != enc::UNDEFINED || extra {
                    f.push(
                        &at,
                        format!(
                            "{} needs encoding UNDEFINED and no scales, has encoding {:#x}",
                            dtype.c_name(),
                            q.encoding
                        ),
                    );
                }
            }
        }
    }
}

fn fixed_point(tensor: &NetTensor, dtype: QnnDataType, at: &str, f: &mut Findings) {
    let q = &tensor.quant_params;
    if q.definition != definition::DEFINED {
        f.push(
            at,
            format!(
                "{} needs definition DEFINED, has {:#x}",
                dtype.c_name(),
                q.definition
            ),
        );
    }
    let is_static = tensor.kind == tensor_type::STATIC;
    let scales: Vec<ScaleOffset> = match (q.encoding, is_static) {
        (enc::SCALE_OFFSET, _) => q.scale_offset.into_iter().collect(),
        (enc::AXIS_SCALE_OFFSET, true) => match &q.axis_scale_offset {
            Some(axis) => {
                let len = axis.scale_offsets.len();
                let want = axis_dim(&tensor.dims, axis.axis);
                if want.map(|d| d as usize) != Some(len) || axis.num_scale_offsets as usize != len {
                    f.push(
                        at,
                        format!(
                            "{len} scale_offsets (num_scale_offsets {}) along axis {} of {:?}",
                            axis.num_scale_offsets, axis.axis, tensor.dims
                        ),
                    );
                }
                axis.scale_offsets.clone()
            }
            None => Vec::new(),
        },
        (enc::BLOCKWISE_EXPANSION, true) => return,
        (code, _) => {
            let kind = if is_static {
                "a static tensor"
            } else {
                "an activation"
            };
            return f.push(
                at,
                format!(
                    "encoding {code:#x} is not allowed for {kind} of {}",
                    dtype.c_name()
                ),
            );
        }
    };
    if scales.is_empty() {
        return f.push(
            at,
            format!("encoding {:#x} without its scale_offset values", q.encoding),
        );
    }
    let (lo, hi) = dtype.fixed_range().unwrap_or((0, 0));
    let offsets = match (lo, is_static) {
        (0, _) => (-hi, 0),
        (_, true) => (0, 0),
        (_, false) => (lo, hi),
    };
    let fine = |s: &ScaleOffset| {
        s.scale.is_finite()
            && s.scale > 0.0
            && (offsets.0..=offsets.1).contains(&i64::from(s.offset))
    };
    let bad = scales.iter().enumerate().find(|(_, s)| !fine(s));
    if let Some((i, s)) = bad {
        let (scale, offset, (lo, hi)) = (s.scale, s.offset, offsets);
        let need = format!("need a finite scale > 0 and an offset in [{lo}, {hi}]");
        f.push(
            at,
            format!("scale {scale:?} offset {offset} (entry {i}): {need}"),
        );
    }
}

/// Rule `lpbq`: a blockwise-expansion encoding is declared SFIXED_POINT_8 (4-bit codes,
/// one per byte: HTP computes LPBQ for no other weights), agrees with the dims, has
/// 4-bit block scales within their range and a block layout HTP computes correctly, and
/// channel scales finite, positive, offset 0.
pub(crate) fn lpbq(ctx: &Ctx, f: &mut Findings) {
    for (name, tensor) in &ctx.net.graph.tensors {
        let q = &tensor.quant_params;
        if q.encoding != enc::BLOCKWISE_EXPANSION {
            continue;
        }
        let at = format!("tensor {name}");
        if tensor.dtype() != Some(QnnDataType::SFixed8) {
            f.push(
                &at,
                format!(
                    "data_type {:#06x}: HTP takes LPBQ codes declared SFIXED_POINT_8",
                    tensor.data_type
                ),
            );
        }
        match &q.blockwise_expansion {
            Some(lpbq) => blockwise(&tensor.dims, lpbq, &at, f),
            None => f.push(
                &at,
                "encoding BLOCKWISE_EXPANSION without blockwise_expansion",
            ),
        }
    }
}

fn blockwise(dims: &[u32], lpbq: &BlockwiseExpansion, at: &str, f: &mut Findings) {
    let (Some(channels), Some(reduced)) =
        (axis_dim(dims, lpbq.axis), axis_dim(dims, lpbq.block_axis))
    else {
        return f.push(
            at,
            format!(
                "axis {} or block_axis {} is not an axis of {dims:?}",
                lpbq.axis, lpbq.block_axis
            ),
        );
    };
    if lpbq.scale_offsets.len() != channels as usize {
        f.push(
            at,
            format!(
                "{} scale_offsets for {channels} channels",
                lpbq.scale_offsets.len()
            ),
        );
    }
    let blocks = u64::from(lpbq.num_blocks_per_axis);
    if blocks * u64::from(lpbq.block_size) != u64::from(reduced) {
        f.push(
            at,
            format!(
                "{blocks} blocks of {} != {reduced} along block_axis {}",
                lpbq.block_size, lpbq.block_axis
            ),
        );
    }
    if lpbq.block_scales.len() as u64 != u64::from(channels) * blocks {
        f.push(
            at,
            format!(
                "{} block_scales for {channels} channels x {blocks} blocks",
                lpbq.block_scales.len()
            ),
        );
    }
    if lpbq.block_scale_bitwidth != LPBQ_BLOCK_SCALE_BITS {
        f.push(
            at,
            format!(
                "block scales of {} bits: HTP supports LPBQ with {LPBQ_BLOCK_SCALE_BITS}-bit block scales only",
                lpbq.block_scale_bitwidth
            ),
        );
    }
    if !lpbq.htp_computes() {
        f.push(
            at,
            format!(
                "{blocks} blocks of {}: HTP computes LPBQ blocks of a multiple of 32, an even \
                 number of blocks of 16, or one block per channel (it accepts this layout and \
                 computes wrong values)",
                lpbq.block_size
            ),
        );
    }
    let max = 1u64 << lpbq.block_scale_bitwidth.min(32);
    if let Some((i, s)) = lpbq
        .block_scales
        .iter()
        .enumerate()
        .find(|(_, &s)| !(1..=max).contains(&u64::from(s)))
    {
        f.push(
            at,
            format!(
                "block scale {s} (entry {i}) outside [1, {max}] for {} bits",
                lpbq.block_scale_bitwidth
            ),
        );
    }
    let bad = lpbq
        .scale_offsets
        .iter()
        .enumerate()
        .find(|(_, s)| !(s.scale.is_finite() && s.scale > 0.0) || s.offset != 0);
    if let Some((c, s)) = bad {
        f.push(
            at,
            format!(
                "channel {c}: scale {:?} offset {}: need a finite scale > 0, offset 0",
                s.scale, s.offset
            ),
        );
    }
}

/// The bits of an LPBQ block scale HTP supports.
const LPBQ_BLOCK_SCALE_BITS: u32 = 4;

/// Rule `lpbq-codes`: every stored code of an LPBQ tensor (a signed byte each) is in the
/// 4-bit range [-8, 7].
pub(crate) fn lpbq_codes(ctx: &Ctx, f: &mut Findings) {
    for (name, tensor, _) in ctx.static_tensors() {
        let lpbq = tensor.quant_params.encoding == enc::BLOCKWISE_EXPANSION;
        let Some(bytes) = ctx.bin.get(name).filter(|_| lpbq) else {
            continue;
        };
        let outside = |b: &u8| !(-8..=7).contains(&(*b as i8));
        if let Some(i) = bytes.iter().position(outside) {
            let count = bytes.iter().filter(|b| outside(b)).count();
            f.push(
                format!("tensor {name}"),
                format!(
                    "value {} at element {i} outside [-8, 7] ({count} such)",
                    bytes[i] as i8
                ),
            );
        }
    }
}

/// The per-channel scales of an encoding (one entry when per tensor).
fn channel_scales(q: &QuantParams) -> Option<&[ScaleOffset]> {
    match q.encoding {
        enc::SCALE_OFFSET => q.scale_offset.as_ref().map(std::slice::from_ref),
        enc::AXIS_SCALE_OFFSET => q
            .axis_scale_offset
            .as_ref()
            .map(|a| a.scale_offsets.as_slice()),
        enc::BLOCKWISE_EXPANSION => q
            .blockwise_expansion
            .as_ref()
            .map(|b| b.scale_offsets.as_slice()),
        _ => None,
    }
}

/// Entry `c` of per-channel scales, the one entry standing for every channel.
fn channel(scales: &[ScaleOffset], c: usize) -> Option<&ScaleOffset> {
    if scales.len() == 1 {
        scales.first()
    } else {
        scales.get(c)
    }
}

/// Rule `bias-scale`: a Conv2d's quantized (SFIXED_32) bias has, per channel, scale =
/// input scale x weight scale and offset 0.
pub(crate) fn bias_scale(ctx: &Ctx, f: &mut Findings) {
    for (node_name, node) in &ctx.net.graph.nodes {
        let [x, w, b] = match node.input_names.as_slice() {
            [x, w, b] if node.op_type == "Conv2d" => [x, w, b].map(|n| ctx.tensor(n)),
            _ => continue,
        };
        let (Some(x), Some(w), Some(b)) = (x, w, b) else {
            continue;
        };
        let Some(bias) =
            channel_scales(&b.quant_params).filter(|_| b.dtype() == Some(QnnDataType::SFixed32))
        else {
            continue;
        };
        let at = format!("node {node_name}");
        let input = x
            .quant_params
            .scale_offset
            .filter(|_| x.quant_params.encoding == enc::SCALE_OFFSET);
        let (Some(input), Some(weight)) = (input, channel_scales(&w.quant_params)) else {
            f.push(
                &at,
                "a quantized bias needs a scale_offset input and a quantized weight",
            );
            continue;
        };
        if let Some(message) = first_mismatch(input.scale, weight, bias) {
            f.push(&at, message);
        }
    }
}

fn first_mismatch(input: f32, weight: &[ScaleOffset], bias: &[ScaleOffset]) -> Option<String> {
    for c in 0..weight.len().max(bias.len()) {
        let (Some(w), Some(b)) = (channel(weight, c), channel(bias, c)) else {
            break;
        };
        let want = f64::from(input) * f64::from(w.scale);
        if b.offset != 0 {
            return Some(format!("bias offset {} != 0 (channel {c})", b.offset));
        }
        if (f64::from(b.scale) - want).abs() > BIAS_SCALE_TOLERANCE * want.abs() {
            return Some(format!(
                "bias scale {:?} != input scale {input:?} x weight scale {:?} (channel {c})",
                b.scale, w.scale
            ));
        }
    }
    None
}
