use super::eval::SymError;
use super::*;

fn n() -> SymVar {
    SymVar::bounded("n", 2048)
}

fn m() -> SymVar {
    SymVar::bounded("m", 4096)
}

fn c(v: i64) -> SymExpr {
    SymExpr::int(v)
}

fn parse(text: &str) -> SymExpr {
    let lookup = |name: &str| {
        [n(), m(), SymVar::new("k")]
            .into_iter()
            .find(|v| v.name() == name)
    };
    SymExpr::parse(text, &lookup).unwrap()
}

#[test]
fn like_terms_merge_into_canonical_form() {
    let n = n().expr();
    assert_eq!(&n * 2 + &n, &n * 3);
    assert_eq!((&n * 2 + &n).to_string(), "3 * n");
    assert_eq!(&n - &n, c(0));
    assert_eq!((&n + 1) * (&n - 1), &n * &n - 1);
}

#[test]
fn products_compare_equal_regardless_of_order() {
    let (n, m, k) = (n().expr(), m().expr(), SymVar::new("k").expr());
    let a = SymExpr::product([&c(1), &n, &c(4096), &m]);
    let b = SymExpr::product([&m, &c(4096), &n]);
    assert_eq!(a, b);
    assert_eq!(&k * &n * &m, &m * &k * &n);
    assert!((&n * 3 + &m).prove_equal(&(&m + &n + &n + &n)));
}

#[test]
fn padding_to_a_multiple_lies_in_range() {
    let n = n().expr();
    let pad = (&n + 31).floordiv(&c(32)) * 32 - &n;
    let bound = pad.bound();
    assert_eq!((bound.lo, bound.hi), (Some(0), Some(31)));
    assert_eq!(pad.to_string(), "-floormod(n + 31, 32) + 31");
    for value in [0, 1, 31, 32, 33, 2047, 2048] {
        let bindings = SymBindings::from([("n".to_string(), value)]);
        assert_eq!(pad.eval(&bindings).unwrap(), (value + 31) / 32 * 32 - value);
    }
}

#[test]
fn division_pulls_out_multiples_and_folds() {
    let n = n().expr();
    assert_eq!((&n * 64 + 31).floordiv(&c(32)), &n * 2);
    assert_eq!((&n * 4 + 2).floordiv(&c(4)), n.clone());
    assert_eq!((&n * 4 + 6).floormod(&c(4)), c(2));
    assert_eq!(
        (&n * 6 + 4).floormod(&c(4)),
        (&n * 3 + 2).floormod(&c(2)) * 2
    );
    assert_eq!(n.floordiv(&c(4096)), c(0));
    assert_eq!(n.floormod(&c(4096)), n.clone());
    assert_eq!(c(-7).floordiv(&c(2)), c(-4));
    assert_eq!(c(-7).floormod(&c(2)), c(1));
    assert_eq!(c(7).floordiv(&c(-2)), c(-4));
    assert_eq!(c(7).floormod(&c(-2)), c(-1));
}

#[test]
fn min_max_compare_select_fold_from_bounds() {
    let (n, m) = (n().expr(), m().expr());
    assert_eq!(n.minimum(&c(4096)), n);
    assert_eq!(n.maximum(&c(4096)), c(4096));
    assert_eq!(n.minimum(&m), m.minimum(&n));
    assert_eq!(n.cmp(CmpOp::Lt, &c(5000)), c(1));
    assert_eq!(n.cmp(CmpOp::Le, &(&n - 1)), c(0));
    assert_eq!(SymExpr::select(&c(1), &n, &m), n);
    assert_eq!(SymExpr::select(&n.cmp(CmpOp::Lt, &m), &n, &n), n);
    let undecided = n.cmp(CmpOp::Lt, &m);
    assert_eq!(
        undecided.bound(),
        Interval {
            lo: Some(0),
            hi: Some(1)
        }
    );
}

#[test]
fn bound_of_a_tensor_size_in_bytes() {
    let n = n().expr();
    let shape = [c(1), n.clone(), c(4096)];
    let bytes = SymExpr::product(&shape) * 4;
    assert_eq!(bytes.max_value(), Some(33_554_432));
    assert_eq!(bytes.min_value(), Some(0));
    assert_eq!(SymVar::new("k").expr().max_value(), None);
    assert_eq!(
        (-&n).bound(),
        Interval {
            lo: Some(-2048),
            hi: Some(0)
        }
    );
    let kv = (&n + &m().expr()).minimum(&c(4096)) * 2;
    assert_eq!(kv.max_value(), Some(8192));
}

#[test]
fn substitution_and_evaluation() {
    let (n, m) = (n().expr(), m().expr());
    let e = (&n * 3 + &m).floordiv(&c(2));
    let replaced = e.subst(&|v| (v.name() == "m").then(|| &n * 5));
    assert_eq!(replaced, (&n * 8).floordiv(&c(2)));
    assert_eq!(replaced, &n * 4);
    let bindings = SymBindings::from([("n".to_string(), 7), ("m".to_string(), 12)]);
    assert_eq!(e.eval(&bindings).unwrap(), 16);
}

#[test]
fn evaluating_an_unbound_dim_is_a_clear_error() {
    let e = n().expr() * 2 + m().expr();
    let bindings = SymBindings::from([("n".to_string(), 3)]);
    let err = e.eval(&bindings).unwrap_err();
    assert_eq!(
        err,
        SymError::Unbound {
            name: "m".into(),
            expr: "m + 2 * n".into()
        }
    );
    assert!(err.to_string().contains("`m` is unbound"));
    let div = n().expr().floordiv(&m().expr());
    let zero = SymBindings::from([("n".to_string(), 3), ("m".to_string(), 0)]);
    assert!(matches!(
        div.eval(&zero),
        Err(SymError::DivisionByZero { .. })
    ));
}

#[test]
fn printed_form_parses_back() {
    let texts = [
        "3 * n + 1",
        "-floormod(n + 31, 32) + 31",
        "-2 * k + m * n + 7",
        "2 * min(m, n)",
        "select(lt(n, m), n, m)",
        "floordiv(k, n) + floormod(k, 3)",
        "-n",
        "0",
    ];
    for text in texts {
        let e = parse(text);
        assert_eq!(e.to_string(), text);
        assert_eq!(parse(&e.to_string()), e);
    }
    assert_eq!(parse("(n + 1) * (n - 1)"), parse("n * n - 1"));
}

#[test]
fn parse_errors_name_the_problem() {
    let lookup = |_: &str| None;
    let err = SymExpr::parse("n + 1", &lookup).unwrap_err();
    assert!(err.message.contains("unknown symbolic dim `n`"), "{err}");
    assert!(SymExpr::parse("3 +", &lookup).is_err());
    assert!(SymExpr::parse("foo(1)", &lookup).is_err());
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let lookup = |_: &str| None;
    for text in [
        format!("{}1{}", "(".repeat(100_000), ")".repeat(100_000)),
        format!("{}1", "-".repeat(100_000)),
        format!("{}1{}", "max(1, ".repeat(100_000), ")".repeat(100_000)),
    ] {
        let err = SymExpr::parse(&text, &lookup).unwrap_err();
        assert!(
            err.message.contains("nested more than 256 deep"),
            "{}",
            err.message
        );
    }
    assert_eq!(
        parse(&format!("{}1{}", "(".repeat(200), ")".repeat(200))),
        c(1)
    );
}

#[test]
fn an_expression_of_over_4096_operands_is_an_error() {
    let lookup = |name: &str| (name == "n").then(n);
    let product = |factors: usize| format!("n{}", " * n".repeat(factors - 1));
    let err = SymExpr::parse(&product(100_000), &lookup).unwrap_err();
    assert!(
        err.message.contains("more than 4096 operands"),
        "{}",
        err.message
    );
    assert!(SymExpr::parse(&product(4096), &lookup).is_ok());
    let sum = format!("1{}", " + 1".repeat(4096));
    assert!(SymExpr::parse(&sum, &lookup).is_err());
}

#[test]
fn serde_keeps_the_bounds() {
    let e = n().expr() * 4 + m().expr();
    let json = serde_json::to_string(&e).unwrap();
    let back: SymExpr = serde_json::from_str(&json).unwrap();
    assert_eq!(back, e);
    assert_eq!(back.max_value(), Some(4 * 2048 + 4096));
}
