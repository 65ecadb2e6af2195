//! The emitted encodings against Qualcomm's HTP backend (`libQnnHtp.so`, found through
//! `OXRELAX_QNN_LIB_DIR`; these tests say so and pass when it is not set): single-op
//! graphs built through the QNN API, run by HTP and by our reference backend in spec
//! mode, compared per output in LSBs.

use super::recipe::{lpbq, uint16_encoding};
use oxrelax_runtime::qnn::codes::{tensor_type, QnnDataType, PACKAGE_QTI_AISW};
use oxrelax_runtime::qnn::htp::{
    library_dir, HtpBackend, HtpContext, HtpError, QnnLibrary, ValidateOps,
};
use oxrelax_runtime::qnn::net::htp_computes_blocks;
use oxrelax_runtime::qnn::net::{
    scalar_param, GraphSpec, NetFile, NetGraph, NetNode, NetTensor, QuantParams, TensorParam,
};
use oxrelax_runtime::qnn::sim::{SimContext, SimMode};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// The HTP tests run one at a time: a process opens one backend at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The library, or `None` (with a note) when none is configured; with this test's turn.
fn htp_library() -> Option<(MutexGuard<'static, ()>, Arc<QnnLibrary>)> {
    let Ok(dir) = library_dir(None) else {
        eprintln!("OXRELAX_QNN_LIB_DIR is not set: skipping the HTP comparison");
        return None;
    };
    let turn = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    Some((
        turn,
        QnnLibrary::load_htp(&dir).expect("libQnnHtp.so loads"),
    ))
}

/// A backend for SM8650 (see [`htp_library`]).
fn htp_backend() -> Option<(MutexGuard<'static, ()>, Arc<HtpBackend>)> {
    let (turn, library) = htp_library()?;
    Some((
        turn,
        HtpBackend::open(library, "SM8650", 57).expect("an SM8650 device"),
    ))
}

fn activation(dims: &[u32], range: (f32, f32), kind: u32) -> NetTensor {
    let so = uint16_encoding(range);
    NetTensor {
        id: 0,
        kind,
        data_format: 0,
        data_type: QnnDataType::UFixed16.code(),
        quant_params: QuantParams::scale_offset(so.scale, so.offset),
        dims: dims.to_vec(),
    }
}

fn uint32_param(dims: &[u32], data: &[f64]) -> TensorParam {
    TensorParam {
        data_type: QnnDataType::Uint32.code(),
        dims: dims.to_vec(),
        data: data.to_vec(),
    }
}

/// One Conv2d graph over `tokens` rows: `cin` inputs to `cout` outputs with `filter`'s
/// encoding and codes.
fn conv_net(
    tokens: u32,
    cin: u32,
    cout: u32,
    filter: (QnnDataType, QuantParams, Vec<u8>),
) -> (NetFile, BTreeMap<String, Vec<u8>>) {
    let (dtype, quant_params, codes) = filter;
    let mut tensors = BTreeMap::new();
    tensors.insert(
        "x".into(),
        activation(&[1, 1, tokens, cin], (-1.0, 1.0), tensor_type::APP_WRITE),
    );
    let weight = NetTensor {
        id: 0,
        kind: tensor_type::STATIC,
        data_format: 0,
        data_type: dtype.code(),
        quant_params,
        dims: vec![1, 1, cin, cout],
    };
    tensors.insert("w".into(), weight);
    let wide = (cin as f32).sqrt() * 0.5;
    tensors.insert(
        "y".into(),
        activation(&[1, 1, tokens, cout], (-wide, wide), tensor_type::APP_READ),
    );
    let node = NetNode {
        package: PACKAGE_QTI_AISW.into(),
        op_type: "Conv2d".into(),
        tensor_params: BTreeMap::from([
            ("dilation".into(), uint32_param(&[2], &[1.0, 1.0])),
            ("pad_amount".into(), uint32_param(&[2, 2], &[0.0; 4])),
            ("stride".into(), uint32_param(&[2], &[1.0, 1.0])),
        ]),
        scalar_params: BTreeMap::from([("group".into(), scalar_param(QnnDataType::Uint32, 1.0))]),
        input_names: vec!["x".into(), "w".into()],
        output_names: vec!["y".into()],
    };
    let net = NetFile {
        model_cpp: String::new(),
        model_bin: String::new(),
        converter_command: String::new(),
        copyright_str: String::new(),
        op_types: vec!["Conv2d".into()],
        graphs: vec![GraphSpec {
            name: "conv".into(),
            tokens,
            inputs: vec!["x".into()],
            outputs: vec!["y".into()],
            nodes: vec!["conv".into()],
            variant_of: None,
        }],
        token_axes: BTreeMap::new(),
        graph: NetGraph {
            tensors,
            nodes: BTreeMap::from([("conv".into(), node)]),
        },
    };
    (net, BTreeMap::from([("w".into(), codes)]))
}

/// Pseudo-random values in [-1, 1) (a fixed LCG: the same on every run).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// The largest difference between HTP's and the reference backend's outputs of `net`,
/// in LSBs of the output.
fn max_lsb_gap(backend: &Arc<HtpBackend>, net: NetFile, bin: BTreeMap<String, Vec<u8>>) -> f32 {
    let scale = net.graph.tensors["y"]
        .quant_params
        .scale_offset
        .unwrap()
        .scale;
    let numel = net.graph.tensors["x"].numel() as usize;
    let input = values(numel, 7);
    let sim = SimContext::from_parts(net.clone(), bin.clone()).unwrap();
    let want = sim.run("conv", &[&input], SimMode::Spec).unwrap();
    let htp = HtpContext::build(backend.clone(), Arc::new(net), &bin, ValidateOps::Yes).unwrap();
    let got = htp.run("conv", &[&input]).unwrap();
    want[0]
        .iter()
        .zip(&got[0])
        .map(|(a, b)| (a - b).abs() / scale)
        .fold(0.0, f32::max)
}

/// Every LPBQ layout [`htp_computes_blocks`] allows computes within 2 LSB of the
/// reference on HTP, on row lengths with and without a block size that divides them.
/// (The layouts it refuses are left out: HTP computes garbage for them, and its graph
/// preparation sometimes crashes on them.)
#[test]
fn htp_computes_the_lpbq_layouts_the_rule_allows() {
    let Some((_turn, backend)) = htp_backend() else {
        return;
    };
    let mut wrong = Vec::new();
    for cin in [48u32, 64, 80, 96, 160, 176, 192, 256] {
        for block in [16u32, 32, 64, cin] {
            if !cin.is_multiple_of(block) || !htp_computes_blocks(block, cin / block) {
                continue;
            }
            let cout = 48;
            let weights = values((cin * cout) as usize, (cin + block) as u64);
            let filter = lpbq(&weights, &[1, 1, cin, cout], 4, block as usize);
            let (net, bin) = conv_net(8, cin, cout, filter);
            let gap = max_lsb_gap(&backend, net, bin);
            if gap > 2.0 {
                wrong.push(format!("{cin} inputs in blocks of {block}: {gap} LSB"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "HTP computes allowed layouts wrong: {wrong:?}"
    );
}

/// 8-bit weights per output channel, on a row length no block layout suits.
#[test]
fn htp_computes_per_channel_8_bit_filters() {
    let Some((_turn, backend)) = htp_backend() else {
        return;
    };
    for cin in [40u32, 176] {
        let weights = values((cin * 24) as usize, 3);
        let filter = super::recipe::per_channel(&weights, &[1, 1, cin, 24], 8);
        let (net, bin) = conv_net(5, cin, 24, filter);
        let gap = max_lsb_gap(&backend, net, bin);
        assert!(gap <= 2.0, "{cin} inputs: {gap} LSB");
    }
}

/// An LPBQ filter graph of 160 inputs to 32 outputs over 8 rows.
fn small_conv() -> (NetFile, BTreeMap<String, Vec<u8>>) {
    let weights = values(160 * 32, 11);
    conv_net(8, 160, 32, lpbq(&weights, &[1, 1, 160, 32], 4, 32))
}

#[test]
fn a_context_binary_reloads_and_computes_bit_identical_outputs() {
    let Some((_turn, backend)) = htp_backend() else {
        return;
    };
    let (net, bin) = small_conv();
    let net = Arc::new(net);
    let built = HtpContext::build(backend.clone(), net.clone(), &bin, ValidateOps::Yes).unwrap();
    let input = values(8 * 160, 5);
    let want = built.run("conv", &[&input]).unwrap();
    let binary = built.binary().unwrap();
    let ids = built.tensor_ids().clone();
    drop(built);
    let restored = HtpContext::from_binary(backend, net, &binary, ids).unwrap();
    let got = restored.run("conv", &[&input]).unwrap();
    assert_eq!(got, want);
}

#[test]
fn malformed_context_binaries_are_typed_errors() {
    let Some((_turn, backend)) = htp_backend() else {
        return;
    };
    let (net, bin) = small_conv();
    let net = Arc::new(net);
    let built = HtpContext::build(backend.clone(), net.clone(), &bin, ValidateOps::Yes).unwrap();
    let binary = built.binary().unwrap();
    let ids = built.tensor_ids().clone();
    let mut flipped = binary.clone();
    for i in (64..flipped.len()).step_by(997) {
        flipped[i] ^= 0x5a;
    }
    let cases = [
        ("empty", Vec::new()),
        ("truncated", binary[..binary.len() / 2].to_vec()),
        ("zeros", vec![0u8; 4096]),
        ("flipped", flipped),
    ];
    for (what, bytes) in cases {
        match HtpContext::from_binary(backend.clone(), net.clone(), &bytes, ids.clone()) {
            Err(HtpError::Call { call, .. }) => assert_eq!(call, "QnnContext_createFromBinary"),
            Err(other) => panic!("{what}: {other}"),
            Ok(_) => panic!("{what}: loaded"),
        }
    }
    let mut no_ids = ids.clone();
    no_ids.get_mut("conv").unwrap().remove("y");
    let err = HtpContext::from_binary(backend, net, &binary, no_ids)
        .err()
        .unwrap();
    assert!(
        err.to_string().contains("no tensor id recorded for `y`"),
        "{err}"
    );
}

#[test]
fn a_soc_the_library_does_not_know_is_a_typed_error_naming_it() {
    let Some((_turn, library)) = htp_library() else {
        return;
    };
    let err = HtpBackend::open(library, "SM9999", 9999).err().unwrap();
    assert!(
        matches!(
            &err,
            HtpError::Call {
                call: "QnnDevice_create",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("SoC SM9999"), "{err}");
}

#[test]
fn a_missing_or_foreign_library_is_a_typed_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let err = QnnLibrary::load_htp(dir.path()).err().unwrap();
    assert!(matches!(err, HtpError::LibraryMissing { .. }), "{err}");
    assert!(err.to_string().contains("libQnnHtp.so"), "{err}");
    std::fs::write(dir.path().join("libQnnHtp.so"), b"not a library").unwrap();
    let err = QnnLibrary::load_htp(dir.path()).err().unwrap();
    assert!(matches!(err, HtpError::LibraryLoad { .. }), "{err}");
}

/// A library whose one provider implements core API 2.10 (built with the system's C
/// compiler): refused, naming the version found and the versions supported.
#[test]
fn a_library_of_an_older_api_is_a_typed_error_naming_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("old.c");
    std::fs::write(
        &source,
        "typedef struct { unsigned id; const char *name; unsigned v[6]; void *table[64]; } I;\n\
         static I old = {0, \"old\", {2, 10, 0, 5, 0, 0}, {0}};\n\
         static const I *list[] = {&old};\n\
         unsigned long long QnnInterface_getProviders(const I ***p, unsigned *n) {\n\
         \x20 *p = list; *n = 1; return 0;\n}\n",
    )
    .unwrap();
    let library = dir.path().join("libQnnHtp.so");
    let status = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&library)
        .arg(&source)
        .status()
        .expect("a C compiler");
    assert!(status.success());
    let err = QnnLibrary::load_htp(dir.path()).err().unwrap();
    let text = err.to_string();
    assert!(matches!(err, HtpError::UnsupportedApi { .. }), "{text}");
    assert!(text.contains("2.10.0") && text.contains("2.32"), "{text}");
}
