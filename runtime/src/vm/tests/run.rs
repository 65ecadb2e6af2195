use super::kernels::RECORDED;
use super::programs::program;
use super::*;
use crate::StorageKind;
use ndarray::Array2;
use std::sync::atomic::Ordering;

#[test]
fn add_runs_a_kernel_through_the_vm() {
    let mut vm = vm(program());
    let out = vm
        .call(
            "add",
            &[
                f32s(&[1.0, 2.0, 3.0], &[3]),
                f32s(&[10.0, 20.0, 30.0], &[3]),
            ],
        )
        .unwrap();
    assert_eq!(values_of(&out), vec![11.0, 22.0, 33.0]);
    assert_eq!(out.as_tensor().unwrap().storage_kind(), StorageKind::Owned);
    let out = vm
        .call("add", &[f32s(&[0.5; 16], &[16]), f32s(&[0.25; 16], &[16])])
        .unwrap();
    assert_eq!(values_of(&out), vec![0.75; 16]);
}

#[test]
fn matmul_kernel_with_parallel_rows_matches_ndarray() {
    let mut vm = vm(program());
    let x = Array2::from_shape_fn((5, 3), |(i, j)| i as f32 * 0.5 - j as f32);
    let w = Array2::from_shape_fn((3, 4), |(i, j)| (i * 4 + j) as f32 * 0.25 - 1.0);
    let args = [
        Tensor::from_ndarray(&x).unwrap().into(),
        Tensor::from_ndarray(&w).unwrap().into(),
    ];
    let out = vm.call("matmul", &args).unwrap();
    let got = out.as_tensor().unwrap().to_ndarray::<f32>().unwrap();
    let want = x.dot(&w).into_dyn();
    assert_eq!(got.shape(), &[5, 4]);
    assert!(
        got.iter().zip(&want).all(|(a, b)| (a - b).abs() < 1e-5),
        "{got} vs {want}"
    );
}

#[test]
fn arena_is_allocated_once_and_reused_across_calls() {
    let mut vm = vm(program());
    let base = vm.arena("fill").unwrap().base_ptr() as usize;
    assert_eq!(vm.arena("fill").unwrap().size(), 192);
    let first = vm.call("fill", &[f32s(&[0.0; 4], &[4])]).unwrap();
    assert_eq!(
        RECORDED.load(Ordering::SeqCst),
        base + 128,
        "the kernel wrote into slot 0"
    );
    let second = vm.call("fill", &[f32s(&[0.0; 8], &[8])]).unwrap();
    assert_eq!(
        RECORDED.load(Ordering::SeqCst),
        base + 128,
        "the same slot on the next call"
    );
    assert_eq!(vm.arena("fill").unwrap().base_ptr() as usize, base);
    assert_eq!(
        values_of(&first),
        vec![4.0; 4],
        "results are copied out of the arena"
    );
    assert_eq!(values_of(&second), vec![8.0; 8]);
    assert_eq!(
        first.as_tensor().unwrap().storage_kind(),
        StorageKind::Owned
    );
}

#[test]
fn intermediates_in_arena_slots_chain_between_kernels() {
    let mut vm = vm(program());
    let first = vm
        .call(
            "add3",
            &[f32s(&[1.0, 2.0], &[2]), f32s(&[10.0, 10.0], &[2])],
        )
        .unwrap();
    let second = vm
        .call("add3", &[f32s(&[0.0; 3], &[3]), f32s(&[1.0; 3], &[3])])
        .unwrap();
    assert_eq!(values_of(&first), vec![21.0, 22.0]);
    assert_eq!(values_of(&second), vec![2.0; 3]);
}

#[test]
fn kv_cache_builtins_run_inside_functions() {
    let mut vm = vm(program());
    let cache = vm.call("create_kv_cache", &[]).unwrap();
    let kv = |n: i64, base: f32| {
        let values: Vec<f32> = (0..n * 8).map(|i| base + i as f32).collect();
        f32s(&values, &[n, 2, 4])
    };
    let out = vm
        .call("step", &[cache.clone(), kv(3, 0.0), kv(3, 100.0)])
        .unwrap();
    let fields = out.as_tuple().unwrap();
    assert_eq!(fields[1].as_int(), Some(3));
    assert_eq!(fields[0].as_tensor().unwrap().shape(), &[3, 2, 4]);
    let out = vm
        .call("step", &[cache.clone(), kv(2, 50.0), kv(2, 150.0)])
        .unwrap();
    let fields = out.as_tuple().unwrap();
    assert_eq!(fields[1].as_int(), Some(5));
    let keys = values_of(&fields[0]);
    assert_eq!(
        (keys[0], keys[23], keys[24], keys[39]),
        (0.0, 23.0, 50.0, 65.0)
    );
    let err = vm
        .call("step", &[cache.clone(), kv(4, 0.0), kv(4, 0.0)])
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "function `step`: `kv_cache.append` failed: KV cache overflow in layer 0: \
         capacity is 8 positions, appending would need 9"
    );
    let len = Registry::with_builtins()
        .call("kv_cache.len", &[cache])
        .unwrap();
    assert_eq!(len.as_int(), Some(5), "a failed step appends nothing");
}

#[test]
fn profiles_time_each_kernel_per_function_when_switched_on() {
    let mut vm = vm(program());
    let args = [f32s(&[1.0; 4], &[4]), f32s(&[2.0; 4], &[4])];
    vm.call("add", &args).unwrap();
    assert_eq!(vm.profile("add").unwrap(), vec![], "off by default");
    vm.set_profiling(true);
    for _ in 0..3 {
        vm.call("add", &args).unwrap();
        vm.call("add3", &args).unwrap();
    }
    let add = vm.profile("add").unwrap();
    assert_eq!(
        (add.len(), add[0].kernel.as_str(), add[0].calls),
        (1, "add", 3)
    );
    assert_eq!(vm.profile("add3").unwrap()[0].calls, 6);
    assert!(vm.profile("nope").is_none());
    vm.set_profiling(false);
    vm.call("add", &args).unwrap();
    assert_eq!(vm.profile("add").unwrap()[0].calls, 3);
    vm.reset_profile();
    assert!(vm.profile("add3").unwrap().is_empty());
}

#[test]
fn the_vm_can_move_between_threads() {
    fn assert_send<T: Send>() {}
    assert_send::<VirtualMachine>();
    let mut vm = vm(program());
    let out = std::thread::spawn(move || vm.call("add", &[f32s(&[1.0], &[1]), f32s(&[2.0], &[1])]))
        .join()
        .unwrap()
        .unwrap();
    assert_eq!(values_of(&out), vec![3.0]);
}

#[test]
fn registers_are_dropped_right_after_their_last_use() {
    let add3 = super::programs::add3_function();
    let drops: Vec<Vec<Reg>> = crate::vm::machine::last_uses(&add3.instrs)
        .into_iter()
        .map(|mut regs| {
            regs.sort_unstable();
            regs
        })
        .collect();
    // a (%0) after the first add, b (%1) and the first sum (%2) after the second; the
    // returned %3 is never dropped.
    let want: [&[Reg]; 7] = [&[], &[], &[], &[0], &[], &[1, 2], &[3]];
    assert_eq!(drops, want.map(<[Reg]>::to_vec));
}

#[test]
fn owned_arguments_are_released_right_after_their_last_use() {
    struct Owner(Vec<f32>);
    let owner = Arc::new(Owner(vec![1.0, 2.0, 3.0]));
    let erased: Arc<dyn std::any::Any + Send + Sync> = owner.clone();
    // SAFETY: the 12 bytes of `owner.0` live as long as `erased` and are never written.
    let a = unsafe {
        Tensor::from_borrowed(owner.0.as_ptr().cast(), 12, erased, crate::DType::F32, &[3])
    }
    .unwrap();
    // `f(a, b)`: `c = a + b`, then a builtin that records how many handles to `a`'s memory
    // are left while the call still runs; returns `c`.
    let instrs = vec![
        super::programs::match_f32(0, vec![DimPattern::Bind(0)]),
        super::programs::match_f32(1, vec![DimPattern::Check(dim(0))]),
        super::programs::alloc(2, Placement::Fresh, vec![dim(0)]),
        Instr::CallKernel {
            kernel: super::programs::ADD,
            args: vec![0, 1, 2],
            dims: vec![dim(0)],
        },
        Instr::CallBuiltin {
            name: "test.handles".into(),
            args: vec![],
            dst: None,
        },
        Instr::Ret { reg: 2 },
    ];
    let f = function(&["a", "b"], &[("n", Some(16))], 3, instrs, &[]);
    let mut exec = super::programs::add_only();
    exec.functions = std::collections::BTreeMap::from([("f".to_string(), f)]);
    let seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (watched, record) = (Arc::downgrade(&owner), seen.clone());
    let mut registry = Registry::new();
    registry
        .register("test.handles", &[], move |_| {
            record.store(watched.strong_count(), Ordering::SeqCst);
            Ok(Value::Int(0))
        })
        .unwrap();
    let mut vm = VirtualMachine::new(exec, Arc::new(library()), &registry).unwrap();
    let out = vm
        .call_owned("f", vec![a.into(), f32s(&[1.0; 3], &[3])])
        .unwrap();
    assert_eq!(values_of(&out), vec![2.0, 3.0, 4.0]);
    assert_eq!(
        seen.load(Ordering::SeqCst),
        1,
        "the VM still held the argument after its last use"
    );
}
