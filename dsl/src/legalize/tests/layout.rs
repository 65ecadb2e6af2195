//! `reshape`, `permute_dims`, `expand_dims`, `squeeze`, `broadcast_to`.

use super::*;

fn ints(values: &[i64]) -> AttrValue {
    AttrValue::Ints(values.to_vec())
}

#[test]
fn reshape_keeps_row_major_order() {
    let cases = [
        (vec![n(), c(6)], vec![n(), c(2), c(3)]),
        (vec![n(), c(6)], vec![&n() * 6]),
        (vec![c(2), &n() * 3], vec![n(), c(6)]),
        (vec![c(6), n()], vec![c(2), c(3), n(), c(1)]),
    ];
    for (from, to) in cases {
        let x = tensor("x", from, DType::F32);
        let shape = Expr::Shape(to.clone());
        let call = op("reshape", vec![x, shape], vec![], out(to, DType::F32));
        assert_eq!(pattern(&call), "injective");
        for n in SIZES {
            let input = pseudo_random(n as u64, 6 * n);
            assert_eq!(run(&call, n, vec![input.clone()])[0], input);
        }
    }
}

#[test]
fn reshape_to_a_different_size_is_rejected() {
    let x = tensor("x", vec![n(), c(6)], DType::F32);
    let to = vec![n(), c(5)];
    let call = op(
        "reshape",
        vec![x, Expr::Shape(to.clone())],
        vec![],
        out(to, DType::F32),
    );
    assert!(matches!(
        legalize_call(&call),
        Err(LegalizeError::Shape { .. })
    ));
}

#[test]
fn permute_dims_moves_axes() {
    let x = tensor("x", vec![n(), c(2), c(3)], DType::F32);
    let explicit = op(
        "permute_dims",
        vec![x.clone()],
        vec![("axes", ints(&[1, -1, 0]))],
        out(vec![c(2), c(3), n()], DType::F32),
    );
    let reversed = op(
        "permute_dims",
        vec![x],
        vec![],
        out(vec![c(3), c(2), n()], DType::F32),
    );
    for n in SIZES {
        let input = pseudo_random(n as u64, 6 * n);
        let at = |i: usize, j: usize, k: usize| input[offset(&[n, 2, 3], &[i, j, k])];
        let want: Vec<f64> = indices(&[2, 3, n])
            .iter()
            .map(|o| at(o[2], o[0], o[1]))
            .collect();
        assert_eq!(run(&explicit, n, vec![input.clone()])[0], want);
        let want: Vec<f64> = indices(&[3, 2, n])
            .iter()
            .map(|o| at(o[2], o[1], o[0]))
            .collect();
        assert_eq!(run(&reversed, n, vec![input.clone()])[0], want);
    }
}

#[test]
fn permute_dims_needs_a_permutation() {
    let x = tensor("x", vec![n(), c(2), c(3)], DType::F32);
    let sinfo = out(vec![c(2), n(), c(3)], DType::F32);
    let repeated = op(
        "permute_dims",
        vec![x.clone()],
        vec![("axes", ints(&[1, 1, 0]))],
        sinfo.clone(),
    );
    assert!(matches!(
        legalize_call(&repeated),
        Err(LegalizeError::BadAttr { .. })
    ));
    let short = op(
        "permute_dims",
        vec![x.clone()],
        vec![("axes", ints(&[1, 0]))],
        sinfo.clone(),
    );
    assert!(matches!(
        legalize_call(&short),
        Err(LegalizeError::BadAttr { .. })
    ));
    let outside = op(
        "permute_dims",
        vec![x],
        vec![("axes", ints(&[1, 0, 3]))],
        sinfo,
    );
    assert!(matches!(
        legalize_call(&outside),
        Err(LegalizeError::AxisOutOfRange { axis: 3, .. })
    ));
}

#[test]
fn expand_dims_and_squeeze_round_trip() {
    let x = tensor("x", vec![n(), c(3)], DType::F32);
    let expanded_shape = vec![c(1), n(), c(3), c(1)];
    let expand = op(
        "expand_dims",
        vec![x],
        vec![("axis", ints(&[0, -1]))],
        out(expanded_shape.clone(), DType::F32),
    );
    let y = tensor("y", expanded_shape.clone(), DType::F32);
    let squeeze_all = op(
        "squeeze",
        vec![y.clone()],
        vec![],
        out(vec![n(), c(3)], DType::F32),
    );
    let squeeze_last = op(
        "squeeze",
        vec![y],
        vec![("axis", ints(&[3]))],
        out(vec![c(1), n(), c(3)], DType::F32),
    );
    for n in SIZES {
        let input = pseudo_random(n as u64, 3 * n);
        let expanded = run(&expand, n, vec![input.clone()]).remove(0);
        assert_eq!(expanded, input);
        assert_eq!(run(&squeeze_all, n, vec![expanded.clone()])[0], input);
        assert_eq!(run(&squeeze_last, n, vec![expanded])[0], input);
    }
}

#[test]
fn squeezing_a_dim_that_is_not_one_is_rejected() {
    let x = tensor("x", vec![n(), c(3)], DType::F32);
    let call = op(
        "squeeze",
        vec![x],
        vec![("axis", ints(&[0]))],
        out(vec![c(3)], DType::F32),
    );
    let err = legalize_call(&call).unwrap_err();
    assert!(
        err.to_string()
            .contains("cannot squeeze axis 0 of extent n"),
        "{err}"
    );
}

#[test]
fn broadcast_to_repeats_unit_dims() {
    let x = tensor("x", vec![c(1), c(3)], DType::F32);
    let target = vec![c(2), n(), c(3)];
    let call = op(
        "broadcast_to",
        vec![x, Expr::Shape(target.clone())],
        vec![],
        out(target, DType::F32),
    );
    assert_eq!(pattern(&call), "broadcast");
    for n in SIZES {
        let got = run(&call, n, vec![vec![1.0, 2.0, 3.0]]);
        assert_eq!(got[0], [1.0, 2.0, 3.0].repeat(2 * n));
    }
}
