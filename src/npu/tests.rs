use super::*;
use crate::passes::Pass;
use oxrelax_dsl::text::{parse_module, print_module};
use oxrelax_dsl::IRModule;

/// A prefill where grouping by producers alone would make a cycle: `b2` reads `b1` and
/// `a1`, and `a2` (in `a1`'s group) reads `b1`; and where `c` cannot join `a2`'s group
/// because it also reads `softmax(a1)`, which runs on the CPU.
const CROSSED: &str = r#"
export graph @prefill(
  x: Tensor((1, n, 8), f32),
  w1: Tensor((8, 8), f32),
  w2: Tensor((8, 8), f32),
) -> Tensor((1, n, 8), f32) attrs(num_input=1)
  where n <= 64
{
  dataflow {
    t1: Tensor((8, 8), f32) = permute_dims(w1)
    t2: Tensor((8, 8), f32) = permute_dims(w2)
    a1: Tensor((1, n, 8), f32) = matmul(x, t1)
    s: Tensor((1, n, 8), f32) = softmax(a1, axis=-1)
    b1: Tensor((1, n, 8), f32) = matmul(x, t2)
    a2: Tensor((1, n, 8), f32) = add(a1, b1)
    b2: Tensor((1, n, 8), f32) = multiply(b1, a1)
    c: Tensor((1, n, 8), f32) = add(s, a2)
    output gv: Tensor((1, n, 8), f32) = add(c, b2)
  }
  return gv
}
"#;

fn partition(module: &IRModule, chunk: i64) -> IRModule {
    let pass = PartitionNpu {
        soc: Soc::named("sm8650").unwrap(),
        chunk,
        capability: &QNN_HTP,
    };
    pass.run(module.clone()).unwrap()
}

fn binding_names(module: &IRModule, function: &str) -> Vec<String> {
    let function = &module.functions[function];
    function.bindings().map(|b| b.var.name.clone()).collect()
}

#[test]
fn groups_stay_convex_and_acyclic_and_need_an_anchor() {
    let module = partition(&parse_module(CROSSED).unwrap(), 16);
    oxrelax_dsl::wellformed::check_module(&module).unwrap();
    let text = print_module(&module);
    assert_eq!(parse_module(&text).unwrap(), module, "print -> parse");
    // `a1`'s group takes `a2` and `b2`; `b1` is a group of its own, called first; `c` and
    // the result (no anchor, and `c` reads the CPU's softmax) stay on the CPU.
    let first = binding_names(&module, "prefill_npu0");
    assert_eq!(first, ["t1", "a1", "a2", "b2"], "{text}");
    assert_eq!(
        binding_names(&module, "prefill_npu1"),
        ["t2", "b1"],
        "{text}"
    );
    assert!(!module.functions.contains_key("prefill_npu2"), "{text}");
    let caller = binding_names(&module, "prefill");
    let at = |name: &str| caller.iter().position(|b| b == name).unwrap();
    assert!(at("prefill_npu1") < at("prefill_npu0"), "{caller:?}");
    assert!(
        at("s") > at("prefill_npu0") && at("c") > at("s"),
        "{caller:?}"
    );
    assert!(
        !caller.contains(&"t1".to_string()),
        "unread weight-only bindings go"
    );
}

#[test]
fn outlined_graphs_are_static_at_the_chunk_and_record_where_they_run() {
    let module = partition(&parse_module(CROSSED).unwrap(), 16);
    let graph = &module.functions["prefill_npu0"];
    assert!(graph.params.iter().all(|p| p.sinfo.sym_vars().is_empty()));
    assert!(graph.bindings().all(|b| b.var.sinfo.sym_vars().is_empty()));
    let attr = |key: &str| graph.attrs.get(key).cloned();
    use oxrelax_dsl::AttrValue::{Int, Str};
    assert_eq!(attr("codegen"), Some(Str("qnn".into())));
    assert_eq!(attr("soc"), Some(Str("SM8650".into())));
    assert_eq!(attr("chunk"), Some(Int(16)));
    assert_eq!(attr("num_input"), Some(Int(2)));
    let names: Vec<&str> = graph.params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["x", "b1", "w1"], "activations first, then weights");
}

#[test]
fn activation_products_and_oversized_tensors_stay_on_the_cpu() {
    // `matmul(x, x')` has no weight operand: nothing anchors a group.
    let activations = CROSSED
        .replace(
            "x: Tensor((1, n, 8), f32),",
            "x: Tensor((1, n, 8), f32),\n  y: Tensor((8, 8), f32),",
        )
        .replace("num_input=1", "num_input=2")
        .replace("matmul(x, t1)", "matmul(x, y)")
        .replace("matmul(x, t2)", "matmul(x, y)");
    let module = parse_module(&activations).unwrap();
    assert_eq!(partition(&module, 16), module);
    // A chunk whose every activation is over the NPU's tensor bound.
    let module = parse_module(&CROSSED.replace("n <= 64", "n <= 1000000000")).unwrap();
    assert_eq!(partition(&module, 1 << 30), module);
}

#[test]
fn socs_are_named_case_insensitively_and_unknown_ones_listed() {
    assert_eq!(Soc::named("sm8650").unwrap().htp_arch, 75);
    let err = Soc::named("SM0000").unwrap_err();
    assert!(err.contains("SM0000") && err.contains("SM8650"), "{err}");
}
