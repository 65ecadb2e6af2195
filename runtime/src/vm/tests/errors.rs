use super::programs::{add_function, alloc, match_f32, program, ADD};
use super::*;
use crate::BuiltinError;
use std::collections::BTreeMap;

fn ints(values: &[i32], shape: &[i64]) -> Value {
    Tensor::from_slice(values, shape).unwrap().into()
}

fn message(vm: &mut VirtualMachine, func: &str, args: &[Value]) -> String {
    vm.call(func, args).unwrap_err().to_string()
}

#[test]
fn unknown_functions_and_wrong_argument_counts_are_named() {
    let mut vm = vm(program());
    let err = vm.call("decode", &[]).unwrap_err();
    assert!(matches!(&err, VmError::UnknownFunction { name, available }
        if name == "decode" && available.starts_with("add, add3, ")));
    assert_eq!(
        message(&mut vm, "add", &[f32s(&[1.0], &[1])]),
        "function `add` takes 2 argument(s) (a, b), got 1"
    );
}

#[test]
fn a_retired_function_frees_its_arena_and_is_unknown_afterwards() {
    let mut vm = vm(program());
    let (a, b) = (f32s(&[1.0], &[1]), f32s(&[2.0], &[1]));
    vm.call("add3", &[a.clone(), b.clone()]).unwrap();
    assert!(vm.arena("add3").is_some_and(|arena| arena.size() > 0));
    assert!(vm.retire("add3"));
    assert!(vm.arena("add3").is_none());
    let err = vm.call("add3", &[a.clone(), b.clone()]).unwrap_err();
    assert!(matches!(&err, VmError::UnknownFunction { name, .. } if name == "add3"));
    assert!(!vm.retire("add3"));
    // The others still run.
    vm.call("add", &[a, b]).unwrap();
}

#[test]
fn match_shape_reports_argument_expected_and_actual_shapes() {
    let mut vm = vm(program());
    let a = f32s(&[1.0, 2.0, 3.0], &[3]);
    assert_eq!(
        message(&mut vm, "add", &[ints(&[1, 2, 3], &[3]), a.clone()]),
        "function `add`: argument `a` expected [n] f32, got [3] i32: dtype is i32, expected f32"
    );
    assert_eq!(
        message(&mut vm, "add", &[a.clone(), f32s(&[0.0; 4], &[4])]),
        "function `add`: argument `b` expected [n] f32, got [4] f32: axis 0 is 4, but `n` = 3"
    );
    assert_eq!(
        message(&mut vm, "add3", &[a.clone(), f32s(&[0.0; 2], &[2])]),
        "function `add3`: argument `b` expected [n] f32, got [2] f32: axis 0 is 2, expected `n` = 3"
    );
    assert_eq!(
        message(&mut vm, "add", &[f32s(&[0.0; 4], &[2, 2]), a.clone()]),
        "function `add`: argument `a` expected [n] f32, got [2, 2] f32: rank is 2, expected 1"
    );
    let cache = vm.call("create_kv_cache", &[]).unwrap();
    let k = f32s(&[0.0; 12], &[1, 3, 4]);
    let err = vm.call("step", &[cache, k.clone(), k]).unwrap_err();
    assert!(
        matches!(err, VmError::ShapeMismatch { ref expected, ref reason, .. }
        if expected == "[n, 2, 4] f32" && reason == "axis 1 is 3, expected 2")
    );
    assert!(matches!(
        vm.call("add", &[Value::Int(3), a]).unwrap_err(),
        VmError::Kind { ref what, ref got, .. } if what == "argument `a`" && got == "int"
    ));
}

#[test]
fn dims_above_their_upper_bound_are_rejected() {
    let mut vm = vm(program());
    let big = f32s(&[0.0; 17], &[17]);
    let err = vm.call("add", &[big.clone(), big]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "function `add`: argument `a` binds `n` = 17, above its upper bound 16"
    );
}

#[test]
fn unbound_dims_are_named() {
    let mut vm = vm(program());
    let err = vm.call("unbound", &[f32s(&[0.0; 2], &[2])]).unwrap_err();
    assert!(
        matches!(&err, VmError::UnboundDim { func, dim, .. } if func == "unbound" && dim == "m")
    );
    assert_eq!(
        err.to_string(),
        "function `unbound`: dim `m` is used by the allocation of register %1 before it is bound"
    );
}

#[test]
fn kernels_never_see_unchecked_buffers() {
    let mut vm = vm(program());
    assert_eq!(
        message(&mut vm, "bad_kernel_arg", &[f32s(&[0.0; 3], &[3])]),
        "function `bad_kernel_arg`: kernel `add` argument 2 expected [n] f32 with n = 3, \
         got [4] f32: extents are [4], expected [3]"
    );
    assert_eq!(
        message(&mut vm, "unchecked", &[ints(&[0; 4], &[4])]),
        "function `unchecked`: kernel `add` argument 0 expected [n] f32 with n = 4, \
         got [4] i32: dtype is i32, expected f32"
    );
    let out = vm.call("unchecked", &[f32s(&[1.5; 4], &[4])]).unwrap();
    assert_eq!(values_of(&out), vec![3.0; 4]);
    let err = vm.call("unchecked", &[Value::Float(1.0)]).unwrap_err();
    assert!(matches!(err, VmError::Kind { ref what, .. } if what == "kernel `add` argument 0"));
}

#[test]
fn strided_tensors_are_refused_by_kernels() {
    let mut exec = program();
    let f = exec.functions.get_mut("unchecked").unwrap();
    f.instrs[0] = alloc(1, Placement::Fresh, vec![c(4), c(1)]);
    f.instrs[1] = Instr::CallKernel {
        kernel: 1,
        args: vec![0, 0, 1],
        dims: vec![c(4), c(1), c(1)],
    };
    let mut vm = vm(exec);
    let x = Tensor::from_slice(&[0.0f32; 8], &[4, 2])
        .unwrap()
        .narrow(1, 0, 1)
        .unwrap();
    let err = vm.call("unchecked", &[x.into()]).unwrap_err();
    assert!(
        matches!(err, VmError::ShapeMismatch { ref reason, .. } if reason == "strides [2, 1] are not row-major")
    );
}

#[test]
fn kernel_failures_name_the_kernel() {
    let mut vm = vm(program());
    let err = vm.call("fails", &[f32s(&[0.0], &[1])]).unwrap_err();
    assert!(matches!(&err, VmError::KernelFailed { kernel, code: 3, .. } if kernel == "fail"));
    assert_eq!(
        err.to_string(),
        "function `fails`: kernel `fail` failed with status 3"
    );
}

#[test]
fn tuple_and_slot_errors_are_reported() {
    let mut vm = vm(program());
    assert_eq!(
        message(&mut vm, "bad_tuple", &[Value::Int(1)]),
        "function `bad_tuple`: tuple in register %1 has 1 fields, no field 1"
    );
    assert_eq!(
        message(&mut vm, "small_slot", &[f32s(&[0.0; 8], &[8])]),
        "function `small_slot`: tensor of 32 bytes does not fit memory-plan slot 0 (16 bytes)"
    );
    assert!(vm.call("small_slot", &[f32s(&[0.0; 4], &[4])]).is_ok());
}

#[test]
fn builtin_errors_carry_function_and_builtin_names() {
    let mut vm = vm(program());
    let k = f32s(&[0.0; 8], &[1, 2, 4]);
    let err = vm.call("step", &[Value::Int(3), k.clone(), k]).unwrap_err();
    let VmError::Builtin { func, source } = &err else {
        panic!("expected a builtin error, got {err}");
    };
    assert_eq!(func, "step");
    assert!(matches!(**source, BuiltinError::ArgType { index: 0, .. }));
    assert!(err.to_string().starts_with(
        "function `step`: `kv_cache.append` argument 0 (`cache`): expected object, got int"
    ));
}

#[test]
fn loading_fails_on_missing_kernels_and_builtins() {
    let builtins = Registry::with_builtins();
    let err = VirtualMachine::new(program(), Arc::new(KernelTable::new()), &builtins)
        .err()
        .unwrap();
    assert_eq!(err.to_string(), "kernel `add` is not in the kernel library");
    let err = VirtualMachine::new(program(), Arc::new(library()), &Registry::new())
        .err()
        .unwrap();
    assert_eq!(
        err.to_string(),
        "function `create_kv_cache` calls builtin `kv_cache.create`, which is not registered"
    );
}

/// A change to a valid function.
type Edit = dyn Fn(&mut VmFunction);

/// Loads `add` after `edit` and returns the validation message.
fn invalid_after(edit: &Edit) -> String {
    let mut f = add_function();
    edit(&mut f);
    let exec = Executable::new(program().kernels, BTreeMap::from([("add".to_string(), f)]));
    match VirtualMachine::new(exec, Arc::new(library()), &Registry::new()) {
        Err(VmError::Exec(e)) => e.to_string(),
        other => panic!(
            "expected an invalid executable, got {:?}",
            other.map(|_| ())
        ),
    }
}

#[test]
fn inconsistent_executables_are_refused_at_load() {
    let prefix = "invalid executable: function `add`: ";
    let cases: Vec<(Box<Edit>, &str)> = vec![
        (Box::new(|f| f.num_regs = 2), "instruction 2: register %2 out of range (2 registers)"),
        (Box::new(|f| f.num_regs = 1), "2 parameters but 1 registers"),
        (
            Box::new(|f| f.num_regs = u32::MAX),
            "4294967295 registers, but its 2 parameters and 5 instructions fill at most 7",
        ),
        (Box::new(|f| f.dims.clear()), "instruction 0: dim register 0 out of range (0 dims)"),
        (Box::new(|f| { f.instrs.pop(); }), "code must end with `ret`"),
        (
            Box::new(|f| {
                f.arena_size = 100;
                f.slots = vec![Slot { offset: 32, size: 64 }];
            }),
            "slot 0 (offset 32, 64 bytes) must start at a multiple of 64 and fit the 100-byte arena",
        ),
        (
            Box::new(|f| f.instrs[3] = Instr::CallKernel { kernel: ADD, args: vec![0, 1], dims: vec![dim(0)] }),
            "instruction 3: kernel `add` takes 3 buffers and 1 dims, given 2 and 1",
        ),
        (
            Box::new(|f| f.instrs[3] = Instr::CallKernel { kernel: 9, args: vec![], dims: vec![] }),
            "instruction 3: kernel 9 out of range (4 kernels)",
        ),
        (
            Box::new(|f| {
                f.instrs[2] = alloc(2, Placement::Slot(0), vec![])
            }),
            "instruction 2: slot 0 out of range (0 slots)",
        ),
    ];
    for (edit, reason) in cases {
        assert_eq!(invalid_after(&*edit), format!("{prefix}{reason}"));
    }
}

/// `f(x: [n])`: passes a `[n]` arena view to `builtin` and returns what it returns.
fn pass_arena_view_to(builtin: &str) -> Executable {
    let instrs = vec![
        match_f32(0, vec![DimPattern::Bind(0)]),
        alloc(1, Placement::Slot(0), vec![dim(0)]),
        Instr::CallBuiltin {
            name: builtin.into(),
            args: vec![1],
            dst: Some(2),
        },
        Instr::Ret { reg: 2 },
    ];
    let f = function(&["x"], &[("n", Some(16))], 3, instrs, &[(0, 64)]);
    Executable::new(vec![], BTreeMap::from([("f".to_string(), f)]))
}

#[test]
fn builtins_may_return_but_not_keep_arena_views() {
    let kept = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut registry = Registry::new();
    let tensor = [("x", crate::ValueKind::Tensor)];
    registry
        .register(
            "test.identity",
            &tensor,
            |args| Ok(args.values()[0].clone()),
        )
        .unwrap();
    let stash = kept.clone();
    registry
        .register("test.stash", &tensor, move |args| {
            stash.lock().unwrap().push(args.tensor(0)?.clone());
            Ok(Value::Int(0))
        })
        .unwrap();
    let x = f32s(&[0.0; 4], &[4]);
    let lib = Arc::new(library());
    let mut vm =
        VirtualMachine::new(pass_arena_view_to("test.identity"), lib.clone(), &registry).unwrap();
    let out = vm.call("f", std::slice::from_ref(&x)).unwrap();
    assert_eq!(
        out.as_tensor().unwrap().storage_kind(),
        crate::StorageKind::Owned
    );
    let mut vm = VirtualMachine::new(pass_arena_view_to("test.stash"), lib, &registry).unwrap();
    let err = vm.call("f", &[x]).unwrap_err();
    assert!(matches!(&err, VmError::ArenaViewRetained { builtin, .. } if builtin == "test.stash"));
    assert_eq!(kept.lock().unwrap().len(), 1);
}

/// Runs a one-function executable named `f` on `args` and returns its error message.
fn failure_of(f: VmFunction, args: &[Value]) -> String {
    let exec = Executable::new(vec![], BTreeMap::from([("f".to_string(), f)]));
    vm(exec).call("f", args).unwrap_err().to_string()
}

#[test]
fn uninitialized_registers_and_bad_shape_arithmetic_are_reported() {
    let read_unset = function(&["x"], &[], 2, vec![Instr::Ret { reg: 1 }], &[]);
    assert_eq!(
        failure_of(read_unset, &[Value::Int(0)]),
        "function `f`: register %1 is read before it is written"
    );
    let alloc = |extent: ShapeExpr| {
        let instrs = vec![
            match_f32(0, vec![DimPattern::Bind(0)]),
            alloc(1, Placement::Fresh, vec![extent]),
            Instr::Ret { reg: 1 },
        ];
        function(&["x"], &[("n", None)], 2, instrs, &[])
    };
    let x = f32s(&[0.0; 3], &[3]);
    assert_eq!(
        failure_of(
            alloc(ShapeExpr::bin(ShapeOp::Sub, dim(0), c(5))),
            std::slice::from_ref(&x)
        ),
        "function `f`: the allocation of register %1: `n - 5` is negative (-2)"
    );
    let div = ShapeExpr::bin(
        ShapeOp::FloorDiv,
        c(8),
        ShapeExpr::bin(ShapeOp::Sub, dim(0), c(3)),
    );
    assert_eq!(
        failure_of(alloc(div), &[x]),
        "function `f`: the allocation of register %1: `8 // (n - 3)` overflows or divides by zero"
    );
}
