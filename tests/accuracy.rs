//! The accuracy harness: `oxrelax perplexity` against llama.cpp's `llama-perplexity` on
//! the same fixture model and text (tiny-llama, shakespeare-eval.txt, ctx 256: llama.cpp
//! reports 45.7532), its errors, and `oxrelax compare`'s logit drift of a scheme against
//! q0f32.

use oxrelax_runtime::engine::negative_log_likelihood;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// llama.cpp's f32 perplexity of tiny-llama on shakespeare-eval.txt at ctx 256
/// (`../shared/tools/peer-llamacpp perplexity ... f32 ... 256`).
const LLAMA_CPP_PPL: f64 = 45.7532;

fn shared(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared")
        .join(path)
}

fn oxrelax(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_oxrelax"))
        .args(args)
        .output()
        .expect("the oxrelax binary runs")
}

fn perplexity(text: &Path, ctx: &str) -> Output {
    perplexity_with(text, ctx, "q0f32")
}

fn perplexity_with(text: &Path, ctx: &str, quant: &str) -> Output {
    let model = shared("fixtures/models/tiny-llama");
    let (model, text) = (model.to_str().unwrap(), text.to_str().unwrap());
    oxrelax(&[
        "perplexity",
        model,
        "--text",
        text,
        "--ctx",
        ctx,
        "--quant",
        quant,
        "--max-context",
        "512",
        "--json",
    ])
}

/// The JSON object on the last line of `out`'s stdout.
fn last_json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap()).unwrap()
}

#[test]
fn tiny_llama_perplexity_matches_llama_cpp() {
    let out = perplexity(&shared("fixtures/text/shakespeare-eval.txt"), "256");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let ppl = line["ppl"].as_f64().unwrap();
    assert!(
        (ppl - LLAMA_CPP_PPL).abs() <= 1e-3 * LLAMA_CPP_PPL,
        "{ppl} vs llama.cpp {LLAMA_CPP_PPL}"
    );
    // 178 chunks of 256 tokens, 127 scored in each.
    assert_eq!(
        (line["chunks"].as_u64(), line["tokens"].as_u64()),
        (Some(178), Some(178 * 127))
    );
    assert_eq!(line["quant"], "q0f32");
    assert!((line["nll"].as_f64().unwrap().exp() - ppl).abs() < 1e-9 * ppl);
}

#[test]
fn a_text_shorter_than_two_chunks_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("short.txt");
    std::fs::write(&text, "To be, or not to be").unwrap();
    let out = perplexity(&text, "256");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("at least 2 chunks") && stderr.contains("256"),
        "{stderr}"
    );
    let missing = perplexity(&dir.path().join("absent.txt"), "256");
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(
        !missing.status.success() && stderr.contains("absent.txt"),
        "{stderr}"
    );
}

#[test]
fn negative_log_likelihood_is_minus_log_softmax() {
    let logits = [2.0f32, -1.0, 0.5, 3.0];
    let total: f64 = logits.iter().map(|&l| f64::from(l).exp()).sum();
    for (id, &l) in logits.iter().enumerate() {
        let want = -(f64::from(l).exp() / total).ln();
        let got = negative_log_likelihood(&logits, id as u32);
        assert!((got - want).abs() < 1e-12, "{id}: {got} vs {want}");
    }
    // Large logits do not overflow (the maximum is subtracted first).
    let large = [1000.0f32, 999.0];
    assert!((negative_log_likelihood(&large, 0) - (1.0 + (-1.0f64).exp()).ln()).abs() < 1e-9);
    assert!(negative_log_likelihood(&logits, 9).is_infinite());
}

#[test]
fn f16_storage_drifts_little_in_perplexity_and_logits() {
    let text = shared("fixtures/text/shakespeare-eval.txt");
    let f32_ppl = last_json(&perplexity(&text, "256"))["ppl"]
        .as_f64()
        .unwrap();
    let f16 = last_json(&perplexity_with(&text, "256", "q0f16"));
    assert_eq!(f16["quant"], "q0f16");
    let drift = (f16["ppl"].as_f64().unwrap() - f32_ppl).abs() / f32_ppl;
    assert!(drift < 1e-3, "q0f16 perplexity drift {drift}");

    let model = shared("fixtures/models/tiny-llama");
    let compare = |quant: &str| {
        last_json(&oxrelax(&[
            "compare",
            model.to_str().unwrap(),
            "--prompt",
            "ROMEO:",
            "--max-new-tokens",
            "16",
            "--quant",
            quant,
            "--max-context",
            "256",
            "--json",
        ]))
    };
    let same = compare("q0f32");
    assert_eq!(
        (
            same["max_abs_diff"].as_f64(),
            same["top1_agreement"].as_f64()
        ),
        (Some(0.0), Some(1.0))
    );
    // A row per prompt position, then one per generated token fed back (all but the last).
    assert_eq!(same["rows"].as_u64(), Some(3 + 15));
    let f16 = compare("q0f16");
    let diff = f16["max_abs_diff"].as_f64().unwrap();
    assert!(diff > 0.0 && diff < 0.05, "q0f16 max |diff| {diff}");
    assert!(f16["top1_agreement"].as_f64().unwrap() >= 0.9, "{f16}");
}

/// The perplexity drift bound per quantized scheme (llama.cpp on this model and
/// text: q8_0 +0.02%, q4_0 +0.68%).
const DRIFT_BOUNDS: [(&str, f64); 7] = [
    ("q8f32", 1e-3),
    ("q4f32_1", 1e-2),
    ("q4f16_1", 1e-2),
    ("w8a8", 2e-3),
    ("w4a8", 1.2e-2),
    ("q4f16_asym", 1e-2),
    ("w4a8_asym", 1.2e-2),
];

#[test]
fn quantized_weights_drift_within_their_bounds() {
    let text = shared("fixtures/text/shakespeare-eval.txt");
    let f32_ppl = last_json(&perplexity(&text, "256"))["ppl"]
        .as_f64()
        .unwrap();
    for (scheme, bound) in DRIFT_BOUNDS {
        let run = last_json(&perplexity_with(&text, "256", scheme));
        assert_eq!(run["quant"], scheme);
        let drift = (run["ppl"].as_f64().unwrap() - f32_ppl) / f32_ppl;
        assert!(drift.abs() <= bound, "{scheme} perplexity drift {drift}");
    }
}
