use super::lower_to_vm;
use crate::passes::{compile_pipeline, Instrument};
use oxrelax_dsl::{op, BlockBuilder, DType, Expr, StructInfo, SymVar, Var};
use oxrelax_runtime::vm::{DimPattern, Instr, Placement, ShapeExpr};

/// `f(x: [n, 8]) = e + e` for `e = exp(x)`, compiled up to bytecode (`exp` is read twice,
/// so it stays a kernel of its own).
fn compiled() -> oxrelax_runtime::Executable {
    let n = SymVar::bounded("n", 16);
    let x = Var::new(
        "x",
        StructInfo::tensor(vec![n.expr(), 8.into()], DType::F32),
    );
    let mut bb = BlockBuilder::new();
    bb.begin_function("f", vec![x.clone()], true).unwrap();
    bb.begin_dataflow().unwrap();
    let e = Expr::from(bb.emit(op::exp(&x.clone().into()).unwrap()).unwrap());
    let out = bb.emit_output(op::add(&e, &e).unwrap()).unwrap();
    bb.end_dataflow().unwrap();
    bb.end_function(out.into()).unwrap();
    let (module, _) = compile_pipeline()
        .instrumented(Instrument::from_env())
        .run(bb.finish().unwrap())
        .unwrap();
    lower_to_vm(&module).unwrap()
}

#[test]
fn parameters_bind_dims_and_kernels_get_planned_outputs() {
    let exec = compiled();
    let f = &exec.functions["f"];
    assert_eq!(f.params, ["x"]);
    assert_eq!(f.dims.len(), 1);
    assert_eq!(
        (f.dims[0].name.as_str(), f.dims[0].upper_bound),
        ("n", Some(16))
    );
    assert!(matches!(
        &f.instrs[0],
        Instr::MatchShape { reg: 0, dims, .. } if dims == &[DimPattern::Bind(0), DimPattern::Const(8)]
    ));
    let allocs: Vec<&Instr> = f
        .instrs
        .iter()
        .filter(|i| matches!(i, Instr::AllocTensor { .. }))
        .collect();
    assert_eq!(allocs.len(), 2);
    // exp's output lives in the arena; the returned add's output is allocated fresh.
    let places: Vec<Placement> = allocs
        .iter()
        .filter_map(|a| match a {
            Instr::AllocTensor { place, .. } => Some(*place),
            _ => None,
        })
        .collect();
    assert_eq!(places, [Placement::Slot(0), Placement::Fresh]);
    let calls: Vec<&Instr> = f
        .instrs
        .iter()
        .filter(|i| matches!(i, Instr::CallKernel { .. }))
        .collect();
    assert_eq!(calls.len(), 2);
    assert!(calls
        .iter()
        .all(|c| matches!(c, Instr::CallKernel { dims, .. } if dims == &[ShapeExpr::Dim(0)])));
    // exp's output is [16, 8] f32 at most: 512 bytes.
    assert_eq!(f.arena_size, 512);
    assert!(matches!(f.instrs.last(), Some(Instr::Ret { .. })));
    assert_eq!(exec.kernels.len(), 2);
    assert_eq!(exec.kernels[0].dims, ["n"]);
}

#[test]
fn executables_round_trip_through_json() {
    let exec = compiled();
    let json = exec.to_json().unwrap();
    assert_eq!(oxrelax_runtime::Executable::from_json(&json).unwrap(), exec);
}
