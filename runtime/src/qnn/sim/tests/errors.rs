//! Malformed nets and calls give typed errors.

use super::model::{self, Params, C, T};
use crate::qnn::bin::{write_bin, BIN_FILE};
use crate::qnn::net::{NetFile, NET_FILE};
use crate::qnn::sim::{SimContext, SimError, SimMode};
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::collections::BTreeMap;

fn block() -> (NetFile, BTreeMap<String, Vec<u8>>) {
    model::block(&Params::random(&mut StdRng::seed_from_u64(1)), None)
}

#[test]
fn calls_are_checked() {
    let (net, bin) = block();
    let ctx = SimContext::from_parts(net, bin).unwrap();
    let x = vec![0.5; T * C];
    let err = ctx.run("block", &[&x[1..]], SimMode::Float).unwrap_err();
    assert!(
        matches!(&err, SimError::InputLength { tensor, expected, actual: 184, .. } if tensor == "x" && *expected == 185),
        "{err}"
    );
    let err = ctx.run("block", &[&x, &x], SimMode::Spec).unwrap_err();
    assert!(
        matches!(
            err,
            SimError::InputCount {
                expected: 1,
                actual: 2,
                ..
            }
        ),
        "{err}"
    );
    let err = ctx.run("prefill", &[&x], SimMode::Float).unwrap_err();
    assert!(
        matches!(&err, SimError::UnknownGraph(g) if g == "prefill"),
        "{err}"
    );
}

#[test]
fn nets_are_checked_when_loaded() {
    let (net, mut bin) = block();
    bin.remove("up.weight");
    let err = SimContext::from_parts(net, bin).err().unwrap();
    assert!(
        matches!(&err, SimError::MissingStatic(t) if t == "up.weight"),
        "{err}"
    );

    let (net, mut bin) = block();
    bin.get_mut("gamma").unwrap().pop();
    let err = SimContext::from_parts(net, bin).err().unwrap();
    assert!(
        matches!(&err, SimError::StaticSize { tensor, expected: 148, actual: 147 } if tensor == "gamma"),
        "{err}"
    );

    let (mut net, bin) = block();
    net.graph.nodes.get_mut("sigmoid").unwrap().op_type = "Gelu".into();
    let err = SimContext::from_parts(net, bin).err().unwrap();
    assert!(
        matches!(&err, SimError::UnknownOp { node, .. } if node == "sigmoid"),
        "{err}"
    );

    let (mut net, bin) = block();
    net.graph.nodes.get_mut("silu").unwrap().input_names[1] = "nowhere".into();
    let err = SimContext::from_parts(net, bin).err().unwrap();
    assert!(
        matches!(&err, SimError::Undeclared { user, name } if user == "silu" && name == "nowhere"),
        "{err}"
    );
}

#[test]
fn unsupported_convolutions_are_errors_naming_the_node() {
    let (mut net, bin) = block();
    let stride = net
        .graph
        .nodes
        .get_mut("up")
        .unwrap()
        .tensor_params
        .get_mut("stride");
    stride.unwrap().data = vec![2.0, 2.0];
    let ctx = SimContext::from_parts(net, bin).unwrap();
    let err = ctx
        .run("block", &[&vec![0.5; T * C]], SimMode::Float)
        .unwrap_err();
    assert!(
        matches!(&err, SimError::Node { node, .. } if node == "up"),
        "{err}"
    );
    assert!(err.to_string().contains("stride [2, 2]"), "{err}");
}

#[test]
fn a_folder_loads_and_a_missing_file_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = SimContext::load(dir.path()).err().unwrap();
    assert!(
        matches!(&err, SimError::Io { path, .. } if path.ends_with(NET_FILE)),
        "{err}"
    );
    let (net, bin) = block();
    std::fs::write(
        dir.path().join(NET_FILE),
        serde_json::to_string(&net).unwrap(),
    )
    .unwrap();
    let file = std::fs::File::create(dir.path().join(BIN_FILE)).unwrap();
    write_bin(file, &bin).unwrap();
    let ctx = SimContext::load(dir.path()).unwrap();
    assert_eq!(
        ctx.run("block", &[&vec![0.5; T * C]], SimMode::Float)
            .unwrap()[0]
            .len(),
        T * C
    );
    std::fs::write(dir.path().join(NET_FILE), "{").unwrap();
    let err = SimContext::load(dir.path()).err().unwrap();
    assert!(matches!(err, SimError::Json { .. }), "{err}");
}
