use super::*;
use crate::ir::{BindingValue, Callee, Function, Var};
use crate::wellformed::check_module;
use crate::{AttrValue, BlockBuilder, DType, Expr, IRModule, StructInfo, SymExpr, SymVar};

fn n() -> SymVar {
    SymVar::bounded("n", 2048)
}

fn tensor(dims: &[SymExpr], dtype: DType) -> StructInfo {
    StructInfo::tensor(dims.to_vec(), dtype)
}

fn f32_input(name: &str, dims: &[SymExpr]) -> Var {
    Var::new(name, tensor(dims, DType::F32))
}

fn c(v: i64) -> SymExpr {
    SymExpr::int(v)
}

/// The op names called by `function`'s bindings, in order.
fn ops(function: &Function) -> Vec<String> {
    function
        .bindings()
        .filter_map(|b| match b.value.expr() {
            Expr::Call(call) => match &call.callee {
                Callee::Op(name) => Some(name.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// Runs `body` in a function `f(x)` with a dataflow block, returning the module.
fn build_with(
    x: &Var,
    params: &[Param],
    body: impl FnOnce(&mut BlockBuilder) -> Result<Expr, NnError>,
) -> IRModule {
    let mut all = vec![x.clone()];
    all.extend(params.iter().map(Param::var));
    let mut bb = BlockBuilder::new();
    bb.function("f", all, true, |bb| {
        let out = bb.dataflow(|bb| {
            let y = body(bb)?;
            Ok::<_, NnError>(bb.emit_output(y)?)
        })?;
        Ok::<_, NnError>(out.into())
    })
    .unwrap();
    let module = bb.finish().unwrap();
    check_module(&module).unwrap();
    module
}

struct TwoLayers {
    layers: ModuleList<Linear>,
}

impl TwoLayers {
    fn new() -> Self {
        let prefix = Prefix::new("model").child("layers");
        TwoLayers {
            layers: ModuleList::new(&prefix, 2, |p| {
                let bias = p.last() == "0";
                Linear::new(p, 64, 64, bias, DType::F32)
            }),
        }
    }
}

impl Module for TwoLayers {
    fn parameters(&self) -> Vec<Param> {
        self.layers.parameters()
    }
}

struct Mlp {
    up: Linear,
    down: Linear,
    act: Activation,
}

impl Mlp {
    fn new(prefix: &Prefix) -> Self {
        Mlp {
            up: Linear::new(&prefix.child("up_proj"), 64, 128, false, DType::F32),
            down: Linear::new(&prefix.child("down_proj"), 128, 64, true, DType::F32),
            act: Activation::Silu,
        }
    }

    fn forward(&self, bb: &mut BlockBuilder, x: &Expr) -> Result<Expr, NnError> {
        let h = self.up.forward(bb, x)?;
        let h = self.act.forward(bb, &h)?;
        self.down.forward(bb, &h)
    }
}

impl Module for Mlp {
    fn parameters(&self) -> Vec<Param> {
        [self.up.parameters(), self.down.parameters()].concat()
    }
}

#[test]
fn prefixes_build_hugging_face_names() {
    let attn = Prefix::new("model")
        .child("layers")
        .index(3)
        .child("self_attn");
    assert_eq!(attn.as_str(), "model.layers.3.self_attn");
    assert_eq!(
        attn.child("q_proj").param("weight"),
        "model.layers.3.self_attn.q_proj.weight"
    );
    assert_eq!(attn.last(), "self_attn");
    assert_eq!(Prefix::root().param("lm_head"), "lm_head");
    assert_eq!(Prefix::root().last(), "x");
}

#[test]
fn module_list_names_parameters_by_index() {
    let model = TwoLayers::new();
    let names: Vec<String> = model.parameters().into_iter().map(|p| p.name).collect();
    assert_eq!(
        names,
        [
            "model.layers.0.weight",
            "model.layers.0.bias",
            "model.layers.1.weight"
        ]
    );
    assert_eq!(model.layers.len(), 2);
    assert!(model.layers.get(2).is_none());
    let weight = &model.layers[1].weight;
    assert_eq!(weight.sinfo, tensor(&[c(64), c(64)], DType::F32));
    assert_eq!(model.layers.iter().filter(|l| l.bias.is_some()).count(), 1);
}

#[test]
fn linear_transposes_the_hugging_face_weight() {
    let lin = Linear::new(&Prefix::new("fc"), 64, 128, true, DType::F32);
    assert_eq!(lin.weight.sinfo, tensor(&[c(128), c(64)], DType::F32));
    let x = f32_input("x", &[c(1), n().expr(), c(64)]);
    let module = build_with(&x, &lin.parameters(), |bb| {
        lin.forward(bb, &x.clone().into())
    });
    let f = &module.functions["f"];
    assert_eq!(ops(f), ["permute_dims", "matmul", "add"]);
    let names: Vec<&str> = f.bindings().map(|b| b.var.name.as_str()).collect();
    assert_eq!(names, ["lv", "lv1", "fc", "gv"]);
    assert_eq!(
        f.ret_sinfo(),
        tensor(&[c(1), n().expr(), c(128)], DType::F32)
    );
}

#[test]
fn linear_without_bias_is_a_single_matmul() {
    let lin = Linear::new(&Prefix::new("fc"), 8, 4, false, DType::F32);
    assert_eq!(lin.parameters().len(), 1);
    let x = f32_input("x", &[n().expr(), c(8)]);
    let module = build_with(&x, &lin.parameters(), |bb| {
        lin.forward(bb, &x.clone().into())
    });
    assert_eq!(ops(&module.functions["f"]), ["permute_dims", "matmul"]);
}

#[test]
fn op_errors_name_the_module() {
    let lin = Linear::new(&Prefix::new("model").child("fc1"), 32, 4, false, DType::F32);
    let x = f32_input("x", &[c(2), c(64)]);
    let mut bb = BlockBuilder::new();
    let mut params = vec![x.clone()];
    params.extend(lin.parameters().iter().map(Param::var));
    bb.begin_function("f", params, false).unwrap();
    let err = lin.forward(&mut bb, &x.into()).unwrap_err();
    assert!(matches!(&err, NnError::Op { module, .. } if module == "model.fc1"));
    assert!(
        err.to_string().starts_with("module `model.fc1`: matmul"),
        "{err}"
    );
}

#[test]
fn exported_mlp_has_symbolic_struct_info_and_hf_parameters() {
    let spec = Spec::new().function(
        "forward",
        vec![f32_input("x", &[c(1), n().expr(), c(64)])],
        |mlp: &Mlp, bb, inputs| mlp.forward(bb, &inputs[0]),
    );
    assert_eq!(spec.function_names(), ["forward"]);
    let module = spec.export(&Mlp::new(&Prefix::new("mlp"))).unwrap();
    check_module(&module).unwrap();
    let f = &module.functions["forward"];
    assert!(f.exported);
    let params: Vec<&str> = f.params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        params,
        [
            "x",
            "mlp.up_proj.weight",
            "mlp.down_proj.weight",
            "mlp.down_proj.bias"
        ]
    );
    assert_eq!(f.ret_sinfo().to_string(), "Tensor((1, n, 64), f32)");
    assert_eq!(f.blocks.len(), 1);
    assert!(f.blocks[0].dataflow);
    assert_eq!(
        ops(f),
        [
            "permute_dims",
            "matmul",
            "silu",
            "permute_dims",
            "matmul",
            "add"
        ]
    );
    let output = f.blocks[0].bindings.last().unwrap();
    assert!(!output.var.dataflow);
    assert_eq!(f.ret.as_var(), Some(&output.var));
}

#[test]
fn input_named_like_a_parameter_is_rejected() {
    let spec = Spec::new().function(
        "forward",
        vec![f32_input("mlp.up_proj.weight", &[c(1), c(64)])],
        |mlp: &Mlp, bb, inputs| mlp.forward(bb, &inputs[0]),
    );
    let err = spec.export(&Mlp::new(&Prefix::new("mlp"))).unwrap_err();
    assert!(matches!(
        err,
        NnError::Build(e) if matches!(*e, crate::builder::BuildError::DuplicateParam { .. })
    ));
}

#[test]
fn embedding_takes_rows_by_token_id() {
    let emb = Embedding::new(
        &Prefix::new("model").child("embed_tokens"),
        1000,
        16,
        DType::F32,
    );
    assert_eq!(emb.parameters()[0].name, "model.embed_tokens.weight");
    let ids = Var::new("ids", tensor(&[c(1), n().expr()], DType::I32));
    let module = build_with(&ids, &emb.parameters(), |bb| {
        emb.forward(bb, &ids.clone().into())
    });
    let f = &module.functions["f"];
    assert_eq!(ops(f), ["take"]);
    assert_eq!(f.bindings().next().unwrap().var.name, "embed_tokens");
    assert_eq!(
        f.ret_sinfo(),
        tensor(&[c(1), n().expr(), c(16)], DType::F32)
    );
}

#[test]
fn norms_normalize_the_last_axis_with_their_epsilon() {
    let x = f32_input("x", &[n().expr(), c(32)]);
    let rms = RMSNorm::new(&Prefix::new("norm"), 32, 1e-6, DType::F32);
    let ln = LayerNorm::new(&Prefix::new("ln"), 32, 1e-5, DType::F32);
    let params = [rms.parameters(), ln.parameters()].concat();
    let names: Vec<&str> = params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["norm.weight", "ln.weight", "ln.bias"]);
    let module = build_with(&x, &params, |bb| {
        let h = rms.forward(bb, &x.clone().into())?;
        ln.forward(bb, &h)
    });
    let f = &module.functions["f"];
    assert_eq!(ops(f), ["rms_norm", "layer_norm"]);
    let Expr::Call(call) = f.bindings().next().unwrap().value.expr() else {
        panic!("expected a call")
    };
    assert_eq!(call.attrs["epsilon"], AttrValue::Float(1e-6));
    assert_eq!(f.ret_sinfo(), x.sinfo);
}

#[test]
fn activations_emit_their_ops() {
    let x = f32_input("x", &[c(2), c(3)]);
    let module = build_with(&x, &[], |bb| {
        let mut h: Expr = x.clone().into();
        for act in [
            Activation::Silu,
            Activation::Gelu,
            Activation::GeluTanh,
            Activation::Relu,
        ] {
            h = act.forward(bb, &h)?;
        }
        Ok(h)
    });
    let f = &module.functions["f"];
    assert_eq!(ops(f), ["silu", "gelu", "gelu", "maximum"]);
    let calls: Vec<_> = f
        .bindings()
        .filter_map(|b| match &b.value {
            BindingValue::Expr(Expr::Call(call)) => Some(call.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(calls[2].attrs["approximate"], AttrValue::Str("tanh".into()));
    assert_eq!(calls[3].args[1].sinfo(), tensor(&[], DType::F32));
    assert_eq!(f.ret_sinfo(), x.sinfo);
    assert_eq!(
        Activation::from_name("gelu_pytorch_tanh"),
        Some(Activation::GeluTanh)
    );
    assert_eq!(Activation::from_name("swish"), None);
}

/// Two-head causal self-attention over `[1, n, 32]`, without a KV cache.
struct TinyAttention {
    q_proj: Linear,
    k_proj: Linear,
    v_proj: Linear,
    o_proj: Linear,
}

impl TinyAttention {
    const HEADS: i64 = 2;
    const HEAD_DIM: i64 = 16;

    fn new(prefix: &Prefix) -> Self {
        let linear = |name: &str| Linear::new(&prefix.child(name), 32, 32, false, DType::F32);
        TinyAttention {
            q_proj: linear("q_proj"),
            k_proj: linear("k_proj"),
            v_proj: linear("v_proj"),
            o_proj: linear("o_proj"),
        }
    }

    /// `[1, n, 32]` -> `[1, heads, n, head_dim]`.
    fn split_heads(bb: &mut BlockBuilder, x: &Expr) -> Result<Expr, NnError> {
        let err = NnError::op("split_heads");
        let shape = vec![c(1), n().expr(), c(Self::HEADS), c(Self::HEAD_DIM)];
        let x = crate::op::reshape(x, shape).map_err(err)?;
        let x = crate::op::permute_dims(&x, Some(vec![0, 2, 1, 3])).map_err(err)?;
        Ok(bb.emit(x)?.into())
    }

    fn forward(&self, bb: &mut BlockBuilder, x: &Expr) -> Result<Expr, NnError> {
        use crate::op;
        let err = NnError::op("attention");
        let mut heads = Vec::new();
        for proj in [&self.q_proj, &self.k_proj, &self.v_proj] {
            let projected = proj.forward(bb, x)?;
            heads.push(Self::split_heads(bb, &projected)?);
        }
        let [q, k, v] = <[Expr; 3]>::try_from(heads).expect("three projections");
        let k_t = op::permute_dims(&k, Some(vec![0, 1, 3, 2])).map_err(err)?;
        let scale = Expr::Constant(crate::ir::Constant {
            dtype: DType::F32,
            shape: vec![],
            values: vec![0.25],
        });
        let scores = op::multiply(&op::matmul(&q, &k_t).map_err(err)?, &scale).map_err(err)?;
        let scores = bb.emit_named(scores, "scores")?;
        let mask = causal_mask(bb, &n().expr(), DType::F32)?;
        let masked = op::add(&scores.into(), &mask).map_err(err)?;
        let probs = bb.emit_named(op::softmax(&masked, -1).map_err(err)?, "probs")?;
        let out = op::matmul(&probs.into(), &v).map_err(err)?;
        let out = op::permute_dims(&out, Some(vec![0, 2, 1, 3])).map_err(err)?;
        let out = op::reshape(&out, vec![c(1), n().expr(), c(32)]).map_err(err)?;
        let out = bb.emit(out)?;
        self.o_proj.forward(bb, &out.into())
    }
}

impl Module for TinyAttention {
    fn parameters(&self) -> Vec<Param> {
        [&self.q_proj, &self.k_proj, &self.v_proj, &self.o_proj]
            .iter()
            .flat_map(|l| l.parameters())
            .collect()
    }
}

#[test]
fn tiny_attention_with_causal_mask_is_well_formed() {
    let spec = Spec::new().function(
        "attend",
        vec![f32_input("x", &[c(1), n().expr(), c(32)])],
        |attn: &TinyAttention, bb, inputs| attn.forward(bb, &inputs[0]),
    );
    let attention = TinyAttention::new(&Prefix::new("self_attn"));
    let module = spec.export(&attention).unwrap();
    check_module(&module).unwrap();
    let f = &module.functions["attend"];
    assert_eq!(f.params.len(), 5);
    assert_eq!(f.params[4].name, "self_attn.o_proj.weight");
    assert_eq!(
        f.ret_sinfo(),
        tensor(&[c(1), n().expr(), c(32)], DType::F32)
    );
    let by_name = |name: &str| f.bindings().find(|b| b.var.name == name).unwrap();
    let nn = [n().expr(), n().expr()];
    assert_eq!(by_name("causal_mask").var.sinfo, tensor(&nn, DType::F32));
    let heads = [c(1), c(2), n().expr(), n().expr()];
    assert_eq!(by_name("scores").var.sinfo, tensor(&heads, DType::F32));
    assert_eq!(by_name("probs").var.sinfo, tensor(&heads, DType::F32));
    let ops = ops(f);
    let position = |op: &str| ops.iter().position(|o| o == op).unwrap();
    assert!(position("full") < position("triu"));
    assert!(position("triu") < position("softmax"));
    let Expr::Call(mask) = by_name("causal_mask").value.expr() else {
        panic!("expected a call")
    };
    assert_eq!(mask.attrs["k"], AttrValue::Int(1));
    insta::with_settings!({snapshot_path => "../../../snapshots"}, {
        insta::assert_snapshot!(crate::text::print_module(&module));
    });
}

/// Hugging Face's default RoPE frequencies: `theta^(-2j / dim)`.
fn default_inv_freq(theta: f64, dim: usize) -> impl Fn(usize) -> f64 {
    move |j| 1.0 / theta.powf(2.0 * j as f64 / dim as f64)
}

/// The Hugging Face rotary embedding of `x` (`[seq, heads, dim]`, batch 1), in f64, with
/// frequency `inv_freq(j)` for lane `j < dim / 2`.
fn rope_reference(
    x: &[f64],
    (seq, heads, dim): (usize, usize, usize),
    offset: usize,
    inv_freq: &dyn Fn(usize) -> f64,
) -> Vec<f64> {
    let half = dim / 2;
    let mut out = vec![0.0; x.len()];
    for s in 0..seq {
        for h in 0..heads {
            let base = (s * heads + h) * dim;
            for i in 0..dim {
                let j = i % half;
                let angle = (offset + s) as f64 * inv_freq(j);
                let rotated = if i < half {
                    -x[base + i + half]
                } else {
                    x[base + i - half]
                };
                out[base + i] = x[base + i] * angle.cos() + rotated * angle.sin();
            }
        }
    }
    out
}

/// Runs `rope` over `[1, 3, 2, dim]` at positions `start..start + 3` (through the TIR
/// interpreter) and compares with [`rope_reference`] using `inv_freq`.
fn check_rope(rope: RotaryEmbedding, dim: usize, start: usize, inv_freq: &dyn Fn(usize) -> f64) {
    let m = SymVar::bounded("m", 4096);
    let offset = m.expr();
    let spec = Spec::new().function(
        "rope",
        vec![
            f32_input("x", &[c(1), n().expr(), c(2), c(dim as i64)]),
            Var::new("cache_len", StructInfo::Shape(Some(vec![m.expr()]))),
        ],
        move |rope: &RotaryEmbedding, bb, inputs| rope.forward(bb, &inputs[0], &offset),
    );
    let module = spec.export(&rope).unwrap();
    check_module(&module).unwrap();
    let f = &module.functions["rope"];
    assert_eq!(
        f.ret_sinfo().to_string(),
        format!("Tensor((1, n, 2, {dim}), f32)")
    );
    let table_func = &module.prim_funcs["rotary_table"];
    assert_eq!(table_func.dims, [m, n()]);
    assert_eq!(table_func.params.len(), 1, "no inputs, the table out");
    let func = &module.prim_funcs["rotary"];
    assert_eq!(func.params.len(), 3);
    let (seq, heads) = (3, 2);
    let x: Vec<f64> = (0..seq * heads * dim)
        .map(|k| ((k * 7 % 11) as f64 - 5.0) / 4.0)
        .collect();
    let dims = [
        ("n".to_string(), seq as i64),
        ("m".to_string(), start as i64),
    ]
    .into_iter()
    .collect();
    let table = crate::tir::run_with_inputs(table_func, &dims, &[]).unwrap();
    let inputs = [x.clone(), table[0].clone()];
    let out = crate::tir::run_with_inputs(func, &dims, &inputs).unwrap();
    let expected = rope_reference(&x, (seq, heads, dim), start, inv_freq);
    for (got, want) in out[0].iter().zip(&expected) {
        assert!((got - want).abs() < 1e-4, "got {got}, want {want}");
    }
}

#[test]
fn rope_over_symbolic_n_with_offset_m_matches_hugging_face() {
    let rope = RotaryEmbedding::new(8, 10000.0).unwrap();
    check_rope(rope, 8, 5, &default_inv_freq(10000.0, 8));
}

/// Hugging Face's `_compute_llama3_parameters`, in f64.
fn llama3_inv_freq(base: impl Fn(usize) -> f64, s: Llama3RopeScaling) -> impl Fn(usize) -> f64 {
    move |j| {
        let inv_freq = base(j);
        let wavelen = 2.0 * std::f64::consts::PI / inv_freq;
        let old = s.original_max_position_embeddings;
        if wavelen < old / s.high_freq_factor {
            inv_freq
        } else if wavelen > old / s.low_freq_factor {
            inv_freq / s.factor
        } else {
            let smooth =
                (old / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
            (1.0 - smooth) * inv_freq / s.factor + smooth * inv_freq
        }
    }
}

#[test]
fn rope_with_llama3_and_linear_scaling_matches_hugging_face() {
    // dim 16, theta 1e4: wavelengths 6.3, 20, 63, 199 (kept: below 2048 / 8 = 256),
    // 628, 1987 (smoothed) and 6283, 19869 (scaled: above 2048 / 1).
    let scaling = Llama3RopeScaling {
        factor: 8.0,
        low_freq_factor: 1.0,
        high_freq_factor: 8.0,
        original_max_position_embeddings: 2048.0,
    };
    let rope = RotaryEmbedding::new(16, 10000.0)
        .unwrap()
        .with_scaling(RopeScaling::Llama3(scaling))
        .unwrap();
    let inv_freq = llama3_inv_freq(default_inv_freq(10000.0, 16), scaling);
    check_rope(rope, 16, 700, &inv_freq);
    let linear = RopeScaling::Linear { factor: 8.0 };
    let rope = RotaryEmbedding::new(16, 10000.0)
        .unwrap()
        .with_scaling(linear);
    let base = default_inv_freq(10000.0, 16);
    check_rope(rope.unwrap(), 16, 700, &move |j| base(j) / 8.0);
    let zero = RopeScaling::Linear { factor: 0.0 };
    let err = RotaryEmbedding::new(16, 10000.0)
        .unwrap()
        .with_scaling(zero);
    assert!(err.unwrap_err().to_string().contains("positive"));
    let bad = Llama3RopeScaling {
        high_freq_factor: 1.0,
        ..scaling
    };
    let err = RotaryEmbedding::new(16, 10000.0)
        .unwrap()
        .with_scaling(RopeScaling::Llama3(bad))
        .unwrap_err();
    assert!(err.to_string().contains("high_freq_factor"), "{err}");
}

#[test]
fn rope_rejects_bad_configurations_and_inputs() {
    assert!(matches!(
        RotaryEmbedding::new(7, 10000.0),
        Err(NnError::Config { .. })
    ));
    let rope = RotaryEmbedding::new(8, 10000.0).unwrap();
    let x = f32_input("x", &[c(1), n().expr(), c(2), c(6)]);
    let mut bb = BlockBuilder::new();
    bb.begin_function("f", vec![x.clone()], false).unwrap();
    let err = rope.forward(&mut bb, &x.into(), &c(0)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "module `rotary_embedding`: input must be a float tensor [batch, seq, heads, 8], \
         got Tensor((1, n, 2, 6), f32)"
    );
}

#[test]
fn exported_module_prints_and_parses_back() {
    let spec = Spec::new().function(
        "forward",
        vec![f32_input("x", &[c(1), n().expr(), c(64)])],
        |mlp: &Mlp, bb, inputs| mlp.forward(bb, &inputs[0]),
    );
    let module = spec.export(&Mlp::new(&Prefix::new("mlp"))).unwrap();
    let text = crate::text::print_module(&module);
    insta::with_settings!({snapshot_path => "../../../snapshots"}, {
        insta::assert_snapshot!(text);
    });
    assert_eq!(crate::text::parse_module(&text).unwrap(), module);
}
