//! A scalar f64 Gemma 3 written from transformers' semantics (`modeling_gemma3`,
//! `Gemma3TextConfig`), independent of the compiler: its random weights, the Hugging Face
//! folder they are written to, and the logits of every position of a token sequence.

use crate::common::on_the_4_bit_grid;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::path::Path;

const HIDDEN: usize = 64;
const INTERMEDIATE: usize = 96;
const LAYERS: usize = 5;
const HEADS: usize = 4;
const KV_HEADS: usize = 1;
const HEAD_DIM: usize = 16;
const VOCAB: usize = 300;
/// Every third layer is full (`sliding_window_pattern` 3): layer 2 of 0..5.
const PATTERN: usize = 3;
/// The sliding layers' window.
pub const CONFIG_WINDOW: usize = 4;
const EPS: f64 = 1e-6;
const ROPE_THETA: f64 = 1e6;
const ROPE_LOCAL_THETA: f64 = 1e4;
/// `query_pre_attn_scalar`: scores are scaled by its inverse square root.
const QUERY_SCALAR: f64 = 24.0;

/// Whether the sliding layers keep their window (`Ignored`: every layer is full).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Window {
    Config,
    Ignored,
}

/// The weights, by Hugging Face name, row-major f32, and the full layers' linear RoPE
/// scaling.
pub struct Reference {
    weights: BTreeMap<String, (Vec<usize>, Vec<f32>)>,
    /// `rope_scaling` `linear` with this factor (full layers only), if any.
    pub rope_factor: Option<f64>,
}

/// Every weight's name and shape.
fn shapes() -> Vec<(String, Vec<usize>)> {
    let (q, kv) = (HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM);
    let mut shapes = vec![
        ("model.embed_tokens.weight".to_string(), vec![VOCAB, HIDDEN]),
        ("model.norm.weight".to_string(), vec![HIDDEN]),
    ];
    for layer in 0..LAYERS {
        let p = format!("model.layers.{layer}");
        for norm in [
            "input_layernorm",
            "post_attention_layernorm",
            "pre_feedforward_layernorm",
            "post_feedforward_layernorm",
        ] {
            shapes.push((format!("{p}.{norm}.weight"), vec![HIDDEN]));
        }
        shapes.extend([
            (format!("{p}.self_attn.q_proj.weight"), vec![q, HIDDEN]),
            (format!("{p}.self_attn.k_proj.weight"), vec![kv, HIDDEN]),
            (format!("{p}.self_attn.v_proj.weight"), vec![kv, HIDDEN]),
            (format!("{p}.self_attn.o_proj.weight"), vec![HIDDEN, q]),
            (format!("{p}.self_attn.q_norm.weight"), vec![HEAD_DIM]),
            (format!("{p}.self_attn.k_norm.weight"), vec![HEAD_DIM]),
            (
                format!("{p}.mlp.gate_proj.weight"),
                vec![INTERMEDIATE, HIDDEN],
            ),
            (
                format!("{p}.mlp.up_proj.weight"),
                vec![INTERMEDIATE, HIDDEN],
            ),
            (
                format!("{p}.mlp.down_proj.weight"),
                vec![HIDDEN, INTERMEDIATE],
            ),
        ]);
    }
    shapes
}

impl Reference {
    /// Random weights from `seed`: norms' offsets from 1 in `[-0.5, 0.5)`; matrices on
    /// the 4-bit grid (see [`on_the_4_bit_grid`]), so that the 4-bit schemes and f16
    /// storage hold them exactly.
    pub fn random(seed: u64) -> Reference {
        let mut rng = StdRng::seed_from_u64(seed);
        let weights = shapes()
            .into_iter()
            .map(|(name, shape)| {
                let values = match shape[..] {
                    [len] => (0..len).map(|_| rng.gen_range(-0.5..0.5)).collect(),
                    [rows, depth] => on_the_4_bit_grid(&mut rng, rows, depth),
                    _ => unreachable!("weights are vectors or matrices"),
                };
                (name, (shape, values))
            })
            .collect();
        Reference {
            weights,
            rope_factor: None,
        }
    }

    /// Writes `config.json` and `model.safetensors` into `dir`.
    pub fn write(&self, dir: &Path) {
        let config = serde_json::json!({
            "architectures": ["Gemma3ForCausalLM"],
            "model_type": "gemma3_text",
            "hidden_size": HIDDEN,
            "intermediate_size": INTERMEDIATE,
            "num_hidden_layers": LAYERS,
            "num_attention_heads": HEADS,
            "num_key_value_heads": KV_HEADS,
            "head_dim": HEAD_DIM,
            "vocab_size": VOCAB,
            "sliding_window": CONFIG_WINDOW,
            "sliding_window_pattern": PATTERN,
            "query_pre_attn_scalar": QUERY_SCALAR,
            "rope_theta": ROPE_THETA,
            "rope_scaling": self.rope_factor.map(|f| serde_json::json!({"rope_type": "linear", "factor": f})),
            "rope_local_base_freq": ROPE_LOCAL_THETA,
            "rms_norm_eps": EPS,
            "hidden_activation": "gelu_pytorch_tanh",
            "max_position_embeddings": 512,
            "torch_dtype": "float32"
        });
        std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
        let tensors = self.weights.iter();
        let tensors =
            tensors.map(|(name, (shape, values))| (name.as_str(), &shape[..], &values[..]));
        crate::common::write_f32_weights(dir, tensors);
    }

    fn weight(&self, name: &str) -> &[f32] {
        &self.weights[name].1
    }

    /// `W x` for the `[out, in]` weight `name`.
    fn linear(&self, name: &str, x: &[f64]) -> Vec<f64> {
        let w = self.weight(name);
        w.chunks(x.len())
            .map(|row| row.iter().zip(x).map(|(&a, b)| f64::from(a) * b).sum())
            .collect()
    }

    /// `x * rsqrt(mean(x^2) + eps) * (1 + w)` with the weight `name`.
    fn norm(&self, name: &str, x: &[f64]) -> Vec<f64> {
        let mean = x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64;
        let inv = 1.0 / (mean + EPS).sqrt();
        let w = self.weight(name);
        x.iter()
            .zip(w)
            .map(|(v, &w)| v * inv * (1.0 + f64::from(w)))
            .collect()
    }

    /// The logits of every position of `tokens` (position `p` seeing tokens `..= p`).
    pub fn logits(&self, tokens: &[u32], window: Window) -> Vec<Vec<f64>> {
        let embed = self.weight("model.embed_tokens.weight");
        let mut xs: Vec<Vec<f64>> = tokens
            .iter()
            .map(|&t| {
                let row = &embed[t as usize * HIDDEN..][..HIDDEN];
                row.iter()
                    .map(|&v| f64::from(v) * (HIDDEN as f64).sqrt())
                    .collect()
            })
            .collect();
        for layer in 0..LAYERS {
            let sliding = (layer + 1) % PATTERN != 0;
            let span = match (sliding, window) {
                (true, Window::Config) => Some(CONFIG_WINDOW),
                _ => None,
            };
            let rope = match (sliding, self.rope_factor) {
                (true, _) => (ROPE_LOCAL_THETA, 1.0),
                (false, factor) => (ROPE_THETA, factor.unwrap_or(1.0)),
            };
            xs = self.layer(layer, &xs, span, rope);
        }
        xs.iter()
            .map(|x| {
                self.linear(
                    "model.embed_tokens.weight",
                    &self.norm("model.norm.weight", x),
                )
            })
            .collect()
    }

    /// Decoder layer `layer` over every position's `xs`.
    fn layer(
        &self,
        layer: usize,
        xs: &[Vec<f64>],
        span: Option<usize>,
        rope: (f64, f64),
    ) -> Vec<Vec<f64>> {
        let p = format!("model.layers.{layer}");
        let name = |suffix: &str| format!("{p}.{suffix}");
        let normed: Vec<Vec<f64>> = xs
            .iter()
            .map(|x| self.norm(&name("input_layernorm.weight"), x))
            .collect();
        let heads = |proj: &str, norm: Option<&str>, count: usize| -> Vec<Vec<Vec<f64>>> {
            normed
                .iter()
                .enumerate()
                .map(|(pos, h)| {
                    let y = self.linear(&name(proj), h);
                    y.chunks(HEAD_DIM)
                        .take(count)
                        .map(|head| match norm {
                            Some(norm) => rotate(&self.norm(&name(norm), head), pos, rope),
                            None => head.to_vec(),
                        })
                        .collect()
                })
                .collect()
        };
        let q = heads(
            "self_attn.q_proj.weight",
            Some("self_attn.q_norm.weight"),
            HEADS,
        );
        let k = heads(
            "self_attn.k_proj.weight",
            Some("self_attn.k_norm.weight"),
            KV_HEADS,
        );
        let v = heads("self_attn.v_proj.weight", None, KV_HEADS);
        (0..xs.len())
            .map(|i| {
                let first = span.map_or(0, |w| (i + 1).saturating_sub(w));
                let attended: Vec<f64> = (0..HEADS)
                    .flat_map(|h| attend(&q[i][h], (&k, &v), h / (HEADS / KV_HEADS), first..=i))
                    .collect();
                let attn = self.linear(&name("self_attn.o_proj.weight"), &attended);
                let attn = self.norm(&name("post_attention_layernorm.weight"), &attn);
                let x: Vec<f64> = xs[i].iter().zip(&attn).map(|(a, b)| a + b).collect();
                let h = self.norm(&name("pre_feedforward_layernorm.weight"), &x);
                let gate = self.linear(&name("mlp.gate_proj.weight"), &h);
                let up = self.linear(&name("mlp.up_proj.weight"), &h);
                let inner: Vec<f64> = gate
                    .iter()
                    .zip(&up)
                    .map(|(g, u)| gelu_tanh(*g) * u)
                    .collect();
                let mlp = self.linear(&name("mlp.down_proj.weight"), &inner);
                let mlp = self.norm(&name("post_feedforward_layernorm.weight"), &mlp);
                x.iter().zip(&mlp).map(|(a, b)| a + b).collect()
            })
            .collect()
    }
}

/// Rotate-half RoPE of one head at position `pos` with base `theta`, its frequencies
/// divided by `factor` (linear scaling).
fn rotate(x: &[f64], pos: usize, (theta, factor): (f64, f64)) -> Vec<f64> {
    let half = x.len() / 2;
    let mut out = x.to_vec();
    for i in 0..half {
        let freq = theta.powf(-2.0 * i as f64 / x.len() as f64) / factor;
        let (sin, cos) = (pos as f64 * freq).sin_cos();
        out[i] = x[i] * cos - x[i + half] * sin;
        out[i + half] = x[i + half] * cos + x[i] * sin;
    }
    out
}

/// One projection's heads at every position: `[position][head][lane]`.
type Heads = [Vec<Vec<f64>>];

/// `q`'s attention over kv head `g` of the positions `keys`.
fn attend(
    q: &[f64],
    (k, v): (&Heads, &Heads),
    g: usize,
    keys: std::ops::RangeInclusive<usize>,
) -> Vec<f64> {
    let scale = 1.0 / QUERY_SCALAR.sqrt();
    let scores: Vec<f64> = keys
        .clone()
        .map(|j| scale * q.iter().zip(&k[j][g]).map(|(a, b)| a * b).sum::<f64>())
        .collect();
    let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
    let total: f64 = weights.iter().sum();
    (0..HEAD_DIM)
        .map(|d| {
            keys.clone()
                .zip(&weights)
                .map(|(j, w)| w * v[j][g][d])
                .sum::<f64>()
                / total
        })
        .collect()
}

/// `0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))`.
fn gelu_tanh(x: f64) -> f64 {
    let inner = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
    0.5 * x * (1.0 + inner.tanh())
}
