//! Scheduling must not change what a function computes: legalized kernels evaluated with
//! the TIR reference evaluator before and after the default schedule give equal results.

use crate::{default_schedule, AttentionRule, GemvRule, MatmulRule, ScheduleConfig, ScheduleRule};
use oxrelax_dsl::legalize::legalize_call;
use oxrelax_dsl::op::Mask;
use oxrelax_dsl::sym::SymBindings;
use oxrelax_dsl::tir::run_with_inputs;
use oxrelax_dsl::{op, DType, Expr, StructInfo, SymExpr, SymVar, Target, Var};
use rand::{rngs::StdRng, Rng, SeedableRng};

fn n() -> SymVar {
    SymVar::bounded("n", 64)
}

fn tensor(name: &str, shape: Vec<SymExpr>, dtype: DType) -> Expr {
    Expr::Var(Var::new(name, StructInfo::tensor(shape, dtype)))
}

fn calls() -> Vec<(&'static str, Expr)> {
    let f = DType::F32;
    let x = tensor("x", vec![n().expr(), 17.into()], f);
    let y = tensor("y", vec![1.into(), 17.into()], f);
    let w = tensor("w", vec![17.into(), 5.into()], f);
    let g = tensor("g", vec![17.into()], f);
    let ids = tensor("ids", vec![n().expr()], DType::I32);
    let table = tensor("table", vec![9.into(), 17.into()], f);
    vec![
        ("matmul", op::matmul(&x, &w).unwrap()),
        ("add", op::add(&x, &y).unwrap()),
        ("softmax", op::softmax(&x, -1).unwrap()),
        ("rms_norm", op::rms_norm(&x, &g, vec![-1], 1e-5).unwrap()),
        (
            "layer_norm",
            op::layer_norm(&x, &g, &g, vec![-1], 1e-5).unwrap(),
        ),
        ("sum", op::sum(&x, Some(vec![-1]), false).unwrap()),
        ("max", op::max(&x, None, true).unwrap()),
        ("take", op::take(&table, &ids, 0).unwrap()),
        ("permute", op::permute_dims(&x, None).unwrap()),
        ("silu", op::silu(&x).unwrap()),
    ]
}

#[test]
fn default_schedule_preserves_results() {
    let config = ScheduleConfig {
        parallel_min_work: 1,
    };
    let mut rng = StdRng::seed_from_u64(7);
    for (name, expr) in calls() {
        let Expr::Call(call) = expr else {
            unreachable!("op constructors build calls")
        };
        let func = legalize_call(&call).unwrap().func;
        let scheduled = default_schedule(&func, &config);
        assert_ne!(
            scheduled, func,
            "{name}: the default schedule changed nothing"
        );
        for value in [1, 3, 17] {
            let dims = SymBindings::from([("n".to_string(), value)]);
            let inputs = random_inputs(&func, &dims, &mut rng);
            let before = run_with_inputs(&func, &dims, &inputs).unwrap();
            let after = run_with_inputs(&scheduled, &dims, &inputs).unwrap();
            assert_eq!(before, after, "{name} with n = {value}");
        }
    }
}

#[test]
fn reductions_accumulate_in_a_register() {
    let Expr::Call(call) = calls().remove(0).1 else {
        unreachable!("matmul is a call")
    };
    let func = legalize_call(&call).unwrap().func;
    let text = oxrelax_dsl::text::print_prim_func("matmul", &crate::accumulate_in_registers(&func));
    assert!(text.contains("alloc out_acc0: Buffer((1,), f32)"), "{text}");
    assert!(text.contains("out_acc0[0] = out_acc0[0] + "), "{text}");
    assert!(text.contains("= out_acc0[0]\n"), "{text}");
}

#[test]
fn invariant_loads_are_read_once_before_their_loop() {
    let Expr::Call(call) = calls().remove(2).1 else {
        unreachable!("softmax is a call")
    };
    let func = legalize_call(&call).unwrap().func;
    let text = oxrelax_dsl::text::print_prim_func("softmax", &crate::hoist_invariant_loads(&func));
    // The output stage divides by the row sum: read once per row, not per element.
    assert!(text.contains("let inv"), "{text}");
    assert!(!text.contains("/ exp_sum["), "{text}");
}

#[test]
fn long_contiguous_reductions_run_across_lanes_and_keep_their_results() {
    let config = ScheduleConfig::default();
    let mut rng = StdRng::seed_from_u64(11);
    let f = DType::F32;
    let rows = [vec![3.into(), 40.into()], vec![3.into(), n().expr()]];
    for shape in rows {
        let x = tensor("x", shape.clone(), f);
        let reductions = [
            ("sum", op::sum(&x, Some(vec![-1]), false).unwrap()),
            ("max", op::max(&x, Some(vec![-1]), false).unwrap()),
        ];
        for (name, expr) in reductions {
            let func = legalized(expr);
            let scheduled = default_schedule(&func, &config);
            let text = oxrelax_dsl::text::print_prim_func(name, &scheduled);
            assert!(text.contains("_part: Buffer((16,), f32)"), "{text}");
            // 1 and 3: only the tail; 17, 40, 64: whole runs of 16 and a tail, or none.
            for value in [1, 3, 17, 40, 64] {
                let dims = SymBindings::from([("n".to_string(), value)]);
                let inputs = random_inputs(&func, &dims, &mut rng);
                let before = run_with_inputs(&func, &dims, &inputs).unwrap();
                let after = run_with_inputs(&scheduled, &dims, &inputs).unwrap();
                for (b, a) in before[0].iter().zip(&after[0]) {
                    let close = (a - b).abs() <= 1e-5 * (1.0 + b.abs());
                    assert!(close, "{name} {shape:?} n {value}: {a} vs {b}");
                }
            }
        }
    }
}

/// Random inputs for `func`'s input buffers with `dims` bound (ids in `0..9`).
fn random_inputs(
    func: &oxrelax_dsl::tir::PrimFunc,
    dims: &SymBindings,
    rng: &mut StdRng,
) -> Vec<Vec<f64>> {
    func.inputs()
        .iter()
        .map(|b| {
            let len = SymExpr::product(&b.shape).eval(dims).unwrap() as usize;
            // Int8 weights are small integers, so products keep f32 values' magnitudes
            // (the runtime's tests cover the whole int8 range); int4 weights are any
            // nibble; int8 activation codes stay near their zero (128).
            (0..len)
                .map(|_| match b.dtype {
                    DType::I8 => f64::from(rng.gen_range(-2i8..=2)),
                    DType::U8 => f64::from(rng.gen_range(126u8..=130)),
                    DType::U4 => f64::from(rng.gen_range(0u8..16)),
                    _ => f64::from(rng.gen_range(-2.0f32..2.0)),
                })
                .collect()
        })
        .collect()
}

#[test]
fn the_attention_rule_computes_what_the_legalized_function_does() {
    let mut rng = StdRng::seed_from_u64(11);
    // (heads, kv_heads, head_dim, cached positions before the queries); two group 8
    // query heads per kv head; with a single query row (decode), the groups of the first
    // and the last two are split into calls of 1, 4 and 3, and 1 query heads.
    let shapes = [
        (4, 2, 8, 3),
        (3, 1, 5, 0),
        (2, 2, 3, 9),
        (32, 4, 3, 2),
        (64, 8, 2, 1),
        (14, 2, 5, 4),
        (6, 3, 4, 2),
    ];
    let cases = shapes
        .into_iter()
        .flat_map(|shape| [DType::F32, DType::F16, DType::I8].map(|kv_dtype| (shape, kv_dtype)));
    for ((heads, kv_heads, dim, past), kv_dtype) in cases {
        let masks = [
            (Mask::Causal, false),
            (Mask::None, false),
            (Mask::Causal, true),
            (Mask::Window(3), false),
            (Mask::Window(1), false),
            (Mask::Window(2), true),
        ];
        for (mask, single_row) in masks {
            let rows = if single_row {
                SymExpr::int(1)
            } else {
                n().expr()
            };
            let q = tensor(
                "q",
                vec![rows.clone(), heads.into(), dim.into()],
                DType::F32,
            );
            let kv = vec![rows + SymExpr::int(past), kv_heads.into(), dim.into()];
            let scale_rows = kv[..2].to_vec();
            let (k, v) = (tensor("k", kv.clone(), kv_dtype), tensor("v", kv, kv_dtype));
            // i8: codes with f32 scales per position and kv head (an int8 KV cache).
            let attention = if kv_dtype == DType::I8 {
                let scales = |name| tensor(name, scale_rows.clone(), DType::F32);
                let (ks, vs) = (scales("k_scales"), scales("v_scales"));
                op::attention_q8kv(&q, (&k, &ks), (&v, &vs), 0.3, mask)
            } else {
                op::attention(&q, &k, &v, 0.3, mask)
            };
            let Expr::Call(call) = attention.unwrap() else {
                unreachable!("op constructors build calls")
            };
            let func = legalize_call(&call).unwrap().func;
            let scheduled = AttentionRule.apply(&func).expect("the rule applies");
            let kernel = match kv_dtype {
                DType::F16 => "attention_f16kv",
                DType::I8 => "attention_q8kv",
                _ => "attention_f32",
            };
            let text = oxrelax_dsl::text::print_prim_func("attention", &scheduled);
            assert!(text.contains(kernel), "{kv_dtype}: {text}");
            for value in [1, 2, 7] {
                let dims = SymBindings::from([("n".to_string(), value)]);
                let inputs = random_inputs(&func, &dims, &mut rng);
                let before = run_with_inputs(&func, &dims, &inputs).unwrap();
                let after = run_with_inputs(&scheduled, &dims, &inputs).unwrap();
                for (b, a) in before[0].iter().zip(&after[0]) {
                    let what = format!(
                        "{kv_dtype} heads {heads}/{kv_heads} dim {dim} past {past} mask {mask:?} n {value} single row {single_row}"
                    );
                    assert!(
                        (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
                        "{what}: {a} vs {b}"
                    );
                }
            }
        }
    }
}

/// Named targets whose tile tables differ (the AVX-512 row's two-panel 12-row block, the AVX2 row's
/// 6-row block, the generic row), whatever the host: the interpreter runs microkernels by
/// their reference semantics.
fn matmul_targets() -> [Target; 3] {
    [
        Target::new("x86_64-unknown-linux-gnu", &["avx512f"]),
        Target::new("x86_64-unknown-linux-gnu", &["avx2", "fma"]),
        Target::new("aarch64-unknown-linux-gnu", &[]),
    ]
}

#[test]
fn the_matmul_rules_compute_what_the_legalized_function_does() {
    for target in matmul_targets() {
        matmul_rules_match_on(&target);
    }
}

fn matmul_rules_match_on(target: &Target) {
    let mut rng = StdRng::seed_from_u64(13);
    let hp = target.matmul_tiles().hp;
    // (rows: None for the symbolic n, reduction L, output features H); the last GEMV
    // is parallel and narrower than the 4-bit GEMV's block, so it is split in two calls.
    let shapes = [
        (None, 300, 37),
        (Some(1), 33, 130),
        (Some(1), 17, 64),
        (Some(1), 300, 250),
    ];
    let formats = [
        (DType::F32, None),
        (DType::F16, None),
        (DType::I8, Some(DType::F32)),
        (DType::U4, Some(DType::F32)),
        (DType::U4, Some(DType::F16)),
    ];
    let cases = formats
        .into_iter()
        .flat_map(|format| shapes.map(|shape| (format, shape)));
    for ((weights, scales), (rows, depth, features)) in cases {
        let rows_dim = rows.map_or(n().expr(), SymExpr::int);
        let x = tensor("x", vec![rows_dim, depth.into()], DType::F32);
        let panels = (features + hp - 1) / hp;
        let product = match scales {
            Some(scale_dtype) => {
                let bits = if weights == DType::U4 { 4 } else { 8 };
                let layout = (bits, op::QuantLayout::Rows);
                let (shape, _) = op::packed_quant_layout(features, depth, hp, layout);
                let packed = tensor("w", shape.into_iter().map(SymExpr::int).collect(), weights);
                let groups = op::quant_groups(depth);
                let shape = vec![panels.into(), groups.into(), hp.into()];
                let scales = tensor("s", shape, scale_dtype);
                op::packed_matmul_quant(&x, &packed, &scales, features)
            }
            None => {
                let shape = vec![panels.into(), depth.into(), hp.into()];
                op::packed_matmul(&x, &tensor("w", shape, weights), features)
            }
        };
        let Expr::Call(call) = product.unwrap() else {
            unreachable!("op constructors build calls")
        };
        let func = legalize_call(&call).unwrap().func;
        let (gemv, matmul) = (GemvRule::for_target(target), MatmulRule::for_target(target));
        let rule: &dyn ScheduleRule = if rows.is_some() { &gemv } else { &matmul };
        let what = format!(
            "{} {} {weights}/{scales:?} rows {rows:?} L {depth} H {features}",
            target.matmul_tiles().gemm_kernel,
            rule.name()
        );
        assert_rule_keeps_results(rule, &func, &mut rng, &what);
    }
}

#[test]
fn the_matmul_rules_compute_what_the_legalized_int8_matmul_does() {
    let vnni = Target::new(
        "x86_64-unknown-linux-gnu",
        &["avx512f", "avx512bw", "avx512vnni"],
    );
    let targets = [vnni, Target::new("aarch64-unknown-linux-gnu", &[])];
    let mut rng = StdRng::seed_from_u64(19);
    // (rows: None for the symbolic n, reduction L, output features H)
    let shapes = [(None, 100, 37), (Some(1), 33, 130), (Some(1), 17, 64)];
    for target in &targets {
        let hp = target.matmul_tiles().hp;
        for (bits, (rows, depth, features)) in
            [8, 4].into_iter().flat_map(|b| shapes.map(|s| (b, s)))
        {
            let rows_dim = rows.map_or(n().expr(), SymExpr::int);
            let padded = op::padded_depth(depth);
            let xq = tensor("xq", vec![rows_dim.clone(), padded.into()], DType::U8);
            let groups = op::quant_groups(depth);
            let xs = tensor("xs", vec![rows_dim, groups.into()], DType::F32);
            let layout = (bits, op::QuantLayout::Quads);
            let (shape, dtype) = op::packed_quant_layout(features, depth, hp, layout);
            let packed = tensor("w", shape.into_iter().map(SymExpr::int).collect(), dtype);
            let panels = (features + hp - 1) / hp;
            let scales = vec![panels.into(), groups.into(), hp.into()];
            let scales = tensor("s", scales, DType::F16);
            let product = op::packed_matmul_int((&xq, &xs), (&packed, &scales), features);
            let func = legalized(product.unwrap());
            let (gemv, matmul) = (GemvRule::for_target(target), MatmulRule::for_target(target));
            let rule: &dyn ScheduleRule = if rows.is_some() { &gemv } else { &matmul };
            let what = format!(
                "int8 {} w{bits} rows {rows:?} L {depth} H {features}",
                rule.name()
            );
            let checked = (&mut rng, 2e-3);
            assert_rule_keeps_results_within(rule, &func, checked, &what);
        }
    }
}

/// The ops fused after a `[batch..., H]` matmul in each epilogue case, built from
/// `extra` (another activation of the output's shape) and `bias` (`[H]`).
fn epilogues(activation: &Expr, extra: &Expr, bias: &Expr) -> Vec<(&'static str, Vec<Expr>)> {
    vec![
        ("residual add", vec![op::add(extra, activation).unwrap()]),
        ("bias add", vec![op::add(activation, bias).unwrap()]),
        (
            "silu times up",
            vec![
                op::silu(activation).unwrap(),
                op::multiply(activation, extra).unwrap(),
            ],
        ),
    ]
}

#[test]
fn fused_epilogues_compute_what_the_unscheduled_fused_function_does() {
    for target in matmul_targets() {
        fused_epilogues_match_on(&target);
    }
}

fn fused_epilogues_match_on(target: &Target) {
    let mut rng = StdRng::seed_from_u64(17);
    let hp = target.matmul_tiles().hp;
    // (batch dims, reduction L, output features H)
    let cases: [(Vec<SymExpr>, i64, i64); 4] = [
        (vec![1.into(), n().expr()], 300, 37),
        (vec![2.into(), n().expr()], 19, 130),
        (vec![1.into(), 1.into()], 33, 130),
        (vec![1.into()], 17, 20),
    ];
    for (batch, depth, features) in cases {
        let with_dim = |last: i64| batch.iter().cloned().chain([last.into()]).collect();
        let x = tensor("x", with_dim(depth), DType::F32);
        let panels = (features + hp - 1) / hp;
        let shape = vec![panels.into(), depth.into(), hp.into()];
        let packed = tensor("w", shape, DType::F32);
        let activation = tensor("t", with_dim(features), DType::F32);
        let extra = tensor("r", with_dim(features), DType::F32);
        let bias = tensor("bias", vec![features.into()], DType::F32);
        for (name, consumers) in epilogues(&activation, &extra, &bias) {
            let mut fused = legalized(op::packed_matmul(&x, &packed, features).unwrap());
            for consumer in consumers {
                let Expr::Call(call) = &consumer else {
                    unreachable!("op constructors build calls")
                };
                let operand = call.args.iter().position(|a| a == &activation).unwrap();
                let consumer = legalize_call(call).unwrap().func;
                fused = oxrelax_dsl::fuse::fuse_elementwise(&fused, &consumer, operand).unwrap();
            }
            let (gemv, matmul) = (GemvRule::for_target(target), MatmulRule::for_target(target));
            let rule: &dyn ScheduleRule = match SymExpr::product(&batch).as_const() {
                Some(1) => &gemv,
                _ => &matmul,
            };
            let kernel = target.matmul_tiles().gemm_kernel;
            let what = format!("{kernel} {name}: batch {batch:?} L {depth} H {features}");
            assert_rule_keeps_results(rule, &fused, &mut rng, &what);
        }
    }
}

/// `rule` (built for a target) applies to `func`, and the scheduled function computes what
/// `func` does (within f32 rounding) on random inputs, `n` odd and even.
fn assert_rule_keeps_results(
    rule: &dyn ScheduleRule,
    func: &oxrelax_dsl::tir::PrimFunc,
    rng: &mut StdRng,
    what: &str,
) {
    assert_rule_keeps_results_within(rule, func, (rng, 1e-4), what);
}

/// [`assert_rule_keeps_results`] with a relative `tolerance`.
fn assert_rule_keeps_results_within(
    rule: &dyn ScheduleRule,
    func: &oxrelax_dsl::tir::PrimFunc,
    (rng, tolerance): (&mut StdRng, f64),
    what: &str,
) {
    let scheduled = rule.apply(func).expect("the rule applies");
    for value in [1, 7, 13, 15] {
        let dims = SymBindings::from([("n".to_string(), value)]);
        let inputs = random_inputs(func, &dims, rng);
        let before = run_with_inputs(func, &dims, &inputs).unwrap();
        let after = run_with_inputs(&scheduled, &dims, &inputs).unwrap();
        assert_eq!(before[0].len(), after[0].len(), "{what} n {value}");
        for (b, a) in before[0].iter().zip(&after[0]) {
            let close = (a - b).abs() <= tolerance * (1.0 + b.abs());
            assert!(close, "{what} n {value}: {a} vs {b}");
        }
    }
}

fn legalized(expr: Expr) -> oxrelax_dsl::tir::PrimFunc {
    let Expr::Call(call) = expr else {
        unreachable!("op constructors build calls")
    };
    legalize_call(&call).unwrap().func
}

/// The rotation the nn module emits for `[batch.., heads, dim]` (batch `[1, n]`).
fn rotary(batch: &[SymExpr], heads: i64, dim: i64) -> oxrelax_dsl::tir::PrimFunc {
    use oxrelax_dsl::nn::{RotaryEmbedding, Spec};
    let seq = batch[1].clone();
    let mut shape = batch.to_vec();
    shape.extend([heads.into(), dim.into()]);
    let vars = [("x", shape), ("table", vec![seq, dim.into()])]
        .map(|(name, shape)| Var::new(name, StructInfo::tensor(shape, DType::F32)));
    let spec = Spec::new().function("rope", vars.to_vec(), |rope: &RotaryEmbedding, bb, t| {
        rope.apply(bb, &t[0], &t[1])
    });
    let rope = RotaryEmbedding::new(dim, 10000.0).unwrap();
    spec.export(&rope).unwrap().prim_funcs["rotary"].clone()
}

#[test]
fn windowed_epilogues_compute_what_the_unscheduled_fused_function_does() {
    for target in matmul_targets() {
        windowed_epilogues_match_on(&target);
    }
}

/// RoPE fused into q/k-like projections (with and without a bias before it): head
/// widths below, equal to and above a GEMV block, and not a multiple of the panel width.
fn windowed_epilogues_match_on(target: &Target) {
    let mut rng = StdRng::seed_from_u64(19);
    let hp = target.matmul_tiles().hp;
    // (rows: None for the symbolic n, reduction L, heads, head width)
    let cases = [
        (None, 300, 3, 16),
        (None, 19, 2, 24),
        (None, 33, 2, 128),
        (Some(1), 33, 5, 16),
        (Some(1), 17, 3, 128),
        (Some(1), 20, 3, 24),
    ];
    for (rows, depth, heads, dim) in cases {
        let batch = vec![SymExpr::int(1), rows.map_or(n().expr(), SymExpr::int)];
        let with_dim = |last: i64| batch.iter().cloned().chain([last.into()]).collect();
        let features = heads * dim;
        let x = tensor("x", with_dim(depth), DType::F32);
        let panels = (features + hp - 1) / hp;
        let shape = vec![panels.into(), depth.into(), hp.into()];
        let packed = tensor("w", shape, DType::F32);
        let matmul = legalized(op::packed_matmul(&x, &packed, features).unwrap());
        let activation = tensor("t", with_dim(features), DType::F32);
        let bias = tensor("bias", vec![features.into()], DType::F32);
        let add_bias = legalized(op::add(&activation, &bias).unwrap());
        let biased = oxrelax_dsl::fuse::fuse_elementwise(&matmul, &add_bias, 0).unwrap();
        let rope = rotary(&batch, heads, dim);
        for producer in [matmul.clone(), biased] {
            let fused = oxrelax_dsl::fuse::fuse_windowed(&producer, &rope, 0).unwrap();
            let (gemv, matmul) = (GemvRule::for_target(target), MatmulRule::for_target(target));
            let rule: &dyn ScheduleRule = match rows {
                Some(_) => &gemv,
                None => &matmul,
            };
            let kernel = target.matmul_tiles().gemm_kernel;
            let what = format!("{kernel} rows {rows:?} L {depth} heads {heads}x{dim}");
            assert_rule_keeps_results(rule, &fused, &mut rng, &what);
        }
    }
}

#[test]
fn a_parallel_gemv_narrower_than_its_block_is_split_in_two_calls() {
    let target = Target::new("x86_64-unknown-linux-gnu", &["avx512f"]);
    let hp = target.matmul_tiles().hp;
    let (depth, features) = (2048, 256);
    let x = tensor("x", vec![1.into(), depth.into()], DType::F32);
    let layout = (4, op::QuantLayout::Rows);
    let (shape, _) = op::packed_quant_layout(features, depth, hp, layout);
    let packed = tensor(
        "w",
        shape.into_iter().map(SymExpr::int).collect(),
        DType::U4,
    );
    let scales = vec![
        (features / hp).into(),
        op::quant_groups(depth).into(),
        hp.into(),
    ];
    let scales = tensor("s", scales, DType::F16);
    let product = op::packed_matmul_quant(&x, &packed, &scales, features);
    let scheduled = GemvRule::for_target(&target)
        .apply(&legalized(product.unwrap()))
        .unwrap();
    let text = oxrelax_dsl::text::print_prim_func("gemv", &scheduled);
    assert!(text.contains("parallel(2)"), "{text}");
    assert!(text.contains("sgemv_8x256_q4f16"), "{text}");
}

/// A batched decode step (rows up to the target's `gemv_rows`) runs on the 4-bit GEMV in
/// blocks of its 8 rows where the target says so, and computes what the legalized
/// function does for 1, 7, 13 and 15 rows (one block, two, with a partial one); other
/// weights, and targets whose GEMV widens weights per row, keep the prefill block.
#[test]
fn a_batched_decode_step_runs_on_the_4_bit_gemv_in_blocks_of_its_rows() {
    let mut rng = StdRng::seed_from_u64(19);
    let x86 = "x86_64-unknown-linux-gnu";
    let vnni = Target::new(x86, &["avx512f", "avx512bw", "avx512vnni"]);
    let avx512 = Target::new(x86, &["avx512f"]);
    let hp = vnni.matmul_tiles().hp;
    let rows = SymVar::bounded("n", 16).expr();
    for (depth, features, weights) in [
        (64, 300, DType::U4),
        (300, 40, DType::U4),
        (64, 40, DType::I8),
    ] {
        let x = tensor("x", vec![rows.clone(), depth.into()], DType::F32);
        let bits = if weights == DType::U4 { 4 } else { 8 };
        let (shape, _) =
            op::packed_quant_layout(features, depth, hp, (bits, op::QuantLayout::Rows));
        let packed = tensor("w", shape.into_iter().map(SymExpr::int).collect(), weights);
        let groups = op::quant_groups(depth);
        let scales = vec![((features + hp - 1) / hp).into(), groups.into(), hp.into()];
        let scales = tensor("s", scales, DType::F16);
        let func = legalized(op::packed_matmul_quant(&x, &packed, &scales, features).unwrap());
        let (on_avx512, on_vnni) = (GemvRule::for_target(&avx512), GemvRule::for_target(&vnni));
        assert!(on_avx512.apply(&func).is_none());
        if weights != DType::U4 {
            assert!(on_vnni.apply(&func).is_none(), "{weights}");
            continue;
        }
        let scheduled = on_vnni.apply(&func).unwrap();
        let text = oxrelax_dsl::text::print_prim_func("batched", &scheduled);
        assert!(
            text.contains("sgemv_8x256_q4f16") && text.contains("for eb in"),
            "{text}"
        );
        let what = format!("batched gemv L {depth} H {features}");
        assert_rule_keeps_results(&on_vnni, &func, &mut rng, &what);
    }
}
