//! Snapshots of the printed IR of small models before and after each front-end pass,
//! and of the legalized primitive function of every op family. Every snapshotted module
//! must also read back from its text form unchanged.

mod common;

use oxrelax::passes::{DeadCodeElimination, FuseOps, LegalizeOps, Normalize, Pass};
use oxrelax_dsl::text::{parse_module, print_module};
use oxrelax_dsl::{op, BlockBuilder, DType, Expr, IRModule, StructInfo, SymExpr, Var};

/// Snapshots `module` under `name` in the top-level `snapshots/` folder, after checking
/// that its text form parses back to the same module.
fn snapshot(name: &str, module: &IRModule) {
    let text = print_module(module);
    let parsed = parse_module(&text).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
    assert_eq!(&parsed, module, "{name}: print -> parse changed the module");
    insta::with_settings!({snapshot_path => "../snapshots", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!(name, text);
    });
}

/// Snapshots the module as given and after each pass of the front-end pipeline.
fn snapshot_passes(model: &str, module: IRModule) -> IRModule {
    snapshot(&format!("{model}.0-input"), &module);
    let passes: [(&str, &dyn Pass); 4] = [
        ("1-normalize", &Normalize),
        ("2-legalize-ops", &LegalizeOps),
        ("3-fuse-ops", &FuseOps),
        ("4-dead-code-elimination", &DeadCodeElimination),
    ];
    passes.into_iter().fold(module, |module, (step, pass)| {
        let out = pass
            .run(module)
            .unwrap_or_else(|e| panic!("{model} {step}: {e}"));
        oxrelax_dsl::wellformed::check_module(&out)
            .unwrap_or_else(|e| panic!("{model} {step}: {e}"));
        snapshot(&format!("{model}.{step}"), &out);
        out
    })
}

#[test]
fn mlp_through_the_front_end() {
    let out = snapshot_passes("mlp", common::mlp_module());
    let names: Vec<&String> = out.prim_funcs.keys().collect();
    assert_eq!(
        names,
        [
            "fused_matmul_add",
            "fused_matmul_silu",
            "permute_dims",
            "permute_dims1",
        ]
    );
}

#[test]
fn attention_through_the_front_end() {
    let out = snapshot_passes("attention", common::attention_module());
    let forward = &out.functions["forward"];
    let mut op_calls = 0;
    for binding in forward.bindings() {
        binding.value.expr().for_each_call(&mut |call| {
            if let oxrelax_dsl::ir::Callee::Op(op) = &call.callee {
                op_calls += !oxrelax_dsl::op::VIEW_OPS.contains(&op.as_str()) as usize;
            }
        });
    }
    assert_eq!(op_calls, 0, "every op but the view ops is legalized");
    assert!(out.prim_funcs.contains_key("softmax"));
}

fn tensor(name: &str, shape: Vec<SymExpr>) -> Expr {
    Expr::Var(Var::new(name, StructInfo::tensor(shape, DType::F32)))
}

/// A module `f(x: [n, 16], y: [n, 16])` whose body is built by `body`, legalized.
fn legalized(body: impl Fn(&mut BlockBuilder, &Expr, &Expr) -> Vec<Expr>) -> IRModule {
    let n = common::n().expr();
    let (x, y) = (
        tensor("x", vec![n.clone(), 16.into()]),
        tensor("y", vec![n, 16.into()]),
    );
    let mut bb = BlockBuilder::new();
    let params = [&x, &y]
        .map(|e| e.as_var().cloned().expect("inputs are vars"))
        .to_vec();
    bb.begin_function("f", params, true).unwrap();
    bb.begin_dataflow().unwrap();
    let results = body(&mut bb, &x, &y);
    let outputs: Vec<Expr> = results
        .into_iter()
        .map(|r| Expr::from(bb.emit_output(r).unwrap()))
        .collect();
    bb.end_dataflow().unwrap();
    bb.end_function(Expr::Tuple(outputs)).unwrap();
    let module = bb.finish().unwrap();
    [&Normalize as &dyn Pass, &LegalizeOps, &DeadCodeElimination]
        .into_iter()
        .fold(module, |m, pass| pass.run(m).unwrap())
}

#[test]
fn legalized_op_families() {
    let families: Vec<(&str, IRModule)> = vec![
        (
            "prim.elementwise",
            legalized(|_, x, _| {
                vec![
                    op::exp(x).unwrap(),
                    op::gelu(x, true).unwrap(),
                    op::astype(x, DType::F16).unwrap(),
                ]
            }),
        ),
        (
            "prim.broadcast",
            legalized(|bb, x, y| {
                let row = Expr::from(bb.emit(op::sum(y, Some(vec![0]), true).unwrap()).unwrap());
                vec![op::add(x, &row).unwrap(), op::maximum(x, y).unwrap()]
            }),
        ),
        (
            "prim.matmul",
            legalized(|bb, x, y| {
                let yt = Expr::from(bb.emit(op::permute_dims(y, None).unwrap()).unwrap());
                vec![op::matmul(x, &yt).unwrap()]
            }),
        ),
        (
            "prim.reduction",
            legalized(|_, x, _| {
                vec![
                    op::softmax(x, -1).unwrap(),
                    op::mean(x, Some(vec![1]), false).unwrap(),
                    op::max(x, None, false).unwrap(),
                ]
            }),
        ),
        (
            "prim.norm",
            legalized(|bb, x, _| {
                let w = Expr::from(
                    bb.emit(op::ones(vec![16.into()], DType::F32).unwrap())
                        .unwrap(),
                );
                vec![
                    op::rms_norm(x, &w, vec![-1], 1e-6).unwrap(),
                    op::layer_norm(x, &w, &w, vec![-1], 1e-5).unwrap(),
                ]
            }),
        ),
        (
            "prim.layout",
            legalized(|bb, x, y| {
                let both = Expr::from(
                    bb.emit(op::concat(&[x.clone(), y.clone()], 1).unwrap())
                        .unwrap(),
                );
                let parts = Expr::from(bb.emit(op::split_sections(&both, 2, 1).unwrap()).unwrap());
                let first = Expr::TupleGetItem(Box::new(parts), 0);
                let n = common::n().expr();
                vec![
                    op::reshape(&first, vec![n.clone(), 4.into(), 4.into()]).unwrap(),
                    op::strided_slice(x, vec![1], vec![2.into()], vec![10.into()], None).unwrap(),
                    op::expand_dims(x, vec![0]).unwrap(),
                ]
            }),
        ),
        (
            "prim.gather",
            legalized(|bb, x, _| {
                let ids = Expr::from(
                    bb.emit(op::zeros(vec![3.into()], DType::I32).unwrap())
                        .unwrap(),
                );
                vec![op::take(x, &ids, 0).unwrap()]
            }),
        ),
        (
            "prim.create",
            legalized(|bb, x, _| {
                let n = common::n().expr();
                let mask = Expr::from(
                    bb.emit(op::full(vec![n.clone(), n], f64::NEG_INFINITY, DType::F32).unwrap())
                        .unwrap(),
                );
                vec![
                    op::triu(&mask, 1).unwrap(),
                    op::r#where(
                        &Expr::from(bb.emit(op::astype(x, DType::Bool).unwrap()).unwrap()),
                        x,
                        x,
                    )
                    .unwrap(),
                ]
            }),
        ),
    ];
    for (name, module) in families {
        assert!(!module.prim_funcs.is_empty(), "{name}");
        snapshot(name, &module);
    }
}

/// Each target's schedule rules, in order, as they describe themselves: the tile table's
/// rows give the x86 targets different lists; aarch64 (NEON, dotprod, i8mm) shares the
/// portable row (its microkernels differ inside the runtime, not in the schedule).
#[test]
fn schedule_rules_per_target() {
    // Every feature the tile tables and microkernels know for `arch` (AVX-512 with VNNI
    // and VBMI on x86-64).
    let known = |arch: &str| {
        let mut known = oxrelax_dsl::target::KNOWN_FEATURES.iter();
        known.find(|(a, _)| *a == arch).map_or(&[][..], |(_, f)| *f)
    };
    let targets: [(&str, &str, &[&str]); 7] = [
        ("x86-64-sse", "x86_64-unknown-linux-gnu", &[]),
        ("x86-64-avx2", "x86_64-unknown-linux-gnu", &["avx2", "fma"]),
        (
            "x86-64-avx2-f16c",
            "x86_64-unknown-linux-gnu",
            &["avx2", "fma", "f16c"],
        ),
        (
            "x86-64-avx512",
            "x86_64-unknown-linux-gnu",
            &["avx2", "fma", "f16c", "avx512f"],
        ),
        (
            "x86-64-every-feature",
            "x86_64-unknown-linux-gnu",
            known("x86_64"),
        ),
        ("aarch64-neon", "aarch64-unknown-linux-gnu", &["neon"]),
        (
            "aarch64-dotprod-i8mm",
            "aarch64-unknown-linux-gnu",
            &["neon", "dotprod", "i8mm"],
        ),
    ];
    for (name, triple, features) in targets {
        let target = oxrelax_dsl::Target::named(triple, features).unwrap();
        let rules = oxrelax_schedules::rules_for(&target);
        let lines: Vec<String> = rules.iter().map(|r| r.describe()).collect();
        insta::with_settings!({snapshot_path => "../snapshots", prepend_module_to_snapshot => false}, {
            insta::assert_snapshot!(format!("rules-{name}"), lines.join("\n"));
        });
    }
}
