//! [`Quantization`]: how a model's projection weights are stored and computed with
//! (`--quant`, named as MLC-LLM names its schemes), and how a scheme reaches the
//! compiler: the model is declared with the scheme's storage dtype, and a quantizing
//! scheme marks every weighted function ([`WEIGHT_QUANT_ATTR`]) so `QuantizeWeights`
//! quantizes its linear weights at compile time.

use oxrelax_dsl::{AttrValue, DType, IRModule};
use oxrelax_models::KvDtype;
use oxrelax_runtime::weights::{StoredAs, WeightStore};
use std::collections::BTreeSet;

pub use crate::passes::WEIGHT_QUANT_ATTR;
use crate::passes::{WeightFormat, WEIGHT_FORMATS};

/// A weight quantization scheme. Norms and biases stay f32, and activations are f32
/// except the inputs of linear layers under `w8a8` / `w4a8`, and those of the 4-bit
/// decode GEMV under `q4f32_1` / `q4f16_1` on x86-64 with AVX-512 VNNI or VBMI, or AVX2
/// (not AVX-512F alone), which rounds each group of 32 to 16-bit fixed point.
/// The quantized formats are `QuantizeWeights`' [`crate::passes::WEIGHT_FORMATS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Quantization {
    /// As the checkpoint stores the weights. A GGUF file whose projections are all Q4_1
    /// blocks: `w4a8_asym` (the blocks kept); all Q4_0: `w4a8` (kept: the scale search
    /// finds the block's own scale); other quantized blocks: `w8a8` (Q8_0 kept exactly,
    /// 4- to 6-bit blocks put on its 8-bit grid). Each computes with int8 activations per
    /// group of 32 as llama.cpp does. Float checkpoints: `q0f16` when the embedding table
    /// is stored as f16, else `q0f32` (bf16 is widened to f32).
    #[default]
    Auto,
    /// No quantization: 32-bit floats.
    #[value(name = "q0f32")]
    Q0f32,
    /// No quantization, 16-bit float storage (half the memory and the bytes each decode
    /// step streams; f32 and bf16 checkpoints are rounded to f16).
    #[value(name = "q0f16")]
    Q0f16,
    /// Int8 linear weights, symmetric, in groups of 32 along the reduction with one f32
    /// scale per group and output column (a quarter of f32's bytes); quantized at
    /// compile time, widened and scaled inside the matmul microkernels. The embedding
    /// table is int8 too, in groups of 32 along each row, dequantized as rows are taken.
    #[value(name = "q8f32")]
    Q8f32,
    /// Int4 weights (MLC-LLM's `q4f32_1`): symmetric in groups of 32 along the
    /// reduction, one f32 scale per group and output column (an eighth of f32's bytes,
    /// plus the scales). The embedding table and the output head are int8 (as `q8f32`'s,
    /// as llama.cpp keeps them above its 4-bit body); a tied embedding is quantized once
    /// and shared. On x86-64 with AVX-512 VNNI or VBMI, or AVX2 (not AVX-512F alone),
    /// the 4-bit decode GEMV rounds each group of 32 activations to 16-bit fixed point;
    /// elsewhere activations stay f32.
    #[value(name = "q4f32_1")]
    Q4f32_1,
    /// As `q4f32_1` with f16 scales (MLC-LLM's `q4f16_1`; activations as under
    /// `q4f32_1`: f32, except that on x86-64 with AVX-512 VNNI or VBMI, or AVX2, the
    /// 4-bit decode GEMV rounds each group of 32 to 16-bit fixed point).
    #[value(name = "q4f16_1")]
    Q4f16_1,
    /// MNN's dynamic quantization with int8 weights: int8 in groups of 32 along the
    /// reduction with f16 scales, and each activation row quantized to int8 at run time
    /// with one scale per group of 32 along the reduction (llama.cpp's q8_0 activation
    /// blocks); the products accumulate in int32 per group (VNNI `vpdpbusd`, AVX2
    /// `pmaddubsw`), scaled by the group's two scales after. The embedding table and the
    /// output head are `q8f32`'s (int8 weights, float activations: the logits come from
    /// the unrounded hidden state).
    #[value(name = "w8a8")]
    W8a8,
    /// As `w8a8` with int4 weights (the 4-bit scale search of `q4f32_1`); the embedding
    /// table and the output head are `q8f32`'s, as under `w8a8`.
    #[value(name = "w4a8")]
    W4a8,
    /// As `q4f16_1` with asymmetric groups (llama.cpp's Q4_1): each group's 16 codes
    /// span it from its least value to its greatest, with an f16 scale and an f16 offset
    /// per group (5 bits per weight). A linear layer adds the product of its
    /// activations' sums per group with the offsets. Weights read other than by linear
    /// layers, or whose depth is not a multiple of 32, keep `q4f16_1`'s groups.
    #[value(name = "q4f16_asym")]
    Q4f16Asym,
    /// As `w4a8` with `q4f16_asym`'s asymmetric groups (the offsets' term takes the
    /// float activations). What `auto` keeps a GGUF file's Q4_1 blocks as.
    #[value(name = "w4a8_asym")]
    W4a8Asym,
}

/// The tensor whose stored dtype [`Quantization::Auto`] follows (every model has it).
const EMBEDDING_TABLE: &str = "model.embed_tokens.weight";

/// The embedding table and the output head: 8-bit under every scheme, so their blocks
/// do not decide which 4-bit scheme keeps a file's blocks.
const HEAD_TENSORS: [&str; 2] = [EMBEDDING_TABLE, "lm_head.weight"];

impl Quantization {
    /// Every scheme a model can be compiled with (all but `Auto`).
    pub const SCHEMES: [Quantization; 9] = [
        Quantization::Q0f32,
        Quantization::Q0f16,
        Quantization::Q8f32,
        Quantization::Q4f32_1,
        Quantization::Q4f16_1,
        Quantization::W8a8,
        Quantization::W4a8,
        Quantization::Q4f16Asym,
        Quantization::W4a8Asym,
    ];

    /// The scheme's name (as `--quant` takes it and manifests record it).
    pub fn name(self) -> &'static str {
        match self {
            Quantization::Auto => "auto",
            Quantization::Q0f32 => "q0f32",
            Quantization::Q0f16 => "q0f16",
            Quantization::Q8f32 => "q8f32",
            Quantization::Q4f32_1 => "q4f32_1",
            Quantization::Q4f16_1 => "q4f16_1",
            Quantization::W8a8 => "w8a8",
            Quantization::W4a8 => "w4a8",
            Quantization::Q4f16Asym => "q4f16_asym",
            Quantization::W4a8Asym => "w4a8_asym",
        }
    }

    /// The scheme named `name` (not `auto`).
    pub fn from_name(name: &str) -> Option<Quantization> {
        Self::SCHEMES.into_iter().find(|q| q.name() == name)
    }

    /// The scheme for the checkpoint in `store` (`Auto` decided by what it stores).
    pub fn resolve(self, store: &WeightStore) -> Quantization {
        if self != Quantization::Auto {
            return self;
        }
        let blocks = |name: &str| match store.info(name)?.stored {
            StoredAs::Blocks(ty) => Some(ty.name),
            StoredAs::Dtype(_) => None,
        };
        let body: BTreeSet<&str> = store
            .names()
            .filter(|name| !HEAD_TENSORS.contains(name))
            .filter_map(blocks)
            .collect();
        let table = store.info(EMBEDDING_TABLE).map(|entry| entry.stored);
        match body.into_iter().collect::<Vec<_>>()[..] {
            ["Q4_1"] => Quantization::W4a8Asym,
            ["Q4_0"] => Quantization::W4a8,
            _ if store.names().any(|name| blocks(name).is_some()) => Quantization::W8a8,
            _ if table == Some(StoredAs::Dtype(DType::F16)) => Quantization::Q0f16,
            _ => Quantization::Q0f32,
        }
    }

    /// The dtype the model declares its projection weights (and embedding table) in:
    /// what loading converts the checkpoint to, before any compile-time quantization.
    pub fn storage_dtype(self) -> DType {
        match self {
            Quantization::Q0f16 => DType::F16,
            _ => DType::F32,
        }
    }

    /// The KV cache dtype of a model compiled with this scheme when none is asked for:
    /// f16 for the weight-quantized schemes (as llama.cpp's cache: half the bytes every
    /// decode step's attention reads, next to weights already cut to 4 or 8 bits), f32 for
    /// `q0f32` and `q0f16` (and `auto`, which is one of them).
    pub fn default_kv_dtype(self) -> KvDtype {
        match self.weight_format() {
            Some(_) => KvDtype::F16,
            None => KvDtype::F32,
        }
    }

    /// `asked`, or else this scheme's [`Quantization::default_kv_dtype`].
    pub fn kv_dtype(self, asked: Option<KvDtype>) -> KvDtype {
        asked.unwrap_or(self.default_kv_dtype())
    }

    /// Marks `module`'s weighted functions (those with a `num_input` attribute) for the
    /// compile-time weight quantization of this scheme, if it quantizes.
    pub fn mark(self, module: &mut IRModule) {
        let Some(format) = self.weight_format() else {
            return;
        };
        for function in module.functions.values_mut() {
            if function.num_inputs().is_some() {
                let value = AttrValue::Str(format.to_string());
                function.attrs.insert(WEIGHT_QUANT_ATTR.to_string(), value);
            }
        }
    }

    /// The packed-weight format `QuantizeWeights` produces for this scheme, if not the
    /// float panels.
    pub fn packed_format(self) -> Option<&'static WeightFormat> {
        let name = self.weight_format()?;
        WEIGHT_FORMATS.iter().find(|format| format.name == name)
    }

    /// The name of [`Quantization::packed_format`].
    fn weight_format(self) -> Option<&'static str> {
        match self {
            Quantization::Q8f32 => Some("q8"),
            Quantization::Q4f32_1 => Some("q4f32"),
            Quantization::Q4f16_1 => Some("q4f16"),
            Quantization::W8a8 => Some("w8a8"),
            Quantization::W4a8 => Some("w4a8"),
            Quantization::Q4f16Asym => Some("q4f16_asym"),
            Quantization::W4a8Asym => Some("w4a8_asym"),
            _ => None,
        }
    }
}
