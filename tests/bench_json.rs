//! The machine-readable outputs (`--json`) of `bench`, `generate` and `bench-kernel`, run
//! as a user would on the embedded tiny model and tiny shapes. Only the shape and sanity
//! of the figures are checked: benchmarks are not tests.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tiny_llama() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models/assets/tiny-llama")
}

fn oxrelax(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_oxrelax"))
        .args(args)
        .output()
        .expect("the oxrelax binary runs")
}

/// The stdout of a successful run.
fn stdout_of(args: &[&str]) -> String {
    let out = oxrelax(args);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{args:?}\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The stdout of a successful `bench` of the tiny model: one measured run of `prompt`
/// tokens and `gen` generated in a window of `window` positions, then `extra` arguments.
fn bench_tiny(prompt: &str, gen: &str, window: &str, extra: &[&str]) -> String {
    let model = tiny_llama();
    let mut args = vec!["bench", model.to_str().unwrap(), "--prompt-len", prompt];
    args.extend(["--gen", gen, "--runs", "1", "--max-context", window]);
    args.extend(extra);
    stdout_of(&args)
}

/// The last line of `stdout`, parsed.
fn last_json(stdout: &str) -> Value {
    let last = stdout.lines().last().expect("some output");
    serde_json::from_str(last).unwrap_or_else(|e| panic!("last line is not JSON ({e}): {last}"))
}

fn number(json: &Value, key: &str) -> f64 {
    json[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number in {json}"))
}

#[test]
fn bench_json_reports_speed_and_memory_of_the_tiny_model() {
    let model = tiny_llama();
    let model = model.to_str().unwrap();
    let stdout = bench_tiny("4", "2", "64", &["--json"]);
    assert!(stdout.contains("prefill: "), "human report kept: {stdout}");
    let json = last_json(&stdout);
    assert_eq!(json["model"], model);
    assert_eq!(
        (
            json["prompt"].as_u64(),
            json["gen"].as_u64(),
            json["runs"].as_u64()
        ),
        (Some(4), Some(2), Some(1))
    );
    assert!(json["threads"].as_u64().unwrap() >= 1, "{json}");
    for key in [
        "prefill_tok_s",
        "decode_tok_s",
        "ttft_ms",
        "peak_rss_mib",
        "weights_bytes",
        "kv_cache_bytes",
        "arena_bytes",
    ] {
        let value = number(&json, key);
        assert!(value > 0.0 && value.is_finite(), "{key} = {value}");
    }
    // tiny-llama: vocab 1024, hidden 64, MLP 176, 2 layers of 4 heads (2 KV heads) of 16,
    // untied embeddings (the projections packed into 16-wide panels, no padding here);
    // the KV cache holds 64 positions.
    let attention = 2 * 64 * 64 + 2 * 64 * 32;
    let weights = 2 * 1024 * 64 + 64 + 2 * (2 * 64 + attention + 3 * 64 * 176);
    assert_eq!(json["weights_bytes"].as_u64(), Some(4 * weights as u64));
    assert_eq!(json["context_window"].as_u64(), Some(64));
    assert_eq!(
        json["kv_cache_bytes"].as_u64(),
        Some(2 * 2 * 64 * 2 * 16 * 4)
    );
}

#[test]
fn bench_json_kv_cache_bytes_halve_with_an_f16_kv_cache_and_quarter_with_q8() {
    let bench = |kv_dtype: &str| {
        let stdout = bench_tiny("4", "2", "64", &["--kv-dtype", kv_dtype, "--json"]);
        last_json(&stdout)["kv_cache_bytes"].as_u64()
    };
    // 2 layers x (K, V) x 64 positions x 2 KV heads x 16, of 4 bytes, of 2, and of 1
    // plus an f32 scale per layer, K or V, position and KV head.
    let elements = 2 * 2 * 64 * 2 * 16;
    assert_eq!(bench("f32"), Some(elements * 4));
    assert_eq!(bench("f16"), Some(elements * 2));
    assert_eq!(bench("q8"), Some(elements + 2 * 2 * 64 * 2 * 4));
}

#[test]
fn bench_threads_sets_the_pool_size() {
    let stdout = bench_tiny("2", "1", "16", &["--threads", "3", "--json"]);
    assert_eq!(last_json(&stdout)["threads"], 3);
}

#[test]
fn bench_rejects_an_absurd_prompt_length_with_a_clear_error() {
    let model = tiny_llama();
    for (prompt, says) in [
        (
            "1000000000000",
            "do not fit in the context window of 64 positions",
        ),
        ("18446744073709551615", "too large"),
    ] {
        let out = oxrelax(&[
            "bench",
            model.to_str().unwrap(),
            "--prompt-len",
            prompt,
            "--max-context",
            "64",
            "--json",
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn generate_json_is_the_only_line_of_stdout() {
    let model = tiny_llama();
    let stdout = stdout_of(&[
        "generate",
        "--model",
        model.to_str().unwrap(),
        "--prompt",
        "Once upon a time",
        "--max-new-tokens",
        "3",
        "--ignore-eos",
        "--max-context",
        "64",
        "--json",
    ]);
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    let json = last_json(&stdout);
    assert!(json["text"].is_string(), "{json}");
    let ids = json["ids"].as_array().expect("ids");
    assert_eq!(ids.len(), 3);
    assert!(ids.iter().all(|id| id.as_u64().is_some_and(|id| id < 1024)));
    assert_eq!(json["stop_reason"], "length");
    let stats = &json["stats"];
    assert!(number(stats, "prefill_tokens") >= 1.0, "{stats}");
    assert_eq!(stats["decode_tokens"], 2);
    for key in ["prefill_tok_s", "decode_tok_s", "ttft_ms"] {
        assert!(number(stats, key) > 0.0, "{key}: {stats}");
    }
}

#[test]
fn bench_kernel_json_has_a_row_per_kernel_on_tiny_shapes() {
    let stdout = stdout_of(&[
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
        "1",
        "--cold-gemv",
        "1x64x32",
        "--cold-mib",
        "1",
        "--json",
    ]);
    assert!(stdout.contains("best: "), "human table kept: {stdout}");
    let rows = last_json(&stdout);
    let rows = rows.as_array().expect("a JSON array");
    let found: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r["kernel"].as_str().unwrap(), r["shape"].as_str().unwrap()))
        .collect();
    assert_eq!(
        found,
        [
            ("matmul", "3x17x5"),
            ("gemv_cold", "1x64x32"),
            ("softmax", "2x8"),
            ("rms_norm", "2x8")
        ]
    );
    // numpy (python3 in PATH) may or may not be there: its figures are numbers or nulls,
    // and the same for every kernel it has a peer for.
    let has_numpy = rows[0]["numpy_gflops"].is_number();
    for row in rows {
        let kernel = row["kernel"].as_str().unwrap();
        assert!(number(row, "median_ms") > 0.0, "{row}");
        assert!(number(row, "gbs") > 0.0, "{row}");
        assert_eq!(row["threads"], 2, "{row}");
        let peer = kernel == "matmul" || kernel == "gemv_cold";
        assert_eq!(row["gflops"].is_number(), peer, "{row}");
        assert_eq!(row["ring"].is_number(), peer, "{row}");
        for key in ["numpy_gflops", "ratio_vs_numpy"] {
            assert!(row.get(key).is_some(), "{key} missing: {row}");
            assert_eq!(row[key].is_number(), peer && has_numpy, "{key}: {row}");
        }
    }
    // 1 MiB over 8 KiB weights.
    assert_eq!(rows[1]["ring"], 128);
}

/// `bench --profile` puts each function's time in kernels against the profiled run's wall
/// time in it: both positive, the kernels' the smaller, the percentage their ratio.
#[test]
fn bench_profile_reports_kernel_time_against_wall_time() {
    let stdout = bench_tiny("4", "3", "16", &["--profile"]);
    for function in ["prefill", "decode"] {
        let prefix = format!("profile of {function}: ");
        let line = stdout
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .unwrap_or_else(|| panic!("no profile of {function}: {stdout}"));
        let figures: Vec<f64> = line
            .split(|c: char| !(c.is_ascii_digit() || c == '.'))
            .filter_map(|word| word.parse().ok())
            .collect();
        let [kernels, wall, percent] = figures[..] else {
            panic!("expected `X ms in kernels of Y ms (Z%)`: {line}");
        };
        assert!(0.0 < kernels && kernels <= wall, "{line}");
        // The times are printed to 0.005 ms, the percentage to 0.05.
        let rounding = 100.0 * 0.005 * (1.0 / wall + kernels / (wall * wall)) + 0.05;
        assert!(
            (percent - 100.0 * kernels / wall).abs() <= rounding,
            "{line}"
        );
    }
}

#[test]
fn bench_batch_json_reports_aggregate_decode_speed_per_batch_size() {
    // 20 is above the model's batch bound (16): several calls a step, 20 caches' pages.
    let stdout = bench_tiny("4", "3", "64", &["--batch", "1,3,20", "--json"]);
    assert!(
        stdout.contains("batch  prefill tok/s"),
        "table kept: {stdout}"
    );
    let json = last_json(&stdout);
    assert_eq!(
        (json["prompt"].as_u64(), json["gen"].as_u64()),
        (Some(4), Some(3))
    );
    let batches = json["batches"].as_array().expect("batches");
    let sizes: Vec<u64> = batches
        .iter()
        .map(|b| b["batch"].as_u64().unwrap())
        .collect();
    assert_eq!(sizes, [1, 3, 20]);
    for line in batches {
        for key in ["prefill_tok_s", "decode_tok_s", "step_ms"] {
            assert!(number(line, key) > 0.0, "{key} in {line}");
        }
    }
    let out = oxrelax(&["bench", tiny_llama().to_str().unwrap(), "--batch", "2,0"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("--batch takes positive sizes"),
        "{stderr}"
    );
}

/// `bench --batch`'s page pool counts against `--max-memory`: a limit leaving too few
/// pages besides the model for the run's sequences is a typed error naming both, and a
/// limit leaving enough runs (the pool is what the run fills, not full contexts).
#[test]
fn bench_batch_pages_fit_in_max_memory_with_the_model() {
    let model = tiny_llama();
    let bench = |limit: &str| {
        let mut args = vec!["bench", model.to_str().unwrap(), "--prompt-len", "60"];
        args.extend(["--gen", "4", "--runs", "1", "--batch", "1,8", "--json"]);
        args.extend(["--max-memory", limit]);
        oxrelax(&args)
    };
    // The model's own estimate, from a refusal: "... = X MiB (N bytes) exceeds". A folder's
    // first estimate, before compiling, counts no arenas, so its refusal comes first.
    let estimate = |limit: u64| {
        let out = bench(&limit.to_string());
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        let bytes = stderr
            .split(" bytes) exceeds")
            .next()
            .and_then(|head| head.rsplit('(').next())
            .and_then(|n| n.parse::<u64>().ok());
        (bytes, out)
    };
    let before_compiling = estimate(1024).0.expect("a refusal in bytes");
    let (model_bytes, _) = estimate(before_compiling);
    let model_bytes = model_bytes.expect("the compiled model's estimate");
    let (none, tight) = estimate(model_bytes + 4096);
    assert_eq!(none, None, "the model fits beside 4 KiB");
    let stderr = String::from_utf8_lossy(&tight.stderr);
    assert!(!tight.status.success(), "{stderr}");
    for part in [
        "--batch 8",
        "KV pages",
        "besides the model",
        "room for 0 pages",
    ] {
        assert!(stderr.contains(part), "`{part}` missing: {stderr}");
    }
    // Eight sequences of 64 positions: far below eight full contexts of 2048.
    let roomy = bench(&(model_bytes + (1 << 20)).to_string());
    let stdout = String::from_utf8_lossy(&roomy.stdout);
    assert!(
        roomy.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&roomy.stderr)
    );
    let sizes = last_json(&stdout)["batches"].as_array().map(Vec::len);
    assert_eq!(sizes, Some(2));
}

/// `bench --batch --shared-prompt`: the sequences after the first take the prompt's KV
/// pages (shared pages reported, none without the flag), and the flag needs --batch.
#[test]
fn bench_batch_shared_prompt_shares_the_prompts_pages() {
    let shared_pages = |extra: &[&str]| {
        let mut args = vec!["--batch", "1,3", "--json"];
        args.extend(extra);
        let json = last_json(&bench_tiny("40", "2", "64", &args));
        let shared = json["shared_prompt"].as_bool();
        let pages = json["batches"].as_array().expect("batches").iter();
        let pages: Vec<u64> = pages.map(|b| b["shared_pages"].as_u64().unwrap()).collect();
        (shared, pages)
    };
    let (shared, pages) = shared_pages(&["--shared-prompt"]);
    assert_eq!(shared, Some(true));
    assert!(pages[0] == 0 && pages[1] >= 1, "{pages:?}");
    assert_eq!(shared_pages(&[]), (Some(false), vec![0, 0]));
    let alone = oxrelax(&["bench", tiny_llama().to_str().unwrap(), "--shared-prompt"]);
    let stderr = String::from_utf8_lossy(&alone.stderr);
    assert!(
        !alone.status.success() && stderr.contains("--batch"),
        "{stderr}"
    );
}
