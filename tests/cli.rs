//! The `oxrelax` command line, run as a user would.

mod common;

use std::process::Command;

fn oxrelax(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_oxrelax"))
        .args(args)
        .output()
        .expect("the oxrelax binary runs")
}

fn temp_file(name: &str, contents: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("oxrelax-cli-{}-{name}", std::process::id()));
    std::fs::write(&path, contents).expect("temp dir is writable");
    path
}

#[test]
fn opt_legalizes_a_module_in_text_form() {
    let input = temp_file(
        "mlp.txt",
        &oxrelax_dsl::text::print_module(&common::mlp_module()),
    );
    let dumps = std::env::temp_dir().join(format!("oxrelax-cli-{}-dumps", std::process::id()));
    let out = oxrelax(&[
        "opt",
        input.to_str().unwrap(),
        "--time",
        "--verify",
        "--dump-dir",
        dumps.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let module = oxrelax_dsl::text::parse_module(&stdout).unwrap();
    // pack_weight twice, then the two linear layers with their epilogues fused (SiLU; the
    // bias add).
    assert_eq!(module.prim_funcs.len(), 4, "{stdout}");
    assert!(
        stdout.contains("call_tir(@fused_packed_matmul_silu"),
        "{stdout}"
    );
    assert!(
        stdout.contains("call_tir(@fused_packed_matmul_add"),
        "{stdout}"
    );
    let stderr = String::from_utf8(out.stderr).unwrap();
    for pass in [
        "normalize",
        "rewrite-split",
        "quantize-weights",
        "rewrite-transpose",
        "rewrite-dequantize",
        "rewrite-layout",
        "fired: transpose-matmul x2",
        "rewrite-norm",
        "lift-transform-params",
        "legalize-ops",
        "fuse-ops",
        "dead-code-elimination",
    ] {
        assert!(stderr.contains(pass), "{stderr}");
    }
    assert_eq!(std::fs::read_dir(&dumps).unwrap().count(), 12);
    std::fs::remove_dir_all(dumps).unwrap();
    std::fs::remove_file(input).unwrap();
}

#[test]
fn opt_reports_bad_input_without_a_panic() {
    let input = temp_file(
        "bad.txt",
        "export graph @f(x: Tensor((n,), f32)) -> Tensor((n,), f32)\n{\n  return y\n}\n",
    );
    let out = oxrelax(&["opt", input.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(
        stderr.contains("line 1") || stderr.contains("line 3"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    std::fs::remove_file(input).unwrap();

    let out = oxrelax(&["opt", "/nonexistent/module.txt"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8(out.stderr)
        .unwrap()
        .contains("cannot read /nonexistent/module.txt"));
}

/// Out-of-range sampling options, an unknown function for `dump-ir` and `--npu sim` on a
/// model folder are errors naming the value, not silently accepted.
#[test]
fn invalid_options_are_errors_naming_them() {
    let model = concat!(env!("CARGO_MANIFEST_DIR"), "/models/assets/tiny-llama");
    let cases: [(&[&str], &str); 6] = [
        (&["--temperature", "nan"], "temperature = NaN"),
        (&["--temperature", "-1"], "temperature = -1"),
        (&["--top-p", "2"], "top_p = 2"),
        (&["--top-p", "0"], "top_p = 0"),
        (&["--repetition-penalty", "-2"], "repetition_penalty = -2"),
        (&["--npu", "sim"], "--npu runs an artifact's NPU graphs"),
    ];
    for (extra, expected) in cases {
        let mut args = vec![
            "generate",
            "--model",
            model,
            "--prompt",
            "hi",
            "--max-new-tokens",
            "1",
        ];
        args.extend_from_slice(extra);
        let out = oxrelax(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(expected),
            "{extra:?}: {stderr}"
        );
    }
    let out = oxrelax(&["dump-ir", model, "--function", "nosuch"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("no function nosuch"),
        "{stderr}"
    );
}

/// The `generate --json` line of `args` (on the shipped tiny Llama, positionally).
fn generate_json(args: &[&str]) -> serde_json::Value {
    let model = concat!(env!("CARGO_MANIFEST_DIR"), "/models/assets/tiny-llama");
    let mut all = vec!["generate", model, "--json"];
    all.extend_from_slice(args);
    let out = oxrelax(&all);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    serde_json::from_str(stdout.lines().last().unwrap()).unwrap()
}

/// A stop string ends generation where it starts (it is not printed), `--system` renders
/// a chat, and generate is greedy unless asked for the model's sampling defaults.
#[test]
fn generate_stops_at_stop_strings_and_takes_a_system_message() {
    let base = ["--prompt", "To be, or not to be", "--max-new-tokens", "24"];
    let full = generate_json(&base);
    let text = full["text"].as_str().unwrap();
    let stop = &text[text.len() / 2..text.len() / 2 + 2];
    let cut = generate_json(&[&base[..], &["--stop", stop]].concat());
    let expected = &text[..text.find(stop).unwrap()];
    assert_eq!(cut["text"], expected, "stop {stop:?} in {text:?}");
    assert_eq!(cut["stop_reason"], "stop");
    assert_eq!(
        generate_json(&base)["ids"],
        full["ids"],
        "greedy by default"
    );
    let sampled = [&base[..], &["--sampling-defaults", "model", "--seed", "3"]].concat();
    assert_eq!(
        generate_json(&sampled)["ids"],
        generate_json(&sampled)["ids"]
    );
    let prompt_tokens = |extra: &[&str]| {
        let json = generate_json(&[&base[..], extra].concat());
        json["stats"]["prefill_tokens"].as_u64().unwrap()
    };
    let chat = prompt_tokens(&["--chat"]);
    let system = prompt_tokens(&["--system", "You are a player."]);
    assert!(
        system > chat,
        "the system message is rendered: {system} vs {chat} tokens"
    );
}
