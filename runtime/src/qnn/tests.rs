use super::bin::{read_bin, write_bin};
use super::codes::{tensor_type, QnnDataType};
use super::net::*;
use std::collections::BTreeMap;

#[test]
fn data_type_codes_round_trip() {
    for dtype in [
        QnnDataType::Int32,
        QnnDataType::Uint32,
        QnnDataType::Float16,
        QnnDataType::Float32,
        QnnDataType::SFixed4,
        QnnDataType::SFixed8,
        QnnDataType::SFixed32,
        QnnDataType::UFixed8,
        QnnDataType::UFixed16,
        QnnDataType::Bool8,
    ] {
        assert_eq!(QnnDataType::from_code(dtype.code()), Some(dtype));
    }
    assert_eq!(QnnDataType::Float32.code(), 562);
    assert_eq!(QnnDataType::UFixed16.code(), 1046);
    assert_eq!(QnnDataType::from_code(0x7FFF_FFFF), None);
}

#[test]
fn a_net_survives_json_and_scalars_read_back() {
    let tensor = NetTensor {
        id: 0,
        kind: tensor_type::APP_WRITE,
        data_format: 0,
        data_type: QnnDataType::UFixed16.code(),
        quant_params: QuantParams::scale_offset(0.5, -32768),
        dims: vec![1, 32, 64],
    };
    let node = NetNode {
        package: "qti.aisw".into(),
        op_type: "RmsNorm".into(),
        tensor_params: BTreeMap::new(),
        scalar_params: BTreeMap::from([(
            "epsilon".to_string(),
            scalar_param(QnnDataType::Float32, 1e-5),
        )]),
        input_names: vec!["x".into()],
        output_names: vec!["y".into()],
    };
    let net = NetFile {
        model_cpp: "model.cpp".into(),
        model_bin: "model.bin".into(),
        converter_command: "oxrelax compile".into(),
        copyright_str: String::new(),
        op_types: vec!["RmsNorm".into()],
        graphs: vec![],
        token_axes: BTreeMap::new(),
        graph: NetGraph {
            tensors: BTreeMap::from([("x".to_string(), tensor)]),
            nodes: BTreeMap::from([("norm".to_string(), node)]),
        },
    };
    let text = serde_json::to_string(&net).unwrap();
    assert!(
        text.contains(r#""scalar_params":{"epsilon":{"562":"#),
        "{text}"
    );
    assert!(
        text.contains(r#""scale_offset":{"scale":0.5,"offset":-32768}"#),
        "{text}"
    );
    let back: NetFile = serde_json::from_str(&text).unwrap();
    assert_eq!(back, net);
    let epsilon = scalar_value(&back.graph.nodes["norm"].scalar_params["epsilon"]);
    assert_eq!(epsilon.map(|(t, _)| t), Some(QnnDataType::Float32));
}

#[test]
fn model_bin_round_trips_and_is_bounded() {
    let tensors = BTreeMap::from([
        ("w".to_string(), vec![1u8, 2, 3]),
        ("b".to_string(), vec![9u8; 1000]),
    ]);
    let mut bytes = Vec::new();
    write_bin(&mut bytes, &tensors).unwrap();
    assert_eq!(read_bin(bytes.as_slice(), 1 << 20).unwrap(), tensors);
    let err = read_bin(bytes.as_slice(), 100).unwrap_err();
    assert!(err.to_string().contains("more than 100 bytes"), "{err}");
}
