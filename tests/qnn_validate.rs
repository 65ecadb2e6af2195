//! `oxrelax qnn-validate`: a small valid net (a 32-token prefill graph and a one-token
//! decode graph sharing their weights) validates clean, and breaking each rule is
//! reported under that rule's name.

use oxrelax::npu::qnn::validate::{validate, validate_dir, Report, ValidateError, ValidateOptions};
use oxrelax_runtime::qnn::bin::write_bin;
use oxrelax_runtime::qnn::codes::{tensor_type, PACKAGE_QTI_AISW};
use oxrelax_runtime::qnn::net::*;
use oxrelax_runtime::qnn::QnnDataType::{self, *};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

const CIN: u32 = 64;
const COUT: u32 = 32;
const BLOCK: u32 = 16;
const IN_SCALE: f32 = 0.01;

/// A net and its `model.bin` entries.
struct Net {
    net: NetFile,
    bin: BTreeMap<String, Vec<u8>>,
}

fn tensor(kind: u32, dtype: QnnDataType, quant: QuantParams, dims: &[u32]) -> NetTensor {
    NetTensor {
        id: 0,
        kind,
        data_format: 0,
        data_type: dtype.code(),
        quant_params: quant,
        dims: dims.to_vec(),
    }
}

fn uint_param(dims: &[u32], data: &[f64]) -> TensorParam {
    TensorParam {
        data_type: Uint32.code(),
        dims: dims.to_vec(),
        data: data.to_vec(),
    }
}

fn node(op: &str, inputs: &[String], output: String) -> NetNode {
    NetNode {
        package: PACKAGE_QTI_AISW.into(),
        op_type: op.into(),
        tensor_params: BTreeMap::new(),
        scalar_params: BTreeMap::new(),
        input_names: inputs.to_vec(),
        output_names: vec![output],
    }
}

fn weight_scale(c: u32) -> f32 {
    0.002 * (c + 1) as f32
}

/// The shared weights: an LPBQ int4 filter, an SFIXED_32 bias, a UFIXED_8 norm scale.
fn add_weights(graph: &mut NetGraph, bin: &mut BTreeMap<String, Vec<u8>>) {
    let blocks = CIN / BLOCK;
    let lpbq = BlockwiseExpansion {
        axis: 3,
        block_axis: 2,
        block_size: BLOCK,
        num_blocks_per_axis: blocks,
        block_scale_bitwidth: 4,
        scale_offsets: (0..COUT)
            .map(|c| ScaleOffset {
                scale: weight_scale(c),
                offset: 0,
            })
            .collect(),
        block_scales: (0..COUT * blocks).map(|i| (i % 16 + 1) as u16).collect(),
    };
    let quant = QuantParams::blockwise_expansion(lpbq);
    let bias_scales = (0..COUT).map(|c| ScaleOffset {
        scale: IN_SCALE * weight_scale(c),
        offset: 0,
    });
    let tensors = [
        (
            "w",
            tensor(tensor_type::STATIC, SFixed8, quant, &[1, 1, CIN, COUT]),
        ),
        (
            "b",
            tensor(
                tensor_type::STATIC,
                SFixed32,
                QuantParams::axis_scale_offset(0, bias_scales.collect()),
                &[COUT],
            ),
        ),
        (
            "g",
            tensor(
                tensor_type::STATIC,
                UFixed8,
                QuantParams::scale_offset(0.01, 0),
                &[COUT],
            ),
        ),
    ];
    for (name, t) in tensors {
        let bytes =
            (0..t.numel() * t.dtype().unwrap().stored_bytes() as u64).map(|i| (i % 16) as i8 - 8);
        bin.insert(name.into(), bytes.map(|b| b as u8).collect());
        graph.tensors.insert(name.into(), t);
    }
}

/// Reshape -> Conv2d -> RmsNorm -> x * sigmoid(x), UFIXED_16 activations.
fn add_graph(graph: &mut NetGraph, name: &str, tokens: u32) -> GraphSpec {
    let t = |s: &str| format!("{name}.{s}");
    let act = |kind, dims: &[u32]| {
        tensor(
            kind,
            UFixed16,
            QuantParams::scale_offset(IN_SCALE, -32768),
            dims,
        )
    };
    let wide = [1, 1, tokens, COUT];
    let tensors = [
        ("x", act(tensor_type::APP_WRITE, &[1, tokens, CIN])),
        ("x4", act(tensor_type::NATIVE, &[1, 1, tokens, CIN])),
        ("h", act(tensor_type::NATIVE, &wide)),
        ("n", act(tensor_type::NATIVE, &wide)),
        ("s", act(tensor_type::NATIVE, &wide)),
        ("y", act(tensor_type::APP_READ, &wide)),
    ];
    graph
        .tensors
        .extend(tensors.map(|(n, tensor)| (t(n), tensor)));
    let mut conv = node("Conv2d", &[t("x4"), "w".into(), "b".into()], t("h"));
    conv.tensor_params
        .insert("stride".into(), uint_param(&[2], &[1.0, 1.0]));
    conv.tensor_params
        .insert("pad_amount".into(), uint_param(&[2, 2], &[0.0; 4]));
    conv.scalar_params
        .insert("group".into(), scalar_param(Uint32, 1.0));
    let mut norm = node("RmsNorm", &[t("h"), "g".into()], t("n"));
    norm.tensor_params
        .insert("axes".into(), uint_param(&[1], &[3.0]));
    norm.scalar_params
        .insert("epsilon".into(), scalar_param(Float32, 1e-6));
    let nodes = [
        ("reshape", node("Reshape", &[t("x")], t("x4"))),
        ("conv", conv),
        ("norm", norm),
        ("sigmoid", node("Sigmoid", &[t("n")], t("s"))),
        (
            "mul",
            node("ElementWiseMultiply", &[t("n"), t("s")], t("y")),
        ),
    ];
    let names = nodes.iter().map(|(n, _)| t(n)).collect();
    graph.nodes.extend(nodes.map(|(n, node)| (t(n), node)));
    GraphSpec {
        name: name.into(),
        tokens,
        inputs: vec![t("x")],
        outputs: vec![t("y")],
        nodes: names,
        variant_of: None,
    }
}

fn valid() -> Net {
    let (mut graph, mut bin) = (NetGraph::default(), BTreeMap::new());
    add_weights(&mut graph, &mut bin);
    let graphs = vec![
        add_graph(&mut graph, "prefill_npu0", 32),
        add_graph(&mut graph, "decode_npu0", 1),
    ];
    let ops = [
        "Conv2d",
        "ElementWiseMultiply",
        "Reshape",
        "RmsNorm",
        "Sigmoid",
    ];
    let net = NetFile {
        model_cpp: "model.cpp".into(),
        model_bin: "model.bin".into(),
        converter_command: "oxrelax compile".into(),
        copyright_str: String::new(),
        op_types: ops.map(String::from).to_vec(),
        graphs,
        token_axes: Default::default(),
        graph,
    };
    Net { net, bin }
}

fn check(net: &Net) -> Report {
    validate(&net.net, &net.bin, &ValidateOptions::default())
}

fn rules(report: &Report) -> BTreeSet<&'static str> {
    report.violations.iter().map(|v| v.rule).collect()
}

fn listing(report: &Report) -> String {
    report
        .violations
        .iter()
        .map(|v| format!("\n  {v}"))
        .collect()
}

/// Breaks the valid net with `mutate` and asserts `rule` is the only rule violated.
fn breaks_only(rule: &str, mutate: impl FnOnce(&mut Net)) -> Report {
    let report = breaks(rule, mutate);
    assert_eq!(
        rules(&report),
        BTreeSet::from([rule]),
        "{}",
        listing(&report)
    );
    report
}

/// Breaks the valid net with `mutate` and asserts `rule` is among the rules violated.
fn breaks(rule: &str, mutate: impl FnOnce(&mut Net)) -> Report {
    let mut net = valid();
    mutate(&mut net);
    let report = check(&net);
    assert!(
        rules(&report).contains(rule),
        "no {rule}:{}",
        listing(&report)
    );
    report
}

fn tensor_mut<'a>(net: &'a mut Net, name: &str) -> &'a mut NetTensor {
    net.net.graph.tensors.get_mut(name).unwrap()
}

fn node_mut<'a>(net: &'a mut Net, name: &str) -> &'a mut NetNode {
    net.net.graph.nodes.get_mut(name).unwrap()
}

fn lpbq_mut(net: &mut Net) -> &mut BlockwiseExpansion {
    tensor_mut(net, "w")
        .quant_params
        .blockwise_expansion
        .as_mut()
        .unwrap()
}

fn write_folder(net: &Net, npu: &Path) {
    std::fs::create_dir_all(npu).unwrap();
    std::fs::write(npu.join(NET_FILE), serde_json::to_string(&net.net).unwrap()).unwrap();
    let file = std::fs::File::create(npu.join("model.bin")).unwrap();
    write_bin(file, &net.bin).unwrap();
}

#[test]
fn the_valid_net_is_clean_in_memory_and_on_disk() {
    let net = valid();
    let report = check(&net);
    assert!(report.is_clean(), "{}", listing(&report));
    assert_eq!((report.graphs, report.nodes, report.tensors), (2, 10, 15));
    assert_eq!(report.static_bytes, u64::from(CIN * COUT + COUT * 4 + COUT));
    let dir = tempfile::tempdir().unwrap();
    write_folder(&net, &dir.path().join("npu"));
    let options = ValidateOptions::default();
    assert_eq!(validate_dir(dir.path(), &options).unwrap(), report);
    assert_eq!(
        validate_dir(&dir.path().join("npu"), &options).unwrap(),
        report
    );
}

#[test]
fn an_unknown_op_type_is_refused() {
    breaks_only("op-type", |n| {
        node_mut(n, "prefill_npu0.sigmoid").op_type = "Gelu".into()
    });
}

#[test]
fn a_missing_input_is_refused() {
    breaks_only("op-inputs", |n| {
        node_mut(n, "decode_npu0.mul").input_names.pop();
    });
}

#[test]
fn a_missing_required_param_is_refused() {
    breaks_only("op-params", |n| {
        node_mut(n, "prefill_npu0.conv")
            .tensor_params
            .remove("stride");
    });
}

#[test]
fn a_scalar_with_two_entries_is_refused() {
    breaks_only("op-params", |n| {
        let group = node_mut(n, "prefill_npu0.conv")
            .scalar_params
            .get_mut("group")
            .unwrap();
        group.insert(Int32.code().to_string(), 1.0);
    });
}

#[test]
fn a_dangling_tensor_name_is_refused() {
    breaks_only("tensor-refs", |n| {
        node_mut(n, "prefill_npu0.norm").input_names[0] = "nowhere".into()
    });
}

#[test]
fn a_static_node_output_is_refused() {
    let report = breaks("tensor-kinds", |n| {
        tensor_mut(n, "prefill_npu0.h").kind = tensor_type::STATIC
    });
    let kinds = report
        .violations
        .iter()
        .find(|v| v.rule == "tensor-kinds")
        .unwrap();
    assert_eq!(kinds.at, "tensor prefill_npu0.h");
}

#[test]
fn a_zero_dim_is_refused() {
    breaks_only("dims", |n| tensor_mut(n, "decode_npu0.x").dims[1] = 0);
}

#[test]
fn a_wrong_output_shape_is_refused() {
    breaks_only("op-shapes", |n| {
        tensor_mut(n, "prefill_npu0.h").dims[3] = COUT - 1
    });
}

#[test]
fn a_zero_scale_is_refused() {
    breaks_only("encoding", |n| {
        tensor_mut(n, "prefill_npu0.x")
            .quant_params
            .scale_offset
            .as_mut()
            .unwrap()
            .scale = 0.0;
    });
}

#[test]
fn a_float_tensor_with_an_encoding_is_refused() {
    breaks_only("encoding", |n| {
        tensor_mut(n, "prefill_npu0.s").data_type = Float32.code()
    });
}

#[test]
fn a_wrong_lpbq_block_count_is_refused() {
    breaks_only("lpbq", |n| lpbq_mut(n).num_blocks_per_axis = 3);
}

#[test]
fn block_scales_outside_1_to_16_are_refused() {
    breaks_only("lpbq", |n| lpbq_mut(n).block_scales[5] = 0);
    breaks_only("lpbq", |n| lpbq_mut(n).block_scales[5] = 17);
}

#[test]
fn an_lpbq_code_of_9_is_refused() {
    breaks_only("lpbq-codes", |n| n.bin.get_mut("w").unwrap()[7] = 9);
}

#[test]
fn lpbq_codes_declared_sfixed_point_4_are_refused() {
    let report = breaks("lpbq", |n| tensor_mut(n, "w").data_type = SFixed4.code());
    assert_eq!(
        rules(&report),
        BTreeSet::from(["lpbq", "encoding"]),
        "{}",
        listing(&report)
    );
}

#[test]
fn lpbq_block_scales_of_8_bits_are_refused() {
    breaks_only("lpbq", |n| lpbq_mut(n).block_scale_bitwidth = 8);
}

#[test]
fn lpbq_blocks_of_8_are_refused() {
    // A consistent layout that HTP accepts and computes wrong values for.
    breaks_only("lpbq", |n| {
        let lpbq = lpbq_mut(n);
        lpbq.block_size = 8;
        lpbq.num_blocks_per_axis = CIN / 8;
        lpbq.block_scales = (0..COUT * CIN / 8).map(|i| (i % 16 + 1) as u16).collect();
    });
}

#[test]
fn a_wrong_bias_scale_is_refused() {
    let report = breaks_only("bias-scale", |n| {
        let axis = tensor_mut(n, "b")
            .quant_params
            .axis_scale_offset
            .as_mut()
            .unwrap();
        axis.scale_offsets[3].scale *= 10.0;
    });
    assert!(
        report.violations[0].message.ends_with("(channel 3)"),
        "{}",
        listing(&report)
    );
}

#[test]
fn a_short_raw_entry_is_refused() {
    breaks_only("bin-sizes", |n| {
        n.bin.get_mut("b").unwrap().truncate(COUT as usize)
    });
}

#[test]
fn decode_reading_a_weight_prefill_does_not_is_refused() {
    breaks_only("weights-shared", |n| {
        let w = n.net.graph.tensors["w"].clone();
        n.net.graph.tensors.insert("w2".into(), w);
        n.bin.insert("w2".into(), n.bin["w"].clone());
        node_mut(n, "decode_npu0.conv").input_names[1] = "w2".into();
    });
}

#[test]
fn a_norm_weight_only_prefill_reads_is_allowed() {
    let mut net = valid();
    let g = net.net.graph.tensors["g"].clone();
    net.net.graph.tensors.insert("g2".into(), g);
    net.bin.insert("g2".into(), net.bin["g"].clone());
    node_mut(&mut net, "decode_npu0.norm").input_names[1] = "g2".into();
    let report = validate(&net.net, &net.bin, &ValidateOptions::default());
    assert!(report.is_clean(), "{}", listing(&report));
}

#[test]
fn static_bytes_over_the_budget_are_refused() {
    let options = ValidateOptions {
        context_budget: 1000,
        ..ValidateOptions::default()
    };
    let net = valid();
    let report = validate(&net.net, &net.bin, &options);
    assert_eq!(
        rules(&report),
        BTreeSet::from(["context-budget"]),
        "{}",
        listing(&report)
    );
}

#[test]
fn unreadable_files_are_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let options = ValidateOptions::default();
    let err = validate_dir(dir.path(), &options).unwrap_err();
    assert!(
        matches!(err, ValidateError::Read { ref path, .. } if path.ends_with(NET_FILE)),
        "{err}"
    );
    std::fs::write(dir.path().join(NET_FILE), "{\"graphs\": 3").unwrap();
    let err = validate_dir(dir.path(), &options).unwrap_err();
    assert!(
        matches!(err, ValidateError::Json { ref path, .. } if path.ends_with(NET_FILE)),
        "{err}"
    );
    write_folder(&valid(), dir.path());
    std::fs::write(dir.path().join("model.bin"), b"not a tar archive at all").unwrap();
    let err = validate_dir(dir.path(), &options).unwrap_err();
    assert!(err.to_string().contains("model.bin"), "{err}");
}

#[test]
fn the_cli_exits_nonzero_on_a_violation() {
    let dir = tempfile::tempdir().unwrap();
    let (good, bad) = (dir.path().join("good"), dir.path().join("bad"));
    write_folder(&valid(), &good.join("npu"));
    let mut broken = valid();
    tensor_mut(&mut broken, "prefill_npu0.x")
        .quant_params
        .scale_offset
        .as_mut()
        .unwrap()
        .scale = 0.0;
    write_folder(&broken, &bad);
    let run = |dir: &Path, json: bool| {
        Command::new(env!("CARGO_BIN_EXE_oxrelax"))
            .arg("qnn-validate")
            .arg(dir)
            .args(json.then_some("--json"))
            .output()
            .unwrap()
    };
    let ok = run(&good, false);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(String::from_utf8_lossy(&ok.stdout).contains("2 graphs, 10 nodes, 15 tensors"));
    let json = run(&good, true);
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(report["violations"], serde_json::json!([]), "{report}");
    let refused = run(&bad, false);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stdout).contains("encoding: tensor prefill_npu0.x"));
}
