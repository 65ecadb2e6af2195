use super::*;
use oxrelax_dsl::ir::{Binding, BindingBlock, BindingValue, Call, Callee, Function};
use oxrelax_dsl::tir::{Buffer, PrimFunc, Stmt};
use oxrelax_dsl::{Attrs, DType, Expr, IRModule, StructInfo, SymExpr, SymVar, Var};

fn tensor(dims: &[SymExpr]) -> StructInfo {
    StructInfo::tensor(dims.to_vec(), DType::F32)
}

fn tir_call(callee: &str, args: Vec<Expr>, sinfo: StructInfo) -> Expr {
    Expr::Call(Box::new(Call {
        callee: Callee::Tir(callee.to_string()),
        args,
        attrs: Attrs::new(),
        sinfo,
    }))
}

fn prim(name: &str) -> PrimFunc {
    PrimFunc {
        params: vec![Buffer::new(name, DType::F32, vec![SymExpr::int(4)])],
        num_outputs: 1,
        dims: vec![],
        body: Stmt::Seq(vec![]),
        attrs: Attrs::new(),
    }
}

fn bind(var: &Var, value: Expr) -> Binding {
    Binding {
        var: var.clone(),
        value: BindingValue::Expr(value),
    }
}

/// `main(x)`: `a = f(x)` (used), `b = g(x)` (unused), `c = kv_cache.append(...)` (effect),
/// `m = match_cast(x, (k,))` (binds a new dim); plus an unexported function.
fn module_with_dead_code() -> IRModule {
    let n = SymVar::bounded("n", 16).expr();
    let sinfo = tensor(std::slice::from_ref(&n));
    let x = Var::new("x", sinfo.clone());
    let df = |name: &str| Var {
        dataflow: true,
        ..Var::new(name, sinfo.clone())
    };
    let (a, b) = (df("a"), df("b"));
    let c = Var::new("c", StructInfo::Object);
    let k = SymVar::new("k").expr();
    let m = Var::new("m", tensor(std::slice::from_ref(&k)));
    let append = Expr::Call(Box::new(Call {
        callee: Callee::Packed("kv_cache.append".into()),
        args: vec![Expr::from(&x)],
        attrs: Attrs::new(),
        sinfo: StructInfo::Object,
    }));
    let main = Function {
        params: vec![x.clone()],
        blocks: vec![
            BindingBlock {
                dataflow: true,
                bindings: vec![
                    bind(&a, tir_call("f", vec![Expr::from(&x)], sinfo.clone())),
                    bind(&b, tir_call("g", vec![Expr::from(&x)], sinfo.clone())),
                ],
            },
            BindingBlock {
                dataflow: false,
                bindings: vec![
                    bind(&c, append),
                    Binding {
                        var: m,
                        value: BindingValue::MatchCast(Expr::from(&x), tensor(&[k])),
                    },
                ],
            },
        ],
        ret: Expr::from(&a),
        exported: true,
        attrs: Default::default(),
    };
    let helper = Function {
        exported: false,
        attrs: Default::default(),
        ..main.clone()
    };
    IRModule {
        functions: [("main".into(), main), ("helper".into(), helper)].into(),
        prim_funcs: ["f", "g", "unused"]
            .map(|n| (n.to_string(), prim(n)))
            .into(),
    }
}

#[test]
fn dce_keeps_used_effectful_and_dim_binding_bindings() {
    let out = DeadCodeElimination.run(module_with_dead_code()).unwrap();
    let main = &out.functions["main"];
    let names: Vec<&str> = main.bindings().map(|b| b.var.name.as_str()).collect();
    assert_eq!(names, ["a", "c", "m"]);
    assert_eq!(out.functions.keys().collect::<Vec<_>>(), ["main"]);
    assert_eq!(out.prim_funcs.keys().collect::<Vec<_>>(), ["f"]);
}

#[test]
fn dce_is_idempotent_and_drops_empty_blocks() {
    let once = DeadCodeElimination.run(module_with_dead_code()).unwrap();
    let twice = DeadCodeElimination.run(once.clone()).unwrap();
    assert_eq!(once, twice);
    let mut module = module_with_dead_code();
    let main = module.functions.get_mut("main").unwrap();
    main.blocks[1].bindings.clear();
    main.ret = Expr::from(&main.params[0]);
    let out = DeadCodeElimination.run(module).unwrap();
    assert!(out.functions["main"].blocks.is_empty());
    assert!(out.prim_funcs.is_empty());
}

#[test]
fn pipeline_dumps_each_pass_and_times_it() {
    let dir = std::env::temp_dir().join(format!("oxrelax-dump-{}", std::process::id()));
    let pipeline = Pipeline::new()
        .with(DeadCodeElimination)
        .with(DeadCodeElimination)
        .instrumented(Instrument {
            dump_dir: Some(dir.clone()),
            verify: false,
            verify_text: false,
            verbose: false,
        });
    assert_eq!(pipeline.pass_names(), ["dead-code-elimination"; 2]);
    let (out, report) = pipeline.run(module_with_dead_code()).unwrap();
    assert_eq!(report.timings.len(), 2);
    let files: Vec<String> = report
        .dumps
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        files,
        [
            "00-input.txt",
            "01-dead-code-elimination.txt",
            "02-dead-code-elimination.txt"
        ]
    );
    let last = std::fs::read_to_string(&report.dumps[2]).unwrap();
    assert_eq!(last, oxrelax_dsl::text::print_module(&out));
    let first = std::fs::read_to_string(&report.dumps[0]).unwrap();
    assert!(first.contains("@helper") && !last.contains("@helper"));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn pipeline_reports_an_unwritable_dump_folder() {
    let file = std::env::temp_dir().join(format!("oxrelax-not-a-dir-{}", std::process::id()));
    std::fs::write(&file, "").unwrap();
    let pipeline = Pipeline::new()
        .with(DeadCodeElimination)
        .instrumented(Instrument {
            dump_dir: Some(file.join("sub")),
            verify: false,
            verify_text: false,
            verbose: false,
        });
    let err = pipeline.run(module_with_dead_code()).unwrap_err();
    assert!(matches!(err, PassError::Dump { .. }), "{err}");
    assert!(err.to_string().contains("cannot write IR dump"));
    std::fs::remove_file(file).unwrap();
}

#[test]
fn text_verification_passes_complete_modules_through_their_text_form() {
    let pipeline = Pipeline::new()
        .with(DeadCodeElimination)
        .instrumented(Instrument {
            dump_dir: None,
            verify: false,
            verify_text: true,
            verbose: false,
        });
    let (out, _) = pipeline.run(module_with_dead_code()).unwrap();
    assert_eq!(
        out,
        DeadCodeElimination.run(module_with_dead_code()).unwrap()
    );
}

/// The arena offset planned for the `call_tir` bound to `var` in `main`.
fn planned_offset(module: &IRModule, var: &str) -> i64 {
    let binding = module.functions["main"]
        .bindings()
        .find(|b| b.var.name == var)
        .unwrap();
    let BindingValue::Expr(Expr::Call(call)) = &binding.value else {
        panic!("{var} is not a call")
    };
    match call.attrs.get(ARENA_OFFSETS) {
        Some(oxrelax_dsl::AttrValue::Ints(offsets)) => offsets[0],
        other => panic!("{var} has no planned offset: {other:?}"),
    }
}

#[test]
fn a_view_keeps_the_tensor_it_views_alive_in_the_memory_plan() {
    // a = f(x); v = reshape(a); b = g(x); c = h(v, b); return c:
    // `a` is read through `v` at `c`, so `b` must not take `a`'s memory.
    let sinfo = tensor(&[SymExpr::int(4)]);
    let x = Var::new("x", sinfo.clone());
    let df = |name: &str, sinfo: &StructInfo| Var {
        dataflow: true,
        ..Var::new(name, sinfo.clone())
    };
    let viewed = tensor(&[SymExpr::int(2), SymExpr::int(2)]);
    let (a, v, b, c) = (
        df("a", &sinfo),
        df("v", &viewed),
        df("b", &sinfo),
        df("c", &sinfo),
    );
    let reshape =
        oxrelax_dsl::op::reshape(&Expr::from(&a), vec![SymExpr::int(2), SymExpr::int(2)]).unwrap();
    let main = Function {
        params: vec![x.clone()],
        blocks: vec![BindingBlock {
            dataflow: true,
            bindings: vec![
                bind(&a, tir_call("f", vec![Expr::from(&x)], sinfo.clone())),
                bind(&v, reshape),
                bind(&b, tir_call("g", vec![Expr::from(&x)], sinfo.clone())),
                bind(
                    &c,
                    tir_call("h", vec![Expr::from(&v), Expr::from(&b)], sinfo.clone()),
                ),
            ],
        }],
        ret: Expr::from(&c),
        exported: true,
        attrs: Default::default(),
    };
    let module = IRModule {
        functions: [("main".into(), main)].into(),
        prim_funcs: ["f", "g", "h"].map(|n| (n.to_string(), prim(n))).into(),
    };
    let planned = StaticPlanBlockMemory.run(module).unwrap();
    assert_ne!(planned_offset(&planned, "a"), planned_offset(&planned, "b"));
}

/// A weighted function `f(x, small, large)` computing `x @ small^T + x @ large^T`.
fn two_linear_layers() -> IRModule {
    use oxrelax_dsl::op;
    let weight = |name: &str, rows: i64| {
        Var::new(
            name,
            StructInfo::tensor(vec![SymExpr::int(rows), SymExpr::int(8)], DType::F32),
        )
    };
    let x = Var::new(
        "x",
        StructInfo::tensor(vec![SymExpr::int(1), SymExpr::int(8)], DType::F32),
    );
    let (small, large) = (weight("small", 16), weight("large", 64));
    let mut bindings = Vec::new();
    let mut outputs = Vec::new();
    for w in [&small, &large] {
        let t = Var::new(
            &format!("{}_t", w.name),
            op::permute_dims(&Expr::Var(w.clone()), None)
                .unwrap()
                .sinfo(),
        );
        let product = op::matmul(&Expr::Var(x.clone()), &Expr::Var(t.clone())).unwrap();
        let y = Var::new(&format!("{}_y", w.name), product.sinfo());
        bindings.push(bind(
            &t,
            op::permute_dims(&Expr::Var(w.clone()), None).unwrap(),
        ));
        bindings.push(bind(&y, product));
        outputs.push(Expr::Var(y));
    }
    let ret = Var::new(
        "ret",
        StructInfo::Tuple(outputs.iter().map(Expr::sinfo).collect()),
    );
    bindings.push(bind(&ret, Expr::Tuple(outputs)));
    let mut attrs = Attrs::new();
    attrs.insert(
        oxrelax_dsl::ir::NUM_INPUT_ATTR.to_string(),
        oxrelax_dsl::AttrValue::Int(1),
    );
    let function = Function {
        params: vec![x, small, large],
        blocks: vec![BindingBlock {
            dataflow: true,
            bindings,
        }],
        ret: Expr::Var(ret),
        exported: true,
        attrs,
    };
    let mut module = IRModule::default();
    module.functions.insert("f".to_string(), function);
    module
}

#[test]
fn transform_params_transforms_the_largest_weight_first() {
    let target = oxrelax_dsl::Target::new("x86_64-unknown-linux-gnu", &["avx2", "fma"]);
    let packed = PHASES.iter().fold(two_linear_layers(), |module, phase| {
        RewritePhase::new(phase, &target).run(module).unwrap()
    });
    let lifted = LiftTransformParams.run(packed).unwrap();
    let transform = &lifted.functions[TRANSFORM_PARAMS];
    let order: Vec<&str> = transform.blocks[0]
        .bindings
        .iter()
        .map(|b| b.var.name.as_str())
        .collect();
    let first = |prefix: &str| order.iter().position(|n| n.starts_with(prefix)).unwrap();
    assert!(first("large") < first("small"), "{order:?}");
}

#[test]
fn a_long_elementwise_chain_fuses_in_groups_of_at_most_the_cap() {
    let ops = 2 * oxrelax_dsl::fuse::MAX_FUSED_OPS + 3;
    let mut text = String::from(
        "export graph @forward(\n  x: Tensor((1, n, 8), f32),\n) -> Tensor((1, n, 8), f32) \
         attrs(num_input=1)\n  where n <= 64\n{\n  dataflow {\n    lv0: Tensor((1, n, 8), f32) = add(x, x)\n",
    );
    for i in 1..ops {
        let line = format!("    lv{i}: Tensor((1, n, 8), f32) = add(lv{}, x)\n", i - 1);
        text.push_str(&line);
    }
    let last = ops - 1;
    text.push_str(&format!(
        "    output gv: Tensor((1, n, 8), f32) = lv{last}\n  }}\n  return gv\n}}\n"
    ));
    let module = oxrelax_dsl::text::parse_module(&text).unwrap();
    let pipeline = Pipeline::new()
        .with(Normalize)
        .with(LegalizeOps)
        .with(FuseOps);
    let (out, _) = pipeline.run(module).unwrap();
    let groups: Vec<usize> = out
        .prim_funcs
        .values()
        .map(|f| oxrelax_dsl::fuse::fused_ops(f).len())
        .collect();
    let kernels = out.functions["forward"].bindings().count() - 1;
    assert_eq!(kernels, 3, "{groups:?}");
    assert!(
        groups
            .iter()
            .all(|&n| n <= oxrelax_dsl::fuse::MAX_FUSED_OPS),
        "{groups:?}"
    );
}
