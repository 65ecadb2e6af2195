//! `oxrelax bench-kernel` run as a user would, on tiny shapes.

use std::process::Command;

fn oxrelax(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_oxrelax"))
        .args(args)
        .output()
        .expect("the oxrelax binary runs")
}

/// The numbers of the line starting with `kernel shape`: threads, runs, median ms, min
/// ms, GFLOP/s (`None` for `-`), GB/s.
fn kernel_line(stdout: &str, kernel: &str, shape: &str) -> (u32, u32, f64, f64, Option<f64>, f64) {
    let line = stdout
        .lines()
        .find(|l| l.split_whitespace().take(2).eq([kernel, shape]))
        .unwrap_or_else(|| panic!("no line for {kernel} {shape} in\n{stdout}"));
    let cells: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(cells.len(), 8, "{line}");
    let number = |i: usize| cells[i].parse::<f64>().unwrap_or_else(|_| panic!("{line}"));
    (
        cells[2].parse().unwrap(),
        cells[3].parse().unwrap(),
        number(4),
        number(5),
        (cells[6] != "-").then(|| number(6)),
        number(7),
    )
}

#[test]
fn bench_kernel_prints_a_line_per_kernel_with_positive_figures() {
    let out = oxrelax(&[
        "bench-kernel",
        "--matmul",
        "3x17x5",
        "--rows",
        "2",
        "--cols",
        "8",
        "--runs",
        "2",
        "--warmup",
        "1",
        "--threads",
        "2",
        "--probe-mib",
        "4",
        "--cold-gemv",
        "1x16x8",
        "--cold-mib",
        "1",
    ]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (kernel, shape, has_flops) in [
        ("matmul", "3x17x5", true),
        ("softmax", "2x8", false),
        ("rms_norm", "2x8", false),
    ] {
        let (threads, runs, median, min, gflops, gbs) = kernel_line(&stdout, kernel, shape);
        assert_eq!((threads, runs), (2, 2), "{kernel}");
        assert!(
            median > 0.0 && min > 0.0 && min <= median,
            "{kernel}: {median} {min}"
        );
        assert!(gbs > 0.0, "{kernel}");
        assert_eq!(gflops.is_some(), has_flops, "{kernel}");
        assert!(gflops.unwrap_or(1.0) > 0.0, "{kernel}");
    }
    let peak = stdout
        .lines()
        .find(|l| l.contains("FMA peak"))
        .unwrap_or_default();
    assert!(
        peak.contains("GFLOP/s") || peak.contains("no vector FMA"),
        "{stdout}"
    );
    // Which kernel is fastest depends on timing; the line names one with flops.
    let best = stdout
        .lines()
        .find(|l| l.starts_with("best: "))
        .unwrap_or_default();
    assert!(
        best.starts_with("best: matmul 3x17x5 at ")
            || best.starts_with("best: gemv_cold 1x16x8 at "),
        "{stdout}"
    );
    let bandwidth = stdout
        .lines()
        .find(|l| l.contains("memory read bandwidth"))
        .expect("a bandwidth line");
    assert!(bandwidth.contains("sum of 4 MiB"), "{bandwidth}");
    let rates: Vec<f64> = bandwidth
        .split_whitespace()
        .zip(bandwidth.split_whitespace().skip(1))
        .filter(|(_, unit)| unit.trim_end_matches(',') == "GB/s")
        .map(|(value, _)| value.parse().unwrap())
        .collect();
    assert_eq!(rates.len(), 2, "{bandwidth}");
    assert!(rates.iter().all(|&r| r > 0.0), "{bandwidth}");
    let peer = stdout
        .lines()
        .find(|l| l.starts_with("peer"))
        .expect("a peer line");
    assert!(
        peer == "peer: numpy not available (pip install numpy)"
            || peer.starts_with("peer: numpy ") && stdout.contains("ours/peer"),
        "{peer}"
    );
}

#[test]
fn bench_kernel_rejects_a_malformed_shape_without_a_panic() {
    let out = oxrelax(&["bench-kernel", "--matmul", "3x17"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("bad --matmul shape `3x17`"), "{stderr}");
    assert!(stderr.contains("expected MxNxK"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
