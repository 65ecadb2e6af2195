//! The test executable: one function per behaviour under test.

use super::*;
use crate::DType;
use std::collections::BTreeMap;
use DimPattern::{Bind, Check, Const};
use Instr::*;

/// Kernel ids in [`program`].
pub(super) const ADD: KernelId = 0;
const MATMUL: KernelId = 1;
const FAIL: KernelId = 2;
const RECORD: KernelId = 3;

fn kernels() -> Vec<KernelDecl> {
    let n = || dim(0);
    vec![
        kernel("add", &["n"], vec![f32_sig(vec![n()]); 3]),
        kernel(
            "matmul",
            &["n", "k", "m"],
            vec![
                f32_sig(vec![dim(0), dim(1)]),
                f32_sig(vec![dim(1), dim(2)]),
                f32_sig(vec![dim(0), dim(2)]),
            ],
        ),
        kernel("fail", &[], vec![f32_sig(vec![c(1)])]),
        kernel("record_ptr", &["n"], vec![f32_sig(vec![n()])]),
    ]
}

pub(super) fn match_f32(reg: Reg, dims: Vec<DimPattern>) -> Instr {
    MatchShape {
        reg,
        dtype: DType::F32,
        dims,
    }
}

pub(super) fn alloc(dst: Reg, place: Placement, shape: Vec<ShapeExpr>) -> Instr {
    AllocTensor {
        dst,
        place,
        dtype: DType::F32,
        shape,
    }
}

fn call(kernel: KernelId, args: Vec<Reg>, dims: Vec<ShapeExpr>) -> Instr {
    CallKernel { kernel, args, dims }
}

fn builtin(name: &str, args: Vec<Reg>, dst: Option<Reg>) -> Instr {
    CallBuiltin {
        name: name.into(),
        args,
        dst,
    }
}

fn load_int(dst: Reg, value: ShapeExpr) -> Instr {
    Load {
        dst,
        value: Immediate::Int(value),
    }
}

/// `add(a, b) = a + b` over `[n]`, `n <= 16`, result freshly allocated.
pub(super) fn add_function() -> VmFunction {
    let instrs = vec![
        match_f32(0, vec![Bind(0)]),
        match_f32(1, vec![Bind(0)]),
        alloc(2, Placement::Fresh, vec![dim(0)]),
        call(ADD, vec![0, 1, 2], vec![dim(0)]),
        Ret { reg: 2 },
    ];
    function(&["a", "b"], &[("n", Some(16))], 3, instrs, &[])
}

/// `add3(a, b) = (a + b) + b`, both results in arena slots (the second is returned).
pub(super) fn add3_function() -> VmFunction {
    let instrs = vec![
        match_f32(0, vec![Bind(0)]),
        match_f32(1, vec![Check(dim(0))]),
        alloc(2, Placement::Slot(0), vec![dim(0)]),
        call(ADD, vec![0, 1, 2], vec![dim(0)]),
        alloc(3, Placement::Slot(1), vec![dim(0)]),
        call(ADD, vec![2, 1, 3], vec![dim(0)]),
        Ret { reg: 3 },
    ];
    function(
        &["a", "b"],
        &[("n", Some(16))],
        4,
        instrs,
        &[(0, 64), (64, 64)],
    )
}

/// `matmul(x: [n, k], w: [k, m]) -> [n, m]`.
fn matmul_function() -> VmFunction {
    let instrs = vec![
        match_f32(0, vec![Bind(0), Bind(1)]),
        match_f32(1, vec![Bind(1), Bind(2)]),
        alloc(2, Placement::Fresh, vec![dim(0), dim(2)]),
        call(MATMUL, vec![0, 1, 2], vec![dim(0), dim(1), dim(2)]),
        Ret { reg: 2 },
    ];
    let bounds = [("n", Some(64)), ("k", Some(64)), ("m", Some(64))];
    function(&["x", "w"], &bounds, 3, instrs, &[])
}

/// `fill(x: [n])`: a `[n]` tensor in the arena slot at offset 128, filled with `n`.
fn fill_function() -> VmFunction {
    let instrs = vec![
        match_f32(0, vec![Bind(0)]),
        alloc(1, Placement::Slot(0), vec![dim(0)]),
        call(RECORD, vec![1], vec![dim(0)]),
        Ret { reg: 1 },
    ];
    function(&["x"], &[("n", Some(16))], 2, instrs, &[(128, 64)])
}

/// `create_kv_cache()`: 1 layer, 2 KV heads, head dim 4, 8 positions, f32.
fn create_kv_cache_function() -> VmFunction {
    let mut instrs: Vec<Instr> = [1, 2, 4, 8]
        .iter()
        .zip(0..)
        .map(|(&v, r)| load_int(r, c(v)))
        .collect();
    instrs.push(Load {
        dst: 4,
        value: Immediate::Str("f32".into()),
    });
    instrs.push(builtin("kv_cache.create", vec![0, 1, 2, 3, 4], Some(5)));
    instrs.push(Ret { reg: 5 });
    function(&[], &[], 6, instrs, &[])
}

/// `step(cache, k: [n, 2, 4], v: [n, 2, 4]) -> (keys: [m, 2, 4], m)` for layer 0, `m <= 8`.
fn step_function() -> VmFunction {
    let instrs = vec![
        match_f32(1, vec![Bind(0), Const(2), Const(4)]),
        match_f32(2, vec![Check(dim(0)), Const(2), Const(4)]),
        load_int(3, c(0)),
        builtin("kv_cache.append", vec![0, 3, 1, 2], None),
        builtin("kv_cache.view", vec![0, 3], Some(4)),
        TupleGet {
            dst: 5,
            tuple: 4,
            index: 0,
        },
        match_f32(5, vec![Bind(1), Const(2), Const(4)]),
        load_int(6, dim(1)),
        MakeTuple {
            dst: 7,
            fields: vec![5, 6],
        },
        Ret { reg: 7 },
    ];
    function(
        &["cache", "k", "v"],
        &[("n", Some(8)), ("m", Some(8))],
        8,
        instrs,
        &[],
    )
}

/// Functions that go wrong on purpose, each in one way.
fn faulty_functions() -> Vec<(&'static str, VmFunction)> {
    let fails = vec![
        match_f32(0, vec![Const(1)]),
        call(FAIL, vec![0], vec![]),
        Ret { reg: 0 },
    ];
    let unbound = vec![
        match_f32(0, vec![Bind(0)]),
        alloc(
            1,
            Placement::Fresh,
            vec![ShapeExpr::bin(ShapeOp::Add, dim(1), c(1))],
        ),
        Ret { reg: 1 },
    ];
    let bad_kernel_arg = vec![
        match_f32(0, vec![Bind(0)]),
        alloc(
            1,
            Placement::Fresh,
            vec![ShapeExpr::bin(ShapeOp::Add, dim(0), c(1))],
        ),
        call(ADD, vec![0, 0, 1], vec![dim(0)]),
        Ret { reg: 1 },
    ];
    let unchecked = vec![
        alloc(1, Placement::Fresh, vec![c(4)]),
        call(ADD, vec![0, 0, 1], vec![c(4)]),
        Ret { reg: 1 },
    ];
    let bad_tuple = vec![
        MakeTuple {
            dst: 1,
            fields: vec![0],
        },
        TupleGet {
            dst: 2,
            tuple: 1,
            index: 1,
        },
        Ret { reg: 2 },
    ];
    let small_slot = vec![
        match_f32(0, vec![Bind(0)]),
        alloc(1, Placement::Slot(0), vec![dim(0)]),
        Ret { reg: 1 },
    ];
    let n = [("n", None)];
    vec![
        ("fails", function(&["x"], &[], 1, fails, &[])),
        (
            "unbound",
            function(&["x"], &[("n", None), ("m", None)], 2, unbound, &[]),
        ),
        (
            "bad_kernel_arg",
            function(&["x"], &n, 2, bad_kernel_arg, &[]),
        ),
        ("unchecked", function(&["x"], &[], 2, unchecked, &[])),
        ("bad_tuple", function(&["x"], &[], 3, bad_tuple, &[])),
        (
            "small_slot",
            function(&["x"], &n, 2, small_slot, &[(0, 16)]),
        ),
    ]
}

/// The whole test executable.
pub(super) fn program() -> Executable {
    let mut functions = BTreeMap::from([
        ("add".to_string(), add_function()),
        ("add3".to_string(), add3_function()),
        ("matmul".to_string(), matmul_function()),
        ("fill".to_string(), fill_function()),
        ("create_kv_cache".to_string(), create_kv_cache_function()),
        ("step".to_string(), step_function()),
    ]);
    functions.extend(
        faulty_functions()
            .into_iter()
            .map(|(n, f)| (n.to_string(), f)),
    );
    Executable::new(kernels(), functions)
}

/// An executable with just `add` and its kernel.
pub(super) fn add_only() -> Executable {
    let kernels = vec![kernels().remove(ADD as usize)];
    Executable::new(
        kernels,
        BTreeMap::from([("add".to_string(), add_function())]),
    )
}
