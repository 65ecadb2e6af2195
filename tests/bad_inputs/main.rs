//! The bad-input catalog (issue 11): every input a new user can get wrong is a typed error
//! naming the file, tensor or value (or documented behaviour), never a panic, an abort, a
//! hang or a large allocation. Library-level cases match the error variant; command-line
//! cases run the `oxrelax` binary under a 4 GB address-space cap and a time limit.

mod data_loss;

use oxrelax::model::{load_hf, LoadError, LoadOptions};
use oxrelax_models::{ConfigError, ModelConfig};
use oxrelax_runtime::chat::Tokenizer;
use oxrelax_runtime::weights::{WeightError, WeightStore};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The address-space cap (KiB, as `ulimit -v` takes it) every command runs under.
const ADDRESS_SPACE_KIB: u64 = 4_000_000;
/// How long a refused command may take.
const QUICK: Duration = Duration::from_secs(20);

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures/models")
        .join(name)
}

/// A writable copy of the fixture `name` in a fresh temporary folder.
fn copy_of(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture(name), dir.path());
    dir
}

/// A copy of tiny-llama whose `config.json` is edited by `edit`.
fn with_config(edit: impl FnOnce(&mut Value)) -> tempfile::TempDir {
    let dir = copy_of("tiny-llama");
    let path = dir.path().join("config.json");
    let mut config: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edit(&mut config);
    std::fs::write(&path, config.to_string()).unwrap();
    dir
}

/// The header (JSON) and data of a safetensors file.
fn split_safetensors(bytes: &[u8]) -> (Value, &[u8]) {
    let len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    (
        serde_json::from_slice(&bytes[8..8 + len]).unwrap(),
        &bytes[8 + len..],
    )
}

/// A copy of tiny-llama whose `model.safetensors` header is edited by `edit` (the data
/// left as it is).
fn with_header(edit: impl FnOnce(&mut Value)) -> tempfile::TempDir {
    let dir = copy_of("tiny-llama");
    let path = dir.path().join("model.safetensors");
    let bytes = std::fs::read(&path).unwrap();
    let (mut header, data) = split_safetensors(&bytes);
    edit(&mut header);
    let json = header.to_string().into_bytes();
    let mut out = (json.len() as u64).to_le_bytes().to_vec();
    out.extend(json);
    out.extend(data);
    std::fs::write(&path, out).unwrap();
    dir
}

/// The tensor of the tiny-llama checkpoint the safetensors cases break.
const TENSOR: &str = "model.layers.0.mlp.down_proj.weight";

/// What a command did.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

/// Runs `oxrelax args...` under the address-space cap with `stdin` as its input.
fn oxrelax_with_input(args: &[&str], stdin: &[u8]) -> Run {
    oxrelax_in(Path::new("."), args, stdin)
}

/// Runs `oxrelax args...` in the folder `cwd` under the address-space cap with `stdin`
/// as its input.
fn oxrelax_in(cwd: &Path, args: &[&str], stdin: &[u8]) -> Run {
    let script = format!("ulimit -v {ADDRESS_SPACE_KIB}; exec timeout 60 \"$@\"");
    let start = Instant::now();
    let mut child = Command::new("sh")
        .args(["-c", &script, "sh", env!("CARGO_BIN_EXE_oxrelax")])
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    // The command may exit before reading its input: a broken pipe is not an error here.
    let _ = std::io::Write::write_all(&mut input, stdin);
    drop(input);
    let out = child.wait_with_output().unwrap();
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        elapsed: start.elapsed(),
    }
}

/// Runs `oxrelax args...` with a closed stdin.
fn oxrelax(args: &[&str]) -> Run {
    oxrelax_with_input(args, b"")
}

/// Asserts `run` failed quickly with one `error:` message (no panic, no line printed
/// twice, no cause repeating the message) containing every one of `names`.
fn assert_error(run: &Run, names: &[&str]) {
    let stderr = &run.stderr;
    assert!(
        matches!(run.code, Some(1 | 2)),
        "exit {:?}: {stderr}",
        run.code
    );
    assert!(run.elapsed < QUICK, "took {:?}: {stderr}", run.elapsed);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("memory allocation"), "{stderr}");
    let message = stderr
        .lines()
        .find_map(|l| l.strip_prefix("error: "))
        .unwrap_or_else(|| panic!("no `error:` line: {stderr}"));
    let errors = stderr.lines().filter(|l| l.starts_with("error: ")).count();
    assert_eq!(errors, 1, "{stderr}");
    for cause in stderr
        .lines()
        .filter_map(|l| l.trim().strip_prefix("caused by: "))
    {
        assert!(!message.contains(cause), "repeated cause: {stderr}");
    }
    for name in names {
        assert!(stderr.contains(name), "`{name}` not in: {stderr}");
    }
}

/// `generate --model dir --prompt hi --max-new-tokens 2` plus `extra`.
fn generate(dir: &Path, extra: &[&str]) -> Run {
    let model = dir.to_str().unwrap();
    let mut args = vec!["generate", "--model", model, "--prompt", "hi"];
    args.extend_from_slice(&["--max-new-tokens", "2"]);
    args.extend_from_slice(extra);
    oxrelax(&args)
}

/// tiny-llama compiled once per test binary (the cases copy it before breaking it).
fn artifact() -> &'static Path {
    static ARTIFACT: OnceLock<PathBuf> = OnceLock::new();
    ARTIFACT.get_or_init(|| {
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bad_inputs-tiny-llama");
        let src = fixture("tiny-llama");
        let run = oxrelax(&[
            "compile",
            src.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ]);
        assert_eq!(run.code, Some(0), "{}", run.stderr);
        assert!(
            run.stdout.contains("memory estimate: weights "),
            "{}",
            run.stdout
        );
        out
    })
}

/// Copies the folder `from` into `to` (created), subfolders included.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        match path.is_dir() {
            true => copy_tree(&path, &target),
            false => std::fs::write(target, std::fs::read(&path).unwrap()).unwrap(),
        }
    }
}

/// A copy of the compiled artifact whose manifest is edited by `edit`.
fn artifact_with_manifest(edit: impl FnOnce(&mut Value)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(artifact(), dir.path());
    let path = dir.path().join("oxrelax-model.json");
    let mut manifest: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edit(&mut manifest);
    std::fs::write(&path, manifest.to_string()).unwrap();
    dir
}

/// Why the model folder `dir` does not load (in this process).
fn load_error(dir: &Path) -> LoadError {
    match load_hf(dir, &LoadOptions::default()) {
        Ok(_) => panic!("{} loaded", dir.display()),
        Err(err) => err,
    }
}

/// Why the weights of `dir` do not open.
fn weight_error(dir: &Path) -> WeightError {
    WeightStore::open(dir).expect_err("the weights should not open")
}

/// Why the config of `dir` does not parse: the error inside the one naming the file.
fn config_error(dir: &Path) -> ConfigError {
    let path = dir.join("config.json");
    match ModelConfig::from_file(&path).expect_err("the config should not parse") {
        ConfigError::InFile {
            path: named,
            source,
        } => {
            assert_eq!(named, path);
            *source
        }
        other => other,
    }
}

// --- safetensors -------------------------------------------------------------------------

#[test]
fn truncated_safetensors_is_malformed_naming_the_file() {
    let dir = copy_of("tiny-llama");
    let path = dir.path().join("model.safetensors");
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let err = weight_error(dir.path());
    assert!(matches!(err, WeightError::Malformed { .. }), "{err}");
    assert!(err.to_string().contains("model.safetensors"), "{err}");
    assert_error(&generate(dir.path(), &[]), &["model.safetensors"]);
}

#[test]
fn a_huge_header_length_is_malformed_without_reading_it() {
    let dir = copy_of("tiny-llama");
    let path = dir.path().join("model.safetensors");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[..8].copy_from_slice(&(1u64 << 60).to_le_bytes());
    std::fs::write(&path, bytes).unwrap();
    let err = weight_error(dir.path());
    assert!(matches!(err, WeightError::Malformed { .. }), "{err}");
    assert_error(
        &generate(dir.path(), &[]),
        &["model.safetensors", "header too large"],
    );
}

#[test]
fn a_header_that_is_not_json_is_malformed() {
    let dir = copy_of("tiny-llama");
    let path = dir.path().join("model.safetensors");
    let bytes = std::fs::read(&path).unwrap();
    let mut broken = 7u64.to_le_bytes().to_vec();
    broken.extend(b"{\"a\": [");
    broken.extend(&bytes[8..]);
    std::fs::write(&path, broken).unwrap();
    let err = weight_error(dir.path());
    assert!(matches!(err, WeightError::Malformed { .. }), "{err}");
    assert!(err.to_string().contains("invalid JSON in header"), "{err}");
}

#[test]
fn bad_offsets_name_the_tensor_and_the_offsets() {
    let dir = with_header(|h| h[TENSOR]["data_offsets"][1] = json!(569604));
    let err = weight_error(dir.path());
    assert!(matches!(err, WeightError::Malformed { .. }), "{err}");
    let message = err.to_string();
    assert!(message.contains(&format!("tensor `{TENSOR}`")), "{message}");
    assert!(message.contains("[524544, 569604]"), "{message}");
    assert_error(&generate(dir.path(), &[]), &["model.safetensors", TENSOR]);
}

#[test]
fn bad_dtypes_name_the_tensor_and_the_dtype() {
    for (dtype, expected) in [("F99", "unknown dtype \"F99\""), ("F16", "F16 [64, 176]")] {
        let dir = with_header(|h| h[TENSOR]["dtype"] = json!(dtype));
        let err = weight_error(dir.path());
        assert!(matches!(err, WeightError::Malformed { .. }), "{err}");
        let message = err.to_string();
        assert!(message.contains(&format!("tensor `{TENSOR}`")), "{message}");
        assert!(message.contains(expected), "{message}");
    }
    let dir = with_header(|h| h[TENSOR]["dtype"] = json!("U32"));
    let err = weight_error(dir.path());
    assert!(matches!(err, WeightError::UnsupportedDtype { .. }), "{err}");
    assert!(err.to_string().contains(TENSOR), "{err}");
}

// --- tensors against the config ------------------------------------------------------------

#[test]
fn a_missing_tensor_is_named_with_its_shape() {
    let dir = with_config(|c| c["num_hidden_layers"] = json!(3));
    let err = load_error(dir.path());
    assert!(
        matches!(err, LoadError::Weights(WeightError::Missing { .. })),
        "{err}"
    );
    assert!(err.to_string().contains("model.layers.2."), "{err}");
    assert_error(
        &generate(dir.path(), &[]),
        &["model.safetensors", "missing tensor `model.layers.2."],
    );
}

#[test]
fn an_extra_tensor_is_named() {
    let dir = with_config(|c| c["num_hidden_layers"] = json!(1));
    let err = load_error(dir.path());
    assert!(
        matches!(err, LoadError::Weights(WeightError::Unexpected { .. })),
        "{err}"
    );
    assert!(err.to_string().contains("model.layers.1."), "{err}");
}

#[test]
fn a_misshapen_tensor_names_both_shapes() {
    let dir = with_config(|c| c["intermediate_size"] = json!(160));
    let err = load_error(dir.path());
    assert!(
        matches!(err, LoadError::Weights(WeightError::Shape { .. })),
        "{err}"
    );
    let message = err.to_string();
    assert!(
        message.contains("[176, 64]") && message.contains("[160, 64]"),
        "{message}"
    );
}

// --- config.json ---------------------------------------------------------------------------

#[test]
fn a_missing_config_is_an_io_error_naming_it() {
    let dir = copy_of("tiny-llama");
    std::fs::remove_file(dir.path().join("config.json")).unwrap();
    let err = ModelConfig::from_file(&dir.path().join("config.json")).unwrap_err();
    assert!(matches!(err, ConfigError::Io { .. }), "{err}");
    assert_error(&generate(dir.path(), &[]), &["config.json"]);
}

#[test]
fn an_invalid_config_is_a_json_error_naming_it_not_a_manifest() {
    let dir = copy_of("tiny-llama");
    std::fs::write(dir.path().join("config.json"), "{").unwrap();
    assert!(matches!(config_error(dir.path()), ConfigError::Json(_)));
    let run = generate(dir.path(), &[]);
    assert_error(&run, &["config.json", "invalid config JSON"]);
    assert!(!run.stderr.contains("manifest"), "{}", run.stderr);
    let dir = with_config(|c| c["hidden_size"] = json!("64"));
    assert!(matches!(config_error(dir.path()), ConfigError::Json(_)));
}

#[test]
fn heads_not_dividing_hidden_size_are_an_error_not_a_rounded_head_dim() {
    let dir = with_config(|c| {
        c.as_object_mut().unwrap().remove("head_dim");
        c["num_attention_heads"] = json!(3);
        c["num_key_value_heads"] = json!(3);
    });
    let err = config_error(dir.path());
    assert!(matches!(err, ConfigError::Invalid { .. }), "{err}");
    assert!(
        err.to_string().contains("3 does not divide hidden_size 64"),
        "{err}"
    );
}

#[test]
fn zero_and_negative_dims_are_errors_naming_the_field() {
    for (field, value) in [
        ("hidden_size", 0),
        ("num_hidden_layers", -1),
        ("vocab_size", 0),
    ] {
        let dir = with_config(|c| c[field] = json!(value));
        let err = config_error(dir.path());
        assert!(matches!(err, ConfigError::Invalid { .. }), "{err}");
        let message = err.to_string();
        assert!(
            message.contains(field) && message.contains("positive"),
            "{message}"
        );
    }
}

#[test]
fn absurd_dims_are_errors_naming_the_field_and_limit() {
    let cases = [
        ("vocab_size", json!(1_000_000_000_000i64), "limit of"),
        ("hidden_size", json!(1i64 << 40), "limit of"),
        (
            "intermediate_size",
            json!(2f64.powi(70)),
            "invalid config JSON",
        ),
    ];
    for (field, value, expected) in cases {
        let dir = with_config(|c| c[field] = value.clone());
        let err = config_error(dir.path());
        let message = err.to_string();
        assert!(message.contains(expected), "{field}: {message}");
        assert_error(&generate(dir.path(), &[]), &["config.json"]);
    }
}

/// `num_hidden_layers: 100000000` allocated 5.5 GB and aborted.
#[test]
fn absurd_layer_counts_are_refused_quickly_without_allocating() {
    let dir = with_config(|c| c["num_hidden_layers"] = json!(100_000_000));
    let out = dir.path().join("out");
    let run = oxrelax(&[
        "compile",
        dir.path().to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_error(&run, &["config.json", "num_hidden_layers", "100000000"]);
    assert!(!out.exists());
}

#[test]
fn an_unknown_architecture_is_named_with_the_supported_ones() {
    let dir = with_config(|c| c["architectures"] = json!(["GPT2LMHeadModel"]));
    let err = config_error(dir.path());
    assert!(
        matches!(err, ConfigError::UnknownArchitecture { .. }),
        "{err}"
    );
    assert_error(
        &generate(dir.path(), &[]),
        &["GPT2LMHeadModel", "LlamaForCausalLM"],
    );
}

#[test]
fn an_unknown_rope_type_is_named() {
    let dir = with_config(|c| c["rope_scaling"] = json!({"rope_type": "yarn", "factor": 4.0}));
    let err = config_error(dir.path());
    assert!(matches!(err, ConfigError::Unsupported { .. }), "{err}");
    assert!(
        err.to_string().contains("rope_scaling.rope_type `yarn`"),
        "{err}"
    );
}

// --- memory limits -------------------------------------------------------------------------

/// A context of 2^24 positions (the config allows it, `--max-context` asks for it) is an
/// 8 GiB KV cache: refused by its estimate, before anything is allocated.
#[test]
fn a_context_beyond_memory_is_refused_by_its_estimate() {
    let dir = with_config(|c| c["max_position_embeddings"] = json!(1 << 24));
    let run = generate(dir.path(), &["--max-context", "1000000000000"]);
    assert_error(
        &run,
        &["memory estimate", "KV cache 8.00 GiB", "exceeds the limit"],
    );
    let run = generate(
        dir.path(),
        &["--max-context", "100000", "--max-memory", "16M"],
    );
    assert_error(&run, &["KV cache 48.8 MiB", "(16777216 bytes"]);
}

#[test]
fn a_huge_prefill_chunk_is_refused_by_its_planned_arenas() {
    let run = generate(
        &fixture("tiny-llama"),
        &["--prefill-chunk", "1000000000000"],
    );
    assert_error(&run, &["memory estimate", "arena", "exceeds the limit"]);
}

#[test]
fn max_memory_refuses_a_model_or_artifact_that_does_not_fit() {
    let run = generate(&fixture("tiny-llama"), &["--max-memory", "1M"]);
    assert_error(&run, &["memory estimate weights", "(1048576 bytes"]);
    let run = generate(artifact(), &["--max-memory", "1M"]);
    assert_error(
        &run,
        &["memory estimate weights", "arena", "(1048576 bytes"],
    );
    let run = generate(artifact(), &["--max-memory", "lots"]);
    assert_error(&run, &["invalid memory size `lots`"]);
    let run = oxrelax(&["bench", artifact().to_str().unwrap(), "--prompt-len", "4"]);
    assert!(
        run.stdout.contains("memory estimate: weights"),
        "{}",
        run.stdout
    );
}

// --- artifacts -----------------------------------------------------------------------------

/// A manifest listing `/dev/zero` hung the loader.
#[test]
fn manifest_paths_outside_the_artifact_are_refused() {
    let dir = artifact_with_manifest(|m| m["files"]["/dev/zero"] = json!("0".repeat(64)));
    assert_error(
        &generate(dir.path(), &[]),
        &[
            "oxrelax-model.json",
            "\"/dev/zero\" is not a plain relative path",
        ],
    );
}

/// A crafted `module.txt` segfaulted: it is hashed, never parsed, when loading; `opt` on
/// it is a parse error.
#[test]
fn a_crafted_module_text_neither_crashes_loading_nor_opt() {
    let deep = format!("graph @f(x: Tensor(({}n,), f32))", "(".repeat(1_000_000));
    let dir = artifact_with_manifest(|_| {});
    let module = dir.path().join("module.txt");
    std::fs::write(&module, &deep).unwrap();
    assert_error(
        &generate(dir.path(), &[]),
        &["module.txt", "SHA-256 mismatch"],
    );
    let hash = oxrelax::artifact::sha256_file(&module).unwrap();
    let dir2 = artifact_with_manifest(|m| m["files"]["module.txt"] = json!(hash));
    std::fs::write(dir2.path().join("module.txt"), &deep).unwrap();
    let run = generate(dir2.path(), &[]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let run = oxrelax(&["opt", module.to_str().unwrap()]);
    assert_error(&run, &["module.txt", "nested more than 256 deep"]);
}

#[test]
fn a_broken_model_config_in_a_manifest_names_the_manifest() {
    let dir = artifact_with_manifest(|m| m["model_config"]["num_hidden_layers"] = json!(0));
    assert_error(
        &generate(dir.path(), &[]),
        &["oxrelax-model.json", "num_hidden_layers"],
    );
}

#[test]
fn an_artifact_refuses_the_options_it_was_compiled_with() {
    for option in ["--max-context", "--prefill-chunk"] {
        let run = generate(artifact(), &[option, "64"]);
        assert_error(&run, &[option, "compiled artifact"]);
    }
}

#[test]
fn dump_ir_of_an_unknown_function_lists_the_functions() {
    let run = oxrelax(&[
        "dump-ir",
        artifact().to_str().unwrap(),
        "--function",
        "nosuch",
    ]);
    assert_error(&run, &["no function nosuch", "decode"]);
}

// --- tokenizer and chat template -------------------------------------------------------------

#[test]
fn a_missing_tokenizer_asks_for_prompt_ids() {
    let dir = copy_of("tiny-llama");
    std::fs::remove_file(dir.path().join("tokenizer.json")).unwrap();
    assert_error(
        &generate(dir.path(), &[]),
        &["no tokenizer.json", "--prompt-ids"],
    );
    let run = oxrelax(&["chat", dir.path().to_str().unwrap()]);
    assert_error(&run, &["no tokenizer.json"]);
}

#[test]
fn a_corrupt_tokenizer_is_an_error_naming_it() {
    let dir = copy_of("tiny-llama");
    std::fs::write(dir.path().join("tokenizer.json"), "{\"model\": 3").unwrap();
    assert!(Tokenizer::from_dir(dir.path()).is_err());
    assert_error(&generate(dir.path(), &[]), &["tokenizer.json"]);
}

#[test]
fn a_bad_chat_template_is_an_error_naming_the_file() {
    let dir = copy_of("tiny-llama");
    let path = dir.path().join("tokenizer_config.json");
    let mut config: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    config["chat_template"] = json!("{% for m in messages %}{{ m.content }");
    std::fs::write(&path, config.to_string()).unwrap();
    let run = generate(dir.path(), &["--chat"]);
    assert_error(&run, &["tokenizer_config.json", "does not compile"]);
    let run = oxrelax_with_input(&["chat", dir.path().to_str().unwrap()], b"hi\n");
    assert_error(&run, &["tokenizer_config.json", "does not compile"]);
}

// --- prompts and generation sizes ----------------------------------------------------------

#[test]
fn a_prompt_beyond_the_context_is_a_context_overflow() {
    let prompt = "hello ".repeat(100);
    let run = oxrelax(&[
        "generate",
        "--model",
        fixture("tiny-llama").to_str().unwrap(),
        "--prompt",
        &prompt,
        "--max-context",
        "16",
    ]);
    assert_error(&run, &["context window of 16 tokens exceeded"]);
}

#[test]
fn bad_prompt_ids_are_errors_naming_the_id() {
    let model = artifact().to_str().unwrap();
    let run = oxrelax(&["generate", "--model", model, "--prompt-ids", "1,99999"]);
    assert_error(
        &run,
        &["token id 99999 at position 1", "vocabulary of 1024"],
    );
    let run = oxrelax(&["generate", "--model", model, "--prompt-ids", "1,-3"]);
    assert_error(&run, &["'-3'", "--prompt-ids"]);
    let run = oxrelax(&["generate", "--model", model, "--prompt-ids", "1,x"]);
    assert_error(&run, &["'x'", "--prompt-ids"]);
}

/// Documented (`generate --help`): `--max-new-tokens 0` prefills only.
#[test]
fn zero_max_new_tokens_generates_nothing() {
    let model = artifact().to_str().unwrap();
    let run = oxrelax(&[
        "generate",
        "--model",
        model,
        "--prompt",
        "hi",
        "--max-new-tokens",
        "0",
        "--json",
    ]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let report: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(report["ids"], json!([]));
    let help = oxrelax(&["generate", "--help"]).stdout;
    assert!(help.contains("0: prefill only"), "{help}");
}

/// Documented (`generate --help`): generation ends when the context window is full, so an
/// absurd `--max-new-tokens` allocates nothing for it.
#[test]
fn absurd_max_new_tokens_stop_at_the_context_window() {
    let dir = with_config(|c| c["max_position_embeddings"] = json!(32));
    let model = dir.path().to_str().unwrap();
    let run = oxrelax(&[
        "generate",
        "--model",
        model,
        "--prompt",
        "hi",
        "--ignore-eos",
        "--json",
        "--max-new-tokens",
        "18446744073709551615",
    ]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let report: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(report["stop_reason"], "context_full", "{report}");
    let run = generate(
        &fixture("tiny-llama"),
        &["--max-new-tokens", "18446744073709551616"],
    );
    assert_error(&run, &["--max-new-tokens"]);
}

/// `bench --prompt-len 1000000000000` aborted on allocation.
#[test]
fn absurd_bench_sizes_are_refused_quickly() {
    let model = artifact().to_str().unwrap();
    let cases: [(&[&str], &str); 4] = [
        (
            &["--prompt-len", "1000000000000"],
            "--prompt-len 1000000000000",
        ),
        (&["--gen", "1000000000000"], "--gen 1000000000000"),
        (&["--runs", "1000000000000"], "--runs 1000000000000"),
        (&["--prompt-len", "0"], "must be positive"),
    ];
    for (extra, expected) in cases {
        let mut args = vec!["bench", model];
        args.extend_from_slice(extra);
        assert_error(&oxrelax(&args), &[expected]);
    }
}

#[test]
fn invalid_sampling_values_are_errors_naming_them() {
    let cases: [(&[&str], &str); 4] = [
        (&["--temperature", "nan"], "temperature = NaN"),
        (&["--top-p", "2"], "top_p = 2"),
        (&["--repetition-penalty=-2"], "repetition_penalty = -2"),
        (&["--temperature", "hot"], "--temperature"),
    ];
    for (extra, expected) in cases {
        assert_error(&generate(artifact(), extra), &[expected]);
    }
}

#[cfg(unix)]
#[test]
fn invalid_utf8_in_a_prompt_is_an_error_and_a_chat_line_is_skipped() {
    use std::os::unix::ffi::OsStrExt;
    let prompt = std::ffi::OsStr::from_bytes(b"h\xffi");
    let out = Command::new(env!("CARGO_BIN_EXE_oxrelax"))
        .arg("generate")
        .arg("--model")
        .arg(artifact())
        .arg("--prompt")
        .arg(prompt)
        .output()
        .unwrap();
    let run = Run {
        code: out.status.code(),
        stdout: String::new(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        elapsed: Duration::ZERO,
    };
    assert_error(&run, &["invalid UTF-8"]);
    let model = artifact().to_str().unwrap();
    // Documented (`chat --help`): a line that is not UTF-8 is reported, the chat goes on.
    let input = b"h\xffi\n/stats\n";
    let run = oxrelax_with_input(&["chat", model, "--max-new-tokens", "2"], input);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.stderr.contains("line 1 is not valid UTF-8: ignored"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("0 messages"),
        "the next line still ran: {}",
        run.stderr
    );
}

/// Documented (`generate --help`): an empty prompt is the tokenizer's special tokens
/// alone; a tokenizer that adds none leaves nothing to prefill, an error.
#[test]
fn an_empty_prompt_is_a_bos_token_or_an_error() {
    let llama = artifact().to_str().unwrap();
    let run = oxrelax(&[
        "generate",
        "--model",
        llama,
        "--prompt",
        "",
        "--max-new-tokens",
        "1",
    ]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let qwen2 = fixture("tiny-qwen2");
    let run = oxrelax(&[
        "generate",
        "--model",
        qwen2.to_str().unwrap(),
        "--prompt",
        "",
    ]);
    assert_error(&run, &["the prompt is empty"]);
    let help = oxrelax(&["generate", "--help"]).stdout;
    assert!(
        help.contains("An empty prompt is those special tokens alone"),
        "{help}"
    );
}

/// Documented (`chat --help`): the end of input ends the chat without an error.
#[test]
fn a_closed_stdin_ends_the_chat() {
    let run = oxrelax(&["chat", artifact().to_str().unwrap()]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(!run.stderr.contains("error"), "{}", run.stderr);
    let help = oxrelax(&["chat", "--help"]).stdout;
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        help.contains("the end of input ends the chat without an error"),
        "{help}"
    );
}
