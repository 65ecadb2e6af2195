//! A two-layer decoder (RMSNorm, grouped-query attention with RoPE over a KV cache, SwiGLU
//! MLP) built with the DSL runs through the whole compiler in the VM: a prefill of 7
//! tokens and 3 decode steps, each compared with an ndarray (f64) reference that keeps its
//! own KV cache. Plus its memory plan and the errors a caller can run into.

mod common;
use common::{output, tensor};

use common::transformer::{
    past, tokens, transformer_module, EPS, HEADS, HEAD_DIM, HIDDEN, KV_HEADS, LAYERS, MAX_CONTEXT,
    MAX_TOKENS, THETA,
};
use ndarray::{s, Array, Array2, ArrayD, Axis, Ix2, IxDyn};
use oxrelax::model::transform_weights;
use oxrelax::passes::{arena_size, planned_bytes, Instrument, ARENA_OFFSETS, TRANSFORM_PARAMS};
use oxrelax::{build, Built};
use oxrelax_dsl::ir::BindingValue;
use oxrelax_dsl::nn::{NnError, RotaryEmbedding};
use oxrelax_dsl::{AttrValue, BlockBuilder, DType, Expr, IRModule, StructInfo, SymExpr, Var};
use oxrelax_runtime::vm::Instr;
use oxrelax_runtime::{SharedKvCache, Value};
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::collections::HashMap;

/// What every call's output may differ from the f64 reference by (the compiler computes
/// in f32).
const TOLERANCE: f64 = 1e-4;

/// The prompt length, then the decode steps.
const STEPS: [usize; 4] = [7, 1, 1, 1];

/// Uniform values of standard deviation `std` around `mean`.
fn random(rng: &mut StdRng, shape: &[usize], mean: f32, std: f32) -> ArrayD<f32> {
    let half_width = std * 3f32.sqrt();
    Array::from_shape_fn(IxDyn(shape), |_| {
        mean + rng.gen_range(-half_width..half_width)
    })
}

/// The model's weights (the parameters of `transform_params`), in parameter order: norm
/// scales around 1, projections with std 0.1.
fn random_weights(built: &Built, seed: u64) -> Vec<(String, ArrayD<f32>)> {
    let mut rng = StdRng::seed_from_u64(seed);
    built.module.functions[TRANSFORM_PARAMS]
        .params
        .iter()
        .map(|param| {
            let dims = param.sinfo.as_tensor().and_then(|t| t.dims()).unwrap();
            let shape: Vec<usize> = dims
                .iter()
                .map(|d| d.as_const().unwrap() as usize)
                .collect();
            let mean = if param.name.ends_with("norm.weight") {
                1.0
            } else {
                0.0
            };
            (param.name.clone(), random(&mut rng, &shape, mean, 0.1))
        })
        .collect()
}

/// `forward`'s weights: the model's weights through `transform_params` (packed once).
fn forward_weights(built: &mut Built, weights: &[(String, ArrayD<f32>)]) -> Vec<Value> {
    let raw = weights.iter().map(|(_, w)| tensor(w)).collect();
    transform_weights(built, raw).expect("transform_params runs")
}

/// `forward`'s arguments: `x`, the cache, then every (transformed) weight.
fn arguments(x: &ArrayD<f32>, cache: &Value, weights: &[Value]) -> Vec<Value> {
    [tensor(x), cache.clone()]
        .into_iter()
        .chain(weights.iter().cloned())
        .collect()
}

/// The committed length of a KV cache object.
fn cache_len(cache: &Value) -> usize {
    let shared = cache.as_object::<SharedKvCache>().expect("a KV cache");
    shared.lock().unwrap().len()
}

fn built_transformer() -> Built {
    build(transformer_module(), Instrument::from_env()).expect("the transformer builds")
}

/// The same decoder in plain f64 ndarray, with its own KV cache.
struct Reference {
    weights: HashMap<String, ArrayD<f64>>,
    /// Per layer, K and V of every position so far, each `[KV_HEADS, HEAD_DIM]`.
    keys: Vec<Vec<Array2<f64>>>,
    values: Vec<Vec<Array2<f64>>>,
}

impl Reference {
    fn new(weights: &[(String, ArrayD<f32>)]) -> Self {
        Reference {
            weights: weights
                .iter()
                .map(|(name, w)| (name.clone(), w.mapv(f64::from)))
                .collect(),
            keys: vec![Vec::new(); LAYERS],
            values: vec![Vec::new(); LAYERS],
        }
    }

    fn weight(&self, name: &str) -> ndarray::ArrayView2<'_, f64> {
        self.weights[name]
            .view()
            .into_dimensionality::<Ix2>()
            .unwrap()
    }

    /// `x W^T` for the linear layer `name` (`..._proj`).
    fn linear(&self, name: &str, x: &Array2<f64>) -> Array2<f64> {
        x.dot(&self.weight(&format!("{name}.weight")).t())
    }

    fn rms_norm(&self, name: &str, x: &Array2<f64>) -> Array2<f64> {
        let scale = &self.weights[&format!("{name}.weight")];
        let mut out = x.clone();
        for mut row in out.rows_mut() {
            let mean_square = row.mapv(|v| v * v).mean().unwrap();
            let inv = 1.0 / (mean_square + EPS).sqrt();
            row.iter_mut().zip(scale).for_each(|(v, g)| *v *= inv * g);
        }
        out
    }

    /// Runs `x` (`[n, HIDDEN]`) through the decoder, extending the cache by `n` positions.
    fn forward(&mut self, x: &Array2<f64>) -> Array2<f64> {
        let mut x = x.clone();
        for layer in 0..LAYERS {
            let prefix = format!("model.layers.{layer}");
            let h = self.rms_norm(&format!("{prefix}.input_layernorm"), &x);
            x = x + self.attention(layer, &format!("{prefix}.self_attn"), &h);
            let h = self.rms_norm(&format!("{prefix}.post_attention_layernorm"), &x);
            let gate = self.linear(&format!("{prefix}.mlp.gate_proj"), &h);
            let up = self.linear(&format!("{prefix}.mlp.up_proj"), &h);
            let hidden = gate.mapv(|g| g / (1.0 + (-g).exp())) * up;
            x = x + self.linear(&format!("{prefix}.mlp.down_proj"), &hidden);
        }
        self.rms_norm("model.norm", &x)
    }

    fn attention(&mut self, layer: usize, prefix: &str, h: &Array2<f64>) -> Array2<f64> {
        let (n, past) = (h.nrows(), self.keys[layer].len());
        let q = self.linear(&format!("{prefix}.q_proj"), h);
        let k = self.linear(&format!("{prefix}.k_proj"), h);
        let v = self.linear(&format!("{prefix}.v_proj"), h);
        for i in 0..n {
            let heads = |a: &Array2<f64>, count: i64| {
                a.row(i)
                    .to_owned()
                    .into_shape_with_order((count as usize, HEAD_DIM as usize))
                    .unwrap()
            };
            self.keys[layer].push(rotate(&heads(&k, KV_HEADS), past + i));
            self.values[layer].push(heads(&v, KV_HEADS));
        }
        let (hd, group) = (HEAD_DIM as usize, (HEADS / KV_HEADS) as usize);
        let mut out = Array2::zeros((n, (HEADS * HEAD_DIM) as usize));
        for i in 0..n {
            let qi = q
                .row(i)
                .to_owned()
                .into_shape_with_order((HEADS as usize, hd))
                .unwrap();
            let qi = rotate(&qi, past + i);
            for head in 0..HEADS as usize {
                let kv = head / group;
                let visible = 0..=past + i;
                let scores: Vec<f64> = visible
                    .clone()
                    .map(|t| qi.row(head).dot(&self.keys[layer][t].row(kv)) / (hd as f64).sqrt())
                    .collect();
                let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                let total: f64 = weights.iter().sum();
                let mut o = out.slice_mut(s![i, head * hd..(head + 1) * hd]);
                for (t, w) in visible.zip(&weights) {
                    o.scaled_add(w / total, &self.values[layer][t].row(kv));
                }
            }
        }
        self.linear(&format!("{prefix}.o_proj"), &out)
    }
}

/// RoPE (Hugging Face convention) of every head (row) of `x` at position `pos`.
fn rotate(x: &Array2<f64>, pos: usize) -> Array2<f64> {
    let half = HEAD_DIM as usize / 2;
    let mut out = x.clone();
    for (mut o, row) in out.rows_mut().into_iter().zip(x.rows()) {
        for i in 0..half {
            let inv_freq = THETA.powf(-2.0 * i as f64 / HEAD_DIM as f64);
            let (sin, cos) = (pos as f64 * inv_freq).sin_cos();
            o[i] = row[i] * cos - row[i + half] * sin;
            o[i + half] = row[i + half] * cos + row[i] * sin;
        }
    }
    out
}

#[test]
fn two_layers_with_kv_cache_match_ndarray_over_prefill_and_decode() {
    let mut built = built_transformer();
    let raw = random_weights(&built, 7);
    let mut reference = Reference::new(&raw);
    let weights = forward_weights(&mut built, &raw);
    let cache = built.vm.call("create_kv_cache", &[]).unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    let mut diffs = Vec::new();
    for n in STEPS {
        let x = random(&mut rng, &[1, n, HIDDEN as usize], 0.0, 1.0);
        let got = output(
            built
                .vm
                .call("forward", &arguments(&x, &cache, &weights))
                .unwrap(),
        );
        let x2 = x
            .mapv(f64::from)
            .into_shape_with_order((n, HIDDEN as usize));
        let want = reference.forward(&x2.unwrap());
        assert_eq!(got.shape(), &[1, n, HIDDEN as usize]);
        let diff = got
            .index_axis(Axis(0), 0)
            .iter()
            .zip(&want)
            .map(|(g, w)| (f64::from(*g) - w).abs())
            .fold(0.0, f64::max);
        diffs.push(diff);
    }
    assert_eq!(cache_len(&cache), STEPS.iter().sum::<usize>());
    println!("max |diff| per call (prefill 7, decode x3): {diffs:?}");
    assert!(diffs.iter().all(|d| *d <= TOLERANCE), "{diffs:?}");
}

/// The bytes a tensor of `elements` f32 values takes in the plan.
fn f32_bytes(elements: i64) -> i64 {
    planned_bytes(&StructInfo::tensor(
        vec![SymExpr::int(elements)],
        DType::F32,
    ))
    .unwrap()
}

#[test]
fn memory_plan_is_sized_from_the_bounds_of_n_and_m() {
    let built = built_transformer();
    let forward = &built.module.functions["forward"];
    let planned: Vec<i64> = forward
        .bindings()
        .filter_map(|binding| match &binding.value {
            BindingValue::Expr(Expr::Call(call)) => {
                let Some(AttrValue::Ints(_)) = call.attrs.get(ARENA_OFFSETS) else {
                    return None;
                };
                Some(planned_bytes(&call.sinfo).expect("bounded"))
            }
            _ => None,
        })
        .collect();
    let vm_function = &built.executable.functions["forward"];
    let arena = arena_size(forward);
    assert_eq!(vm_function.arena_size as i64, arena);
    // The largest intermediate: attention scores [HEADS, n, m + n] at n <= 32, m <= 64.
    let scores = f32_bytes(HEADS * MAX_TOKENS * (MAX_CONTEXT + MAX_TOKENS));
    assert_eq!(planned.iter().max(), Some(&scores));
    let total: i64 = planned.iter().sum();
    assert!(
        arena >= scores && arena < total,
        "arena {arena}, total {total}"
    );
    // Reuse keeps the arena within a few of the largest tensor (about 2.9 of it today).
    assert!(arena <= 4 * scores, "arena {arena}");
    let kernel_calls: Vec<u32> = vm_function
        .instrs
        .iter()
        .filter_map(|i| match i {
            Instr::CallKernel { kernel, .. } => Some(*kernel),
            _ => None,
        })
        .collect();
    let distinct: std::collections::BTreeSet<_> = kernel_calls.iter().collect();
    println!(
        "forward: {} instructions, {} kernel calls of {} distinct kernels, arena {arena} \
         bytes for {} planned tensors totalling {total} bytes",
        vm_function.instrs.len(),
        kernel_calls.len(),
        distinct.len(),
        planned.len(),
    );
}

#[test]
fn kv_cache_overflow_names_the_capacity_and_the_requested_length() {
    let mut built = built_transformer();
    let raw = random_weights(&built, 3);
    let weights = forward_weights(&mut built, &raw);
    let cache = built.vm.call("create_kv_cache", &[]).unwrap();
    let mut rng = StdRng::seed_from_u64(4);
    for n in [32, 28] {
        let x = random(&mut rng, &[1, n, HIDDEN as usize], 0.0, 1.0);
        built
            .vm
            .call("forward", &arguments(&x, &cache, &weights))
            .unwrap();
    }
    let x = random(&mut rng, &[1, 8, HIDDEN as usize], 0.0, 1.0);
    let err = built
        .vm
        .call("forward", &arguments(&x, &cache, &weights))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("kv_cache.append")
            && err.contains(&format!("capacity is {MAX_CONTEXT} positions"))
            && err.contains("would need 68"),
        "{err}"
    );
    // The failed step appended nothing: the cache still holds the 60 positions.
    assert_eq!(cache_len(&cache), 60);
}

#[test]
fn wrong_argument_shapes_are_clear_errors() {
    let mut built = built_transformer();
    let raw = random_weights(&built, 5);
    let mut weights = forward_weights(&mut built, &raw);
    let cache = built.vm.call("create_kv_cache", &[]).unwrap();
    let mut rng = StdRng::seed_from_u64(6);
    let call = |built: &mut Built, x: &ArrayD<f32>, weights: &[Value]| {
        built
            .vm
            .call("forward", &arguments(x, &cache, weights))
            .unwrap_err()
            .to_string()
    };
    let narrow = random(&mut rng, &[1, 3, 32], 0.0, 1.0);
    let err = call(&mut built, &narrow, &weights);
    assert!(
        err.contains("forward") && err.contains("[1, 3, 32]"),
        "{err}"
    );
    let too_long = random(&mut rng, &[1, MAX_TOKENS as usize + 1, 64], 0.0, 1.0);
    let err = call(&mut built, &too_long, &weights);
    assert!(
        err.contains("`n` = 33") && err.contains("upper bound 32"),
        "{err}"
    );
    let x = random(&mut rng, &[1, 2, 64], 0.0, 1.0);
    let name = built.module.functions["forward"].params[3].name.clone();
    weights[1] = tensor(&random(&mut rng, &[64, 48], 0.0, 0.1));
    let err = call(&mut built, &x, &weights);
    assert!(
        err.contains("forward") && err.contains(&name) && err.contains("[64, 48]"),
        "{err}"
    );
}

/// `forward(x: [1, n, 2, 16])` returning `body(x)`, where `m` is bound by nothing.
fn module_with_unbound_m(
    body: impl FnOnce(&mut BlockBuilder, Expr) -> Result<Expr, NnError>,
) -> IRModule {
    let shape = vec![
        SymExpr::int(1),
        tokens().expr(),
        SymExpr::int(2),
        SymExpr::int(16),
    ];
    let x = Var::new("x", StructInfo::tensor(shape, DType::F32));
    let mut bb = BlockBuilder::new();
    bb.function("forward", vec![x.clone()], true, |bb| {
        let y = bb.dataflow(|bb| {
            let y = body(bb, Expr::from(x))?;
            Ok::<_, NnError>(bb.emit_output(y)?)
        })?;
        Ok::<_, NnError>(Expr::from(y))
    })
    .unwrap();
    bb.finish().unwrap()
}

/// The message of the build error of `module` (checking well-formedness after every pass
/// when `verify`).
fn build_error(module: IRModule, verify: bool) -> String {
    let instrument = Instrument {
        verify,
        ..Instrument::default()
    };
    match build(module, instrument) {
        Ok(_) => panic!("a module using an unbound dim must not build"),
        Err(err) => err.to_string(),
    }
}

#[test]
fn an_unbound_symbolic_dim_is_a_clear_error() {
    // RoPE at offset `m`, a dim only the kernel uses: lowering finds nothing binding it;
    // with `verify`, the well-formedness check rejects the call first.
    let rope = RotaryEmbedding::new(16, THETA).unwrap();
    let rotated = || module_with_unbound_m(|bb, x| rope.forward(bb, &x, &past().expr()));
    for verify in [false, true] {
        let err = build_error(rotated(), verify);
        assert!(err.contains("forward") && err.contains("`m`"), "{err}");
        assert_eq!(err.contains("not well formed"), verify, "{err}");
    }
    // A result of shape [m, 16]: lowering cannot compute `m`; with `verify` the
    // well-formedness check rejects the binding first.
    let zeros = || {
        module_with_unbound_m(|bb, _| {
            let zeros = oxrelax_dsl::op::zeros(vec![past().expr(), SymExpr::int(16)], DType::F32);
            Ok(bb.emit(zeros.map_err(NnError::op("zeros"))?)?.into())
        })
    };
    for verify in [false, true] {
        let err = build_error(zeros(), verify);
        assert!(err.contains("forward") && err.contains("`m`"), "{err}");
    }
}
