use super::*;
use std::time::Duration;

/// A naive `[m, k] x [k, n]` matmul in f64.
fn naive_matmul(x: &[f32], w: &[f32], shape: MatmulShape) -> Vec<f64> {
    let MatmulShape { m, n, k } = shape;
    let mut out = vec![0.0f64; m * n];
    for i in 0..m {
        for j in 0..n {
            out[i * n + j] = (0..k)
                .map(|p| f64::from(x[i * k + p]) * f64::from(w[p * n + j]))
                .sum();
        }
    }
    out
}

fn env(threads: usize) -> RuntimeEnv {
    RuntimeEnv::new(Arc::new(ThreadPool::new(threads).unwrap()))
}

#[test]
fn timed_matmul_matches_a_naive_triple_loop() {
    let shape = MatmulShape { m: 7, n: 37, k: 19 };
    let mut kernel = BenchKernel::build(KernelSpec::Matmul(shape)).unwrap();
    kernel.run(&env(2)).unwrap();
    let (x, w) = (kernel.input(0).unwrap(), kernel.input(1).unwrap());
    assert_eq!((x.len(), w.len()), (7 * 19, 19 * 37));
    assert!(x.iter().chain(w).all(|v| (-1.0..1.0).contains(v)));
    let want = naive_matmul(x, w, shape);
    let got = kernel.output().unwrap();
    assert_eq!(got.len(), want.len());
    for (index, (&g, &w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (f64::from(g) - w).abs() <= 1e-5 * w.abs().max(1.0),
            "element {index}: got {g}, want {w}"
        );
    }
    assert!(want.iter().any(|&v| v.abs() > 0.1), "nontrivial inputs");
    assert_eq!(kernel.bytes(), 4 * (7 * 19 + 19 * 37 + 7 * 37));
}

#[test]
fn softmax_rows_sum_to_one() {
    let spec = KernelSpec::Softmax(RowShape { rows: 3, cols: 10 });
    let mut kernel = BenchKernel::build(spec).unwrap();
    kernel.run(&env(1)).unwrap();
    for row in kernel.output().unwrap().chunks(10) {
        let sum: f32 = row.iter().sum();
        assert!((sum - 1.0).abs() < 1e-5, "{row:?}");
    }
}

#[test]
fn matmul_shapes_parse_and_reject_malformed_values() {
    assert_eq!(
        "3x17x5".parse::<MatmulShape>().unwrap(),
        MatmulShape { m: 3, n: 17, k: 5 }
    );
    for (value, reason) in [
        ("3x17", "2 dims"),
        ("3x0x5", "N is 0"),
        ("3xax5", "N `a` is not a positive integer"),
        ("1x2x3x4", "4 dims"),
        ("3x17x4294967296", "K is larger than"),
    ] {
        let err = value.parse::<MatmulShape>().unwrap_err().to_string();
        assert!(
            err.contains(value) && err.contains(reason),
            "{value}: {err}"
        );
    }
}

fn args(matmul: &[&str]) -> BenchArgs {
    BenchArgs {
        matmul: matmul.iter().map(|s| s.to_string()).collect(),
        rows: Vec::new(),
        cols: DEFAULT_COLS,
        threads: Some(2),
        warmup: 1,
        runs: 3,
        budget_secs: 1.0,
        probe_mib: 1,
    }
}

#[test]
fn default_plan_runs_the_documented_shapes() {
    let plan = args(&[]).plan().unwrap();
    let shapes: Vec<String> = plan
        .kernels
        .iter()
        .map(|k| format!("{} {}", k.name(), k.shape()))
        .collect();
    assert_eq!(
        shapes,
        [
            "matmul 1x2048x2048",
            "matmul 1x5632x2048",
            "matmul 128x2048x2048",
            "matmul 512x5632x2048",
            "softmax 1x4096",
            "softmax 128x4096",
            "rms_norm 1x4096",
            "rms_norm 128x4096",
        ]
    );
    assert_eq!(plan.probe_bytes, 1 << 20);
}

#[test]
fn bad_options_are_typed_errors() {
    let mut bad = args(&[]);
    bad.threads = Some(0);
    assert!(matches!(
        bad.plan(),
        Err(BenchError::BadOption {
            flag: "--threads",
            ..
        })
    ));
    let mut bad = args(&[]);
    bad.budget_secs = -1.0;
    assert!(matches!(
        bad.plan(),
        Err(BenchError::BadOption {
            flag: "--budget-secs",
            ..
        })
    ));
    assert!(matches!(
        args(&["2x2"]).plan(),
        Err(BenchError::BadMatmulShape { .. })
    ));
}

#[test]
fn timing_takes_the_median_and_respects_the_budget() {
    let ms = Duration::from_millis;
    let timing = Timing::from_times(vec![ms(5), ms(1), ms(3), ms(9)], 4).unwrap();
    assert_eq!((timing.median, timing.min, timing.runs), (ms(4), ms(1), 4));
    assert!(!timing.cut_short);
    assert_eq!(Timing::from_times(Vec::new(), 1), None);

    let plan = RunPlan {
        warmup: 10,
        runs: 10,
        budget: ms(25),
    };
    // Runs of `each` ms: how many calls, and the timing.
    let run_at = |each: u64| {
        let mut calls = 0;
        let timing = measure_with(&plan, || -> Result<Duration, ()> {
            calls += 1;
            Ok(ms(each))
        })
        .unwrap()
        .unwrap();
        (calls, timing)
    };
    // Warmup: one run (a second would pass 12.5 ms); timed: two (a third would pass 25).
    let (calls, timing) = run_at(10);
    assert_eq!((calls, timing.runs, timing.median), (3, 2, ms(10)));
    assert!(timing.cut_short);
    // A warmup run longer than half the budget is taken as the only timed run.
    let (calls, timing) = run_at(20);
    assert_eq!((calls, timing.runs, timing.median), (1, 1, ms(20)));
    assert!(timing.cut_short);
    // Fast runs: all warmups and runs.
    let (calls, timing) = run_at(1);
    assert_eq!((calls, timing.runs), (20, 10));
    assert!(!timing.cut_short);
    // The real clock: a body that sleeps is timed at least as long.
    let timing = measure(&plan, || -> Result<(), ()> {
        std::thread::sleep(ms(2));
        Ok(())
    })
    .unwrap()
    .unwrap();
    assert!(timing.min >= ms(2));
}

#[test]
fn sums_agree_serial_and_parallel() {
    let data: Vec<f32> = (0..10_001).map(|i| (i % 7) as f32).collect();
    let want: f32 = data.iter().map(|&v| f64::from(v)).sum::<f64>() as f32;
    assert_eq!(membw::sum(&data), want);
    let pool = ThreadPool::new(2).unwrap();
    assert_eq!(membw::parallel_sum(&pool, &data).unwrap(), want);
}

#[test]
fn figures_print_with_three_significant_digits() {
    let cases = [
        (36282.883, "36283"),
        (113.0, "113"),
        (9.6, "9.60"),
        (0.33, "0.330"),
        (0.0038, "0.00380"),
        (0.0, "0"),
    ];
    for (value, want) in cases {
        assert_eq!(report::significant(value), want);
    }
}
