//! The model architectures built from GGUF files, as data: the Hugging Face class each one
//! is, how llama.cpp's converter renamed and rewrote its tensors.

/// One architecture: its GGUF name, its Hugging Face class and how llama.cpp's converter
/// stored its tensors.
#[derive(Debug)]
pub(crate) struct ArchSpec {
    /// `general.architecture` (`llama`).
    pub gguf: &'static str,
    /// The Hugging Face class (`LlamaForCausalLM`).
    pub class: &'static str,
    /// The Hugging Face `model_type`.
    pub model_type: &'static str,
    /// The converter reorders the rows of each q and k head so ggml's interleaved RoPE
    /// computes Hugging Face's rotate-half RoPE; loading puts them back.
    pub interleaved_rope: bool,
    /// What the converter added to every norm weight (Gemma's RMSNorm scales by 1 + w and
    /// the converter stores 1 + w); loading subtracts it.
    pub norm_shift: f32,
    /// Per-layer tensors beyond [`LAYER_TENSORS`]: the norms, whose roles differ.
    pub layer_norms: &'static [(&'static str, &'static str)],
}

/// The per-layer tensors every architecture names alike: GGUF name (after `blk.N.`) and
/// Hugging Face name (after `model.layers.N.`), without the `.weight` / `.bias` suffix.
pub(crate) const LAYER_TENSORS: &[(&str, &str)] = &[
    ("attn_norm", "input_layernorm"),
    ("attn_q", "self_attn.q_proj"),
    ("attn_k", "self_attn.k_proj"),
    ("attn_v", "self_attn.v_proj"),
    ("attn_output", "self_attn.o_proj"),
    ("attn_q_norm", "self_attn.q_norm"),
    ("attn_k_norm", "self_attn.k_norm"),
    ("ffn_gate", "mlp.gate_proj"),
    ("ffn_up", "mlp.up_proj"),
    ("ffn_down", "mlp.down_proj"),
];

/// The model-wide tensors: GGUF name and Hugging Face name.
pub(crate) const GLOBAL_TENSORS: &[(&str, &str)] = &[
    ("token_embd.weight", "model.embed_tokens.weight"),
    ("output_norm.weight", "model.norm.weight"),
    ("output.weight", "lm_head.weight"),
];

/// Pre-norm decoders: one norm before attention, one before the MLP.
const PRE_NORMS: &[(&str, &str)] = &[("ffn_norm", "post_attention_layernorm")];

/// Gemma 3: a norm before and after attention and before and after the MLP.
const SANDWICH_NORMS: &[(&str, &str)] = &[
    ("ffn_norm", "pre_feedforward_layernorm"),
    ("post_attention_norm", "post_attention_layernorm"),
    ("post_ffw_norm", "post_feedforward_layernorm"),
];

/// Every architecture built from GGUF.
pub(crate) const ARCHITECTURES: &[ArchSpec] = &[
    ArchSpec {
        gguf: "llama",
        class: "LlamaForCausalLM",
        model_type: "llama",
        interleaved_rope: true,
        norm_shift: 0.0,
        layer_norms: PRE_NORMS,
    },
    ArchSpec {
        gguf: "qwen2",
        class: "Qwen2ForCausalLM",
        model_type: "qwen2",
        interleaved_rope: false,
        norm_shift: 0.0,
        layer_norms: PRE_NORMS,
    },
    ArchSpec {
        gguf: "qwen3",
        class: "Qwen3ForCausalLM",
        model_type: "qwen3",
        interleaved_rope: false,
        norm_shift: 0.0,
        layer_norms: PRE_NORMS,
    },
    ArchSpec {
        gguf: "gemma3",
        class: "Gemma3ForCausalLM",
        model_type: "gemma3_text",
        interleaved_rope: false,
        norm_shift: 1.0,
        layer_norms: SANDWICH_NORMS,
    },
];

impl ArchSpec {
    /// The architecture named `gguf`.
    pub fn find(gguf: &str) -> Option<&'static ArchSpec> {
        ARCHITECTURES.iter().find(|a| a.gguf == gguf)
    }

    /// The supported names, comma-separated (for errors).
    pub fn supported() -> String {
        let names: Vec<&str> = ARCHITECTURES.iter().map(|a| a.gguf).collect();
        names.join(", ")
    }

    /// The Hugging Face name of GGUF tensor `name`, if the architecture has one.
    pub fn hf_name(&self, name: &str) -> Option<String> {
        if let Some((_, hf)) = GLOBAL_TENSORS.iter().find(|(g, _)| *g == name) {
            return Some((*hf).to_string());
        }
        let rest = name.strip_prefix("blk.")?;
        let (layer, rest) = rest.split_once('.')?;
        let layer: u32 = layer.parse().ok()?;
        let (base, suffix) = rest.rsplit_once('.')?;
        if !matches!(suffix, "weight" | "bias") {
            return None;
        }
        let (_, hf) = LAYER_TENSORS
            .iter()
            .chain(self.layer_norms)
            .find(|(g, _)| *g == base)?;
        Some(format!("model.layers.{layer}.{hf}.{suffix}"))
    }
}
