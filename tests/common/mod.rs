//! Small models written with the DSL's nn layer, shared by the end-to-end tests.
// Each test binary uses a different subset of these models.
#![allow(dead_code)]

use ndarray::ArrayD;
use oxrelax_dsl::nn::{
    causal_mask, Linear, Module, NnError, Param, Prefix, RMSNorm, RotaryEmbedding, Spec,
};
use oxrelax_dsl::op::InferError;
use oxrelax_dsl::{op, BlockBuilder, DType, Expr, IRModule, StructInfo, SymExpr, SymVar, Var};
use oxrelax_runtime::{Tensor, Value};
use std::path::{Path, PathBuf};

pub mod phi3;
pub mod transformer;

/// The token dim of a call: `n <= 2048`.
pub fn n() -> SymVar {
    SymVar::bounded("n", 2048)
}

fn c(v: i64) -> SymExpr {
    SymExpr::int(v)
}

/// Emits an op call, naming this test model in an inference error.
fn emit(bb: &mut BlockBuilder, call: Result<Expr, InferError>) -> Result<Expr, NnError> {
    Ok(Expr::from(
        bb.emit(call.map_err(NnError::op("test model"))?)?,
    ))
}

fn input(name: &str, shape: Vec<SymExpr>) -> Var {
    Var::new(name, StructInfo::tensor(shape, DType::F32))
}

/// `down(silu(up(x)))`: a two-layer MLP over `[1, n, 64]`.
pub struct Mlp {
    up: Linear,
    down: Linear,
}

impl Mlp {
    fn new(prefix: &Prefix) -> Self {
        Mlp {
            up: Linear::new(&prefix.child("up_proj"), 64, 256, false, DType::F32),
            down: Linear::new(&prefix.child("down_proj"), 256, 64, true, DType::F32),
        }
    }

    fn forward(&self, bb: &mut BlockBuilder, x: &Expr) -> Result<Expr, NnError> {
        let hidden = self.up.forward(bb, x)?;
        let hidden = emit(bb, op::silu(&hidden))?;
        self.down.forward(bb, &hidden)
    }
}

impl Module for Mlp {
    fn parameters(&self) -> Vec<Param> {
        [self.up.parameters(), self.down.parameters()].concat()
    }
}

/// The exported two-layer MLP: `forward(x: [1, n, 64])`.
pub fn mlp_module() -> IRModule {
    Spec::new()
        .function(
            "forward",
            vec![input("x", vec![c(1), n().expr(), c(64)])],
            |m: &Mlp, bb, xs| m.forward(bb, &xs[0]),
        )
        .export(&Mlp::new(&Prefix::new("mlp")))
        .expect("the MLP exports")
}

const HIDDEN: i64 = 64;
const HEADS: i64 = 4;
const HEAD_DIM: i64 = 16;

/// Pre-norm causal self-attention with RoPE over `[1, n, 64]`, plus the residual.
pub struct Attention {
    norm: RMSNorm,
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    rope: RotaryEmbedding,
}

impl Attention {
    fn new(prefix: &Prefix) -> Self {
        let linear =
            |name: &str| Linear::new(&prefix.child(name), HIDDEN, HIDDEN, false, DType::F32);
        Attention {
            norm: RMSNorm::new(&prefix.child("input_layernorm"), HIDDEN, 1e-5, DType::F32),
            q: linear("q_proj"),
            k: linear("k_proj"),
            v: linear("v_proj"),
            o: linear("o_proj"),
            rope: RotaryEmbedding::new(HEAD_DIM, 10000.0).expect("an even head dim"),
        }
    }

    /// `[1, n, 64]` projected and split into heads: `[1, heads, n, head_dim]`.
    fn heads(
        &self,
        bb: &mut BlockBuilder,
        proj: &Linear,
        x: &Expr,
        rope: bool,
    ) -> Result<Expr, NnError> {
        let y = proj.forward(bb, x)?;
        let shape = vec![c(1), n().expr(), c(HEADS), c(HEAD_DIM)];
        let mut y = emit(bb, op::reshape(&y, shape))?;
        if rope {
            y = self.rope.forward(bb, &y, &c(0))?;
        }
        emit(bb, op::permute_dims(&y, Some(vec![0, 2, 1, 3])))
    }

    fn forward(&self, bb: &mut BlockBuilder, x: &Expr) -> Result<Expr, NnError> {
        let h = self.norm.forward(bb, x)?;
        let q = self.heads(bb, &self.q, &h, true)?;
        let k = self.heads(bb, &self.k, &h, true)?;
        let v = self.heads(bb, &self.v, &h, false)?;
        let kt = emit(bb, op::permute_dims(&k, Some(vec![0, 1, 3, 2])))?;
        let scores = emit(bb, op::matmul(&q, &kt))?;
        let scale = emit(
            bb,
            op::full(vec![], 1.0 / (HEAD_DIM as f64).sqrt(), DType::F32),
        )?;
        let scores = emit(bb, op::multiply(&scores, &scale))?;
        let mask = causal_mask(bb, &n().expr(), DType::F32)?;
        let scores = emit(bb, op::add(&scores, &mask))?;
        let probs = emit(bb, op::softmax(&scores, -1))?;
        let out = emit(bb, op::matmul(&probs, &v))?;
        let out = emit(bb, op::permute_dims(&out, Some(vec![0, 2, 1, 3])))?;
        let out = emit(bb, op::reshape(&out, vec![c(1), n().expr(), c(HIDDEN)]))?;
        let out = self.o.forward(bb, &out)?;
        emit(bb, op::add(x, &out))
    }
}

impl Module for Attention {
    fn parameters(&self) -> Vec<Param> {
        [
            &self.norm.parameters()[..],
            &self.q.parameters(),
            &self.k.parameters(),
            &self.v.parameters(),
            &self.o.parameters(),
        ]
        .concat()
    }
}

/// The exported attention block: `forward(x: [1, n, 64])`.
pub fn attention_module() -> IRModule {
    Spec::new()
        .function(
            "forward",
            vec![input("x", vec![c(1), n().expr(), c(HIDDEN)])],
            |m: &Attention, bb, xs| m.forward(bb, &xs[0]),
        )
        .export(&Attention::new(&Prefix::new("model.layers.0.self_attn")))
        .expect("the attention block exports")
}

/// An f32 array as a VM argument.
pub fn tensor(a: &ArrayD<f32>) -> Value {
    Value::Tensor(Tensor::from_ndarray(a).expect("f32 arrays convert"))
}

/// A VM result as an f32 array.
pub fn output(value: Value) -> ArrayD<f32> {
    value
        .as_tensor()
        .expect("a tensor result")
        .to_ndarray::<f32>()
        .expect("f32 result")
}

/// The fixture model `name` (`../shared/fixtures/models/<name>`).
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures/models")
        .join(name)
}

/// The evaluation text (`../shared/fixtures/text/shakespeare-eval.txt`).
pub fn eval_text() -> String {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/text/shakespeare-eval.txt");
    std::fs::read_to_string(path).expect("the evaluation text")
}

/// The fixture models (`../shared/fixtures/models/*` with a config.json), sorted.
pub fn fixture_models() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/models");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("the fixtures folder (../shared/fixtures/models) exists")
        .map(|entry| entry.expect("a readable fixtures folder").path())
        .filter(|path| path.join("config.json").is_file())
        .collect();
    dirs.sort();
    assert!(
        dirs.len() >= 4,
        "expected the four fixture models, found {dirs:?}"
    );
    dirs
}

/// Loads (compiles) the model in `dir` with a 64-position context, 16-token prefill
/// chunks and `quantization`.
pub fn load_as(
    dir: &Path,
    quantization: oxrelax::model::Quantization,
) -> oxrelax::model::LoadedModel {
    load_with_kv(dir, quantization, None)
}

/// [`load_as`] with the KV cache stored as `kv_dtype` (`None`: the default).
pub fn load_with_kv(
    dir: &Path,
    quantization: oxrelax::model::Quantization,
    kv_dtype: Option<oxrelax_models::KvDtype>,
) -> oxrelax::model::LoadedModel {
    let options = oxrelax::model::LoadOptions {
        max_context: 64,
        prefill_chunk: 16,
        quantization,
        kv_dtype,
        ..oxrelax::model::LoadOptions::default()
    };
    oxrelax::model::load(dir, &options).unwrap()
}

/// Greedy generation of `tokens` tokens after `prompt` (EOS ignored), keeping every logit
/// row.
pub fn greedy(
    model: oxrelax::model::LoadedModel,
    prompt: &[u32],
    tokens: usize,
) -> oxrelax_runtime::engine::Generation {
    use oxrelax_runtime::engine::{GenerateOptions, Step};
    use oxrelax_runtime::sampler::{Sampler, SamplingConfig};
    let options = GenerateOptions {
        max_new_tokens: tokens,
        ignore_eos: true,
        keep_logits: true,
    };
    let mut sampler = Sampler::new(SamplingConfig::default());
    engine(model)
        .generate(prompt, options, &mut sampler, |_| Ok(Step::Continue))
        .unwrap()
}

/// An engine over `model` (no end-of-sequence ids).
pub fn engine(model: oxrelax::model::LoadedModel) -> oxrelax_runtime::engine::Engine {
    use oxrelax_runtime::engine::{Engine, EngineConfig};
    let config = EngineConfig {
        context_window: model.context_window as usize,
        prefill_chunk: model.prefill_chunk as usize,
        vocab_size: model.config.vocab_size as usize,
        eos_ids: Vec::new(),
    };
    Engine::new(model.vm, model.weights, config).unwrap()
}

pub use oxrelax_runtime::microkernel::QUANT_GROUP;

/// Random `[rows, depth]` weights that 4-bit group quantization keeps exactly: each group
/// of [`QUANT_GROUP`] along a row (the last one shorter) is an f16-exact scale in
/// `[0.01, 0.04)` times integers in `-7..=7`, one of them -8 (the group's peak, so its
/// scale is the one the quantizer finds). Values reach about 0.3.
pub fn on_the_4_bit_grid(rng: &mut rand::rngs::StdRng, rows: usize, depth: usize) -> Vec<f32> {
    use rand::Rng;
    let mut values = Vec::with_capacity(rows * depth);
    for _ in 0..rows {
        for start in (0..depth).step_by(QUANT_GROUP) {
            let len = QUANT_GROUP.min(depth - start);
            let scale = f32::from(rng.gen_range(10u16..40)) / 1024.0;
            let peak = rng.gen_range(0..len);
            values.extend((0..len).map(|k| {
                let code = if k == peak {
                    -8
                } else {
                    rng.gen_range(-7i8..=7)
                };
                f32::from(code) * scale
            }));
        }
    }
    values
}

/// Random `[rows, depth]` weights (`depth` whole groups) that asymmetric 4-bit groups
/// keep exactly, as a GGUF file's Q4_1 blocks: each group of [`QUANT_GROUP`] is
/// `code * step + low` with codes in `0..=15` (both ends present), an f16-exact step in
/// `[0.01, 0.04)` and a least value `low` whose offset `low + 8 * step` is f16-exact and
/// up to 4 steps off centre.
pub fn on_an_asymmetric_4_bit_grid(
    rng: &mut rand::rngs::StdRng,
    rows: usize,
    depth: usize,
) -> Vec<f32> {
    use rand::Rng;
    assert_eq!(depth % QUANT_GROUP, 0, "whole groups");
    let mut values = Vec::with_capacity(rows * depth);
    for _ in 0..rows * depth / QUANT_GROUP {
        let step = f32::from(rng.gen_range(10u16..40)) / 1024.0;
        let low = (f32::from(rng.gen_range(-16i8..=16)) / 4.0 - 8.0) * step;
        let first = rng.gen_range(0..QUANT_GROUP);
        let ends = [first, (first + rng.gen_range(1..QUANT_GROUP)) % QUANT_GROUP];
        values.extend((0..QUANT_GROUP).map(|k| {
            let code = match k {
                _ if k == ends[0] => 0,
                _ if k == ends[1] => 15,
                _ => rng.gen_range(0u8..=15),
            };
            f32::from(code) * step + low
        }));
    }
    values
}

/// Writes `dir/model.safetensors` holding `tensors`: each a name, a shape and its f32
/// values.
pub fn write_f32_weights<'a>(
    dir: &Path,
    tensors: impl IntoIterator<Item = (&'a str, &'a [usize], &'a [f32])>,
) {
    use safetensors::tensor::TensorView;
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
        .into_iter()
        .map(|(name, shape, values)| {
            let data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            (name.to_string(), shape.to_vec(), data)
        })
        .collect();
    let views = bytes.iter().map(|(name, shape, data)| {
        let view = TensorView::new(safetensors::Dtype::F32, shape.clone(), data);
        (name.clone(), view.unwrap())
    });
    safetensors::serialize_to_file(views, None, &dir.join("model.safetensors")).unwrap();
}
