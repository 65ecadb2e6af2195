use super::*;
use crate::quantization::Quantization;
use oxrelax_runtime::microkernel::U4Pair;
use std::time::Duration;

/// A naive `[m, k] x [k, n]` matmul in f64, the weight read from its packed panels
/// `[ceil(n / hp), k, hp]`.
fn naive_matmul(x: &[f32], w: &[f32], shape: MatmulShape) -> Vec<f64> {
    let MatmulShape { m, n, k } = shape;
    let hp = MatmulShape::panel_width();
    let weight = |p: usize, j: usize| f64::from(w[(j / hp) * k * hp + p * hp + j % hp]);
    let mut out = vec![0.0f64; m * n];
    for i in 0..m {
        for j in 0..n {
            out[i * n + j] = (0..k).map(|p| f64::from(x[i * k + p]) * weight(p, j)).sum();
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
    let panels = 37usize.div_ceil(MatmulShape::panel_width()) * MatmulShape::panel_width();
    assert_eq!((x.len(), w.len()), (7 * 19, 19 * panels));
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
    assert_eq!(kernel.bytes(), 4 * (7 * 19 + 19 * panels + 7 * 37));
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
        cold_gemv: DEFAULT_COLD_GEMV.to_string(),
        cold_mib: DEFAULT_COLD_MIB,
        cold_quant: vec![Quantization::Q0f32],
        json: false,
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
            "matmul 2048x2048x2048",
            "gemv_cold 1x5632x2048",
            "softmax 1x4096",
            "softmax 128x4096",
            "rms_norm 1x4096",
            "rms_norm 128x4096",
        ]
    );
    assert_eq!(plan.probe_bytes, 1 << 20);
    // The ring: 6 matrices of 2048 x 5632 f32 (44 MiB each), 264 MiB >= 256 MiB.
    let cold = plan.kernels.iter().find_map(|k| match k {
        KernelSpec::GemvCold(cold) => Some(*cold),
        _ => None,
    });
    let cold = cold.expect("a cold GEMV");
    assert_eq!(cold.ring, 6);
    assert_eq!(cold.ring_bytes(), 6 * 2048 * 5632 * 4);
    assert!(cold.ring_bytes() >= 256 << 20);
}

#[test]
fn the_cold_gemv_ring_is_sized_by_flag_and_can_be_skipped() {
    let mut small = args(&["3x17x5"]);
    small.cold_gemv = "1x64x32".into();
    small.cold_mib = 1;
    let plan = small.plan().unwrap();
    // 1 MiB over 8 KiB matrices.
    let shape = MatmulShape { m: 1, n: 64, k: 32 };
    assert_eq!(
        plan.kernels[1],
        KernelSpec::GemvCold(ColdGemv {
            shape,
            quant: Quantization::Q0f32,
            ring: 128
        })
    );
    // Never fewer than 2 matrices.
    let smallest = ColdGemv::with_ring_bytes(shape, Quantization::Q0f32, 1).unwrap();
    assert_eq!(smallest.ring, 2);
    // One cold GEMV per scheme, its ring sized by the bytes as stored: 4-bit panels
    // (32 * 64 / 2 bytes) and one f16 scale per group and column (64 * 2 bytes).
    small.cold_quant = vec![Quantization::Q0f32, Quantization::Q4f16_1];
    let plan = small.plan().unwrap();
    let quantized = ColdGemv {
        shape,
        quant: Quantization::Q4f16_1,
        ring: (1usize << 20).div_ceil(32 * 64 / 2 + 64 * 2),
    };
    assert_eq!(plan.kernels[2], KernelSpec::GemvCold(quantized));
    assert_eq!(plan.kernels[2].shape(), "1x64x32/q4f16_1");
    for scheme in [Quantization::W4a8, Quantization::Q0f16] {
        small.cold_quant = vec![scheme];
        let err = small.plan().unwrap_err().to_string();
        assert!(
            err.contains(&format!("bad --cold-quant {}", scheme.name())),
            "{err}"
        );
    }
    small.cold_quant = vec![Quantization::Q0f32];
    small.cold_mib = 0;
    let plan = small.plan().unwrap();
    assert!(plan.kernels.iter().all(|k| k.name() != "gemv_cold"));
    small.cold_mib = 1;
    small.cold_gemv = "1x64".into();
    let err = small.plan().unwrap_err().to_string();
    assert!(err.contains("bad --cold-gemv shape `1x64`"), "{err}");
}

#[test]
fn a_cold_gemv_reads_the_next_weight_of_its_ring_each_run() {
    let shape = MatmulShape { m: 1, n: 9, k: 5 };
    let spec = KernelSpec::GemvCold(ColdGemv {
        shape,
        quant: Quantization::Q0f32,
        ring: 3,
    });
    let mut kernel = BenchKernel::build(spec).unwrap();
    assert_eq!(kernel.ring_len(), 3);
    let panel = MatmulShape::panel_width();
    assert_eq!(
        kernel.bytes(),
        4 * (5 + 5 * panel + 9),
        "one weight per run"
    );
    let weights: Vec<Vec<f32>> = (0..3).map(|i| kernel.ring_weights(i)[0].to_vec()).collect();
    assert!(weights[0] != weights[1] && weights[1] != weights[2]);
    let env = env(1);
    for call in 0..4 {
        kernel.run(&env).unwrap();
        let x = kernel.input(0).unwrap();
        let want = naive_matmul(x, &weights[call % 3], shape);
        for (&g, &w) in kernel.output().unwrap().iter().zip(&want) {
            assert!(
                (f64::from(g) - w).abs() <= 1e-5 * w.abs().max(1.0),
                "run {call}"
            );
        }
    }
}

/// The little-endian bytes of f32 slots.
fn slot_bytes(slots: &[f32]) -> Vec<u8> {
    slots.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// `x @ w^T` for a weight quantized into 4-bit panels `[P, ceil(K/2), HP, 2]` (nibble
/// `w + 8`, low first) with f16 scales `[P, ceil(K/32), HP]`, decoded from the bytes.
fn q4f16_matmul(x: &[f32], packed: &[u8], scales: &[u8], shape: MatmulShape) -> Vec<f64> {
    let hp = MatmulShape::panel_width();
    let (pairs, groups) = (shape.k.div_ceil(2), shape.k.div_ceil(32));
    (0..shape.n)
        .map(|h| {
            let (p, j) = (h / hp, h % hp);
            (0..shape.k)
                .map(|l| {
                    let pair = U4Pair(packed[(p * pairs + l / 2) * hp + j]);
                    let at = 2 * ((p * groups + l / 32) * hp + j);
                    let scale = half::f16::from_le_bytes([scales[at], scales[at + 1]]);
                    f64::from(x[l]) * f64::from(pair.weight(l)) * f64::from(scale.to_f32())
                })
                .sum()
        })
        .collect()
}

#[test]
fn a_cold_gemv_over_4_bit_weights_reads_each_copy_as_stored() {
    // Odd sizes: 3 panels (the last partial), a tail group and an odd depth.
    let shape = MatmulShape { m: 1, n: 40, k: 71 };
    let cold = ColdGemv {
        shape,
        quant: Quantization::Q4f16_1,
        ring: 3,
    };
    let mut kernel = BenchKernel::build(KernelSpec::GemvCold(cold)).unwrap();
    let panels = 40usize.div_ceil(MatmulShape::panel_width()) * MatmulShape::panel_width();
    let stored = panels * 36 + panels * 3 * 2;
    assert_eq!(cold.weight_bytes(), stored);
    assert_eq!(kernel.bytes(), 4 * 71 + stored + 4 * 40);
    let copies: Vec<[Vec<u8>; 2]> = (0..3)
        .map(|i| match kernel.ring_weights(i).as_slice() {
            [packed, scales] => [slot_bytes(packed), slot_bytes(scales)],
            other => panic!("{} weight inputs", other.len()),
        })
        .collect();
    assert!(copies[0] != copies[1] && copies[1] != copies[2]);
    let env = env(2);
    for call in 0..4 {
        kernel.run(&env).unwrap();
        let x = kernel.input(0).unwrap();
        let [packed, scales] = &copies[call % 3];
        let want = q4f16_matmul(x, packed, scales, shape);
        for (&g, &w) in kernel.output().unwrap().iter().zip(&want) {
            // The decode GEMV may round its activations to 16 bits.
            assert!(
                (f64::from(g) - w).abs() <= 1e-3 * w.abs().max(1.0),
                "run {call}: {g} vs {w}"
            );
        }
    }
}

fn result(spec: KernelSpec, median_ms: u64) -> KernelResult {
    let median = Duration::from_millis(median_ms);
    KernelResult {
        spec,
        bytes: 8_000_000,
        timing: Timing {
            runs: 3,
            cut_short: false,
            median,
            min: median / 2,
        },
    }
}

#[test]
fn json_rows_have_the_figures_and_numpy_where_it_ran() {
    let shape = MatmulShape {
        m: 10,
        n: 100,
        k: 1000,
    };
    let matmul = KernelSpec::Matmul(shape);
    let cold = KernelSpec::GemvCold(ColdGemv {
        shape,
        quant: Quantization::Q0f32,
        ring: 4,
    });
    let softmax = KernelSpec::Softmax(RowShape { rows: 2, cols: 8 });
    let results = [result(matmul, 2), result(cold, 4), result(softmax, 1)];
    let peer = Peer::Measured {
        numpy: "2.0".into(),
        timings: vec![(cold, result(cold, 2).timing)],
    };
    let line = json_line(&json_rows(&results, &peer, 2));
    assert!(!line.contains('\n'));
    let rows: serde_json::Value = serde_json::from_str(&line).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 3);
    for row in rows {
        let mut keys: Vec<&str> = row
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "gbs",
                "gflops",
                "kernel",
                "median_ms",
                "min_ms",
                "numpy_gflops",
                "numpy_median_ms",
                "ratio_vs_numpy",
                "ring",
                "runs",
                "shape",
                "threads"
            ]
        );
    }
    let by = |kernel: &str| rows.iter().find(|r| r["kernel"] == kernel).unwrap();
    let (m, c, s) = (by("matmul"), by("gemv_cold"), by("softmax"));
    assert_eq!(
        (
            m["shape"].as_str(),
            c["shape"].as_str(),
            s["shape"].as_str()
        ),
        (Some("10x100x1000"), Some("10x100x1000"), Some("2x8"))
    );
    // 2 MFLOP in 2 ms = 1 GFLOP/s; 8 MB in 2 ms = 4 GB/s.
    assert_eq!(
        (m["gflops"].as_f64(), m["gbs"].as_f64()),
        (Some(1.0), Some(4.0))
    );
    assert_eq!(
        (m["median_ms"].as_f64(), m["min_ms"].as_f64()),
        (Some(2.0), Some(1.0))
    );
    assert_eq!((m["ring"].as_u64(), c["ring"].as_u64()), (Some(1), Some(4)));
    assert!(m["numpy_gflops"].is_null() && m["ratio_vs_numpy"].is_null());
    assert_eq!(c["numpy_median_ms"].as_f64(), Some(2.0));
    assert_eq!(c["numpy_gflops"].as_f64(), Some(1.0));
    assert_eq!(c["ratio_vs_numpy"].as_f64(), Some(0.5));
    assert!(s["gflops"].is_null() && s["ring"].is_null() && s["ratio_vs_numpy"].is_null());
    assert_eq!(s["threads"], 2);
    // Without numpy every peer figure is null.
    let rows = json_rows(&results, &Peer::Unavailable, 2);
    assert!(rows
        .iter()
        .all(|r| r.numpy_gflops.is_none() && r.ratio_vs_numpy.is_none()));
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
    // Shorter than one 16-float step of every stream: the tail alone.
    assert_eq!(membw::sum(&data[..63]), data[..63].iter().sum::<f32>());
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

#[test]
fn cold_quant_accepts_only_the_schemes_the_cold_gemv_times() {
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: BenchArgs,
    }
    use clap::Parser;
    for scheme in args::COLD_QUANTS {
        let cli = Cli::try_parse_from(["bench-kernel", "--cold-quant", scheme.name()]).unwrap();
        assert_eq!(cli.args.cold_quant, vec![scheme]);
    }
    for refused in ["w8a8", "w4a8", "q0f16", "auto"] {
        let err = Cli::try_parse_from(["bench-kernel", "--cold-quant", refused])
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("q4f16_1"), "{err}");
    }
}
