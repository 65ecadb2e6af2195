use crate::{default_schedule, Schedule, ScheduleConfig, ScheduleError};
use oxrelax_dsl::text::print_prim_func;
use oxrelax_dsl::tir::{Buffer, ForKind, PrimExpr, PrimFunc, Stmt, TVar};
use oxrelax_dsl::{Attrs, DType, SymVar};

fn var(name: &str) -> PrimExpr {
    PrimExpr::Var(TVar::new(name, DType::I64))
}

fn for_loop(name: &str, extent: PrimExpr, body: Stmt) -> Stmt {
    Stmt::For {
        var: TVar::new(name, DType::I64),
        extent,
        kind: ForKind::Serial,
        body: Box::new(body),
    }
}

/// `out[i, j] = x[i, j] * 2` over `[n, 64]` (n <= 2048), and optionally a row sum
/// `s[i] += x[i, k]` as a second nest.
fn func(with_sum: bool) -> PrimFunc {
    let n = SymVar::bounded("n", 2048);
    let shape = vec![n.expr(), 64.into()];
    let load = |i: &str, j: &str| PrimExpr::Load {
        buffer: "x".into(),
        dtype: DType::F32,
        indices: vec![var(i), var(j)],
    };
    let scale = for_loop(
        "i",
        PrimExpr::from(&n.expr()),
        for_loop(
            "j",
            PrimExpr::index(64),
            Stmt::Store {
                buffer: "out".into(),
                indices: vec![var("i"), var("j")],
                value: load("i", "j") * PrimExpr::f32(2.0),
            },
        ),
    );
    let sum = for_loop(
        "r",
        PrimExpr::from(&n.expr()),
        for_loop(
            "k",
            PrimExpr::index(64),
            Stmt::Store {
                buffer: "s".into(),
                indices: vec![var("r")],
                value: PrimExpr::Load {
                    buffer: "s".into(),
                    dtype: DType::F32,
                    indices: vec![var("r")],
                } + load("r", "k"),
            },
        ),
    );
    let mut params = vec![
        Buffer::new("x", DType::F32, shape.clone()),
        Buffer::new("out", DType::F32, shape),
    ];
    if with_sum {
        params.push(Buffer::new("s", DType::F32, vec![n.expr()]));
    }
    PrimFunc {
        num_outputs: params.len() - 1,
        params,
        dims: vec![n],
        body: if with_sum {
            Stmt::Seq(vec![scale, sum])
        } else {
            scale
        },
        attrs: Attrs::new(),
    }
}

fn kinds(func: &PrimFunc) -> Vec<(String, ForKind)> {
    fn walk(stmt: &Stmt, out: &mut Vec<(String, ForKind)>) {
        match stmt {
            Stmt::For {
                var, kind, body, ..
            } => {
                out.push((var.name.clone(), *kind));
                walk(body, out);
            }
            Stmt::Seq(items) => items.iter().for_each(|s| walk(s, out)),
            Stmt::Let { body, .. } | Stmt::Allocate { body, .. } => walk(body, out),
            Stmt::If { then, .. } => walk(then, out),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(&func.body, &mut out);
    out
}

#[test]
fn split_with_and_without_a_guard() {
    let mut s = Schedule::new(func(false));
    assert_eq!(s.split("j", 16).unwrap(), ("j_o".into(), "j_i".into()));
    let text = print_prim_func("f", s.func());
    assert!(text.contains("for j_o in serial(4)"), "{text}");
    assert!(text.contains("let j: i64 = (j_o * 16) + j_i"), "{text}");
    assert!(!text.contains("if "), "{text}");
    let mut s = Schedule::new(func(false));
    s.split("i", 3).unwrap();
    let text = print_prim_func("f", s.func());
    assert!(
        text.contains("for i_o in serial(floordiv(n + 2, 3))")
            && text.contains("if ((i_o * 3) + i_i) < n"),
        "{text}"
    );
}

#[test]
fn fuse_recovers_both_variables() {
    let mut s = Schedule::new(func(false));
    assert_eq!(s.fuse("i", "j").unwrap(), "i_j");
    let text = print_prim_func("f", s.func());
    assert!(text.contains("for i_j in serial(64 * n)"), "{text}");
    assert!(text.contains("let i: i64 = floordiv(i_j, 64)"), "{text}");
    assert!(text.contains("let j: i64 = floormod(i_j, 64)"), "{text}");
}

#[test]
fn primitive_errors_name_the_loops() {
    let mut s = Schedule::new(func(true));
    assert_eq!(
        s.vectorize("zz"),
        Err(ScheduleError::NoSuchLoop("zz".into()))
    );
    assert_eq!(
        s.fuse("i", "k"),
        Err(ScheduleError::NotPerfectlyNested {
            outer: "i".into(),
            inner: "k".into()
        })
    );
    assert_eq!(s.split("i", 0), Err(ScheduleError::BadFactor(0)));
    assert!(s.unroll("j").is_ok());
}

#[test]
fn default_rule_vectorizes_and_parallelizes() {
    let scheduled = default_schedule(&func(true), &ScheduleConfig::default());
    assert_eq!(
        kinds(&scheduled),
        [
            ("i".to_string(), ForKind::Parallel),
            ("j".to_string(), ForKind::Vectorized),
            // The row sum writes s[r] for every k: k is a reduction, neither vectorized
            // nor parallel; r is parallel.
            ("r".to_string(), ForKind::Parallel),
            ("k".to_string(), ForKind::Serial),
        ]
    );
}

#[test]
fn default_rule_leaves_small_work_serial() {
    let config = ScheduleConfig {
        parallel_min_work: 1 << 30,
    };
    let scheduled = default_schedule(&func(false), &config);
    assert_eq!(
        kinds(&scheduled),
        [
            ("i".to_string(), ForKind::Serial),
            ("j".to_string(), ForKind::Vectorized)
        ]
    );
}

#[test]
fn default_rule_fuses_a_deep_chain() {
    // out[a, b, c] = 1 over [2, n, 3] with a reduction-free body: all three loops are
    // spatial, the innermost is vectorized, the outer two fuse into one parallel loop.
    let n = SymVar::bounded("n", 4096);
    let body = Stmt::Store {
        buffer: "out".into(),
        indices: vec![var("a"), var("b"), var("c")],
        value: PrimExpr::f32(1.0),
    };
    let nest = for_loop(
        "a",
        PrimExpr::index(2),
        for_loop(
            "b",
            PrimExpr::from(&n.expr()),
            for_loop("c", PrimExpr::index(3), body),
        ),
    );
    let func = PrimFunc {
        params: vec![Buffer::new(
            "out",
            DType::F32,
            vec![2.into(), n.expr(), 3.into()],
        )],
        num_outputs: 1,
        dims: vec![n],
        body: nest,
        attrs: Attrs::new(),
    };
    let config = ScheduleConfig {
        parallel_min_work: 1,
    };
    let scheduled = default_schedule(&func, &config);
    assert_eq!(
        kinds(&scheduled),
        [
            ("a_b".to_string(), ForKind::Parallel),
            ("c".to_string(), ForKind::Vectorized)
        ]
    );
}
