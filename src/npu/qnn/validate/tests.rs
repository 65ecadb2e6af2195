use super::ops::OPS;
use super::shapes::{self, NodeView};
use super::RULES;
use oxrelax_runtime::qnn::net::{scalar_param, NetNode, TensorParam};
use oxrelax_runtime::qnn::QnnDataType;
use std::collections::{BTreeMap, BTreeSet};

fn node(params: &[(&str, &[u32], &[f64])]) -> NetNode {
    let tensor_params = params.iter().map(|&(name, dims, data)| {
        let param = TensorParam {
            data_type: QnnDataType::Uint32.code(),
            dims: dims.to_vec(),
            data: data.to_vec(),
        };
        (name.to_string(), param)
    });
    NetNode {
        package: "qti.aisw".into(),
        op_type: String::new(),
        tensor_params: tensor_params.collect(),
        scalar_params: BTreeMap::new(),
        input_names: vec![],
        output_names: vec![],
    }
}

fn view<'a>(node: &'a NetNode, inputs: &[&'a [u32]], output: &'a [u32]) -> NodeView<'a> {
    NodeView {
        node,
        inputs: inputs.to_vec(),
        outputs: vec![output],
    }
}

#[test]
fn rule_and_op_names_are_unique() {
    let rules: BTreeSet<_> = RULES.iter().map(|r| r.name).collect();
    assert_eq!(rules.len(), RULES.len());
    let ops: BTreeSet<_> = OPS.iter().map(|o| o.op_type).collect();
    assert_eq!(ops.len(), OPS.len());
}

#[test]
fn conv2d_follows_stride_padding_dilation_and_groups() {
    let mut conv = node(&[
        ("stride", &[2], &[2.0, 1.0]),
        ("pad_amount", &[2, 2], &[1.0, 1.0, 0.0, 0.0]),
        ("dilation", &[2], &[1.0, 2.0]),
    ]);
    conv.scalar_params
        .insert("group".into(), scalar_param(QnnDataType::Uint32, 2.0));
    let (x, w, b): (&[u32], &[u32], &[u32]) = (&[1, 9, 9, 8], &[3, 3, 4, 6], &[6]);
    // H: (9 + 2 - 3) / 2 + 1 = 5; W: (9 - 5) / 1 + 1 = 5.
    assert_eq!(
        shapes::conv2d(&view(&conv, &[x, w, b], &[1, 5, 5, 6])),
        Ok(())
    );
    assert!(shapes::conv2d(&view(&conv, &[x, w, b], &[1, 5, 7, 6])).is_err());
    assert!(shapes::conv2d(&view(&conv, &[x, &[3, 3, 8, 6], b], &[1, 5, 5, 6])).is_err());
    assert!(shapes::conv2d(&view(&conv, &[x, w, &[4]], &[1, 5, 5, 6])).is_err());
}

#[test]
fn transpose_needs_a_permutation() {
    let x: &[u32] = &[2, 3, 4];
    let ok = node(&[("perm", &[3], &[2.0, 0.0, 1.0])]);
    assert_eq!(shapes::transpose(&view(&ok, &[x], &[4, 2, 3])), Ok(()));
    assert!(shapes::transpose(&view(&ok, &[x], &[2, 3, 4])).is_err());
    let repeated = node(&[("perm", &[3], &[0.0, 0.0, 1.0])]);
    assert!(shapes::transpose(&view(&repeated, &[x], &[2, 2, 3])).is_err());
    let fractional = node(&[("perm", &[3], &[0.5, 1.0, 2.0])]);
    assert!(shapes::transpose(&view(&fractional, &[x], &[2, 3, 4])).is_err());
}

#[test]
fn elementwise_ops_broadcast_like_numpy() {
    let none = node(&[]);
    let (a, b): (&[u32], &[u32]) = (&[4, 1, 3], &[5, 1]);
    assert_eq!(shapes::broadcast(&view(&none, &[a, b], &[4, 5, 3])), Ok(()));
    assert!(shapes::broadcast(&view(&none, &[a, b], &[4, 1, 3])).is_err());
    assert!(shapes::broadcast(&view(&none, &[a, &[2]], &[4, 1, 3])).is_err());
}
