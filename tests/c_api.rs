//! The C API: `examples/generate.c` built against `runtime/include/oxrelax.h` and the
//! runtime's shared library, run on an artifact of the tiny Llama fixture, generates
//! transformers' greedy ids; `tests/c_api/abuse.c` calls every entry point wrongly and
//! gets a typed status for each, never a crash.

use oxrelax::artifact::{compile_artifact, CompileOptions};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The folder holding `liboxrelax_runtime.so`, built with this test's dependencies.
fn runtime_library_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap().to_path_buf();
    assert!(
        deps.join("liboxrelax_runtime.so").is_file(),
        "no liboxrelax_runtime.so in {}",
        deps.display()
    );
    deps
}

/// The tiny Llama fixture and an artifact of it compiled into `tmp`.
fn tiny_llama(tmp: &Path) -> (PathBuf, PathBuf) {
    let fixture = root().join("../shared/fixtures/models/tiny-llama");
    let artifact = tmp.join("tiny-llama");
    compile_artifact(&fixture, &artifact, &CompileOptions::default(), |_| {}).unwrap();
    (fixture, artifact)
}

/// `source` (relative to the repository) compiled with `cc` into `exe`, linked to the
/// runtime's shared library; warnings are errors.
fn build_c(source: &str, exe: &Path) {
    let lib = runtime_library_dir();
    let built = Command::new("cc")
        .arg("-O2")
        .arg("-Wall")
        .arg("-Werror")
        .arg(format!("-I{}", root().join("runtime/include").display()))
        .arg(root().join(source))
        .arg("-o")
        .arg(exe)
        .arg(format!("-L{}", lib.display()))
        .arg("-loxrelax_runtime")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&built.stderr);
    assert!(built.status.success(), "cc {source} failed: {stderr}");
}

/// Prompt 0's input ids and its first `n` greedy ids, from the fixture's reference.
fn reference(fixture: &Path, n: usize) -> (String, String) {
    let text = std::fs::read_to_string(fixture.join("reference.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let ids = |key: &str, take: usize| {
        let list = json["prompts"][0][key].as_array().unwrap();
        let ids: Vec<String> = list.iter().take(take).map(|v| v.to_string()).collect();
        ids
    };
    (
        ids("input_ids", usize::MAX).join(","),
        ids("greedy_ids", n).join(" "),
    )
}

#[cfg(target_os = "linux")]
#[test]
fn the_c_example_generates_the_reference_greedy_ids() {
    let tmp = tempfile::tempdir().unwrap();
    let (fixture, artifact) = tiny_llama(tmp.path());
    let exe = tmp.path().join("generate");
    build_c("examples/generate.c", &exe);

    let (prompt, want) = reference(&fixture, 8);
    let run = Command::new(&exe)
        .arg(&artifact)
        .arg(&prompt)
        .arg("8")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "generate failed: {stderr}");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(stdout.lines().last().unwrap_or(""), want, "{stderr}");

    let missing = Command::new(&exe)
        .arg(tmp.path().join("nowhere"))
        .arg(&prompt)
        .arg("8")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(missing.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("nowhere/oxrelax-model.json"), "{stderr}");
}

/// Status codes of `oxrelax.h`.
const OK: i32 = 0;
const INVALID_ARGUMENT: i32 = 1;
const ARTIFACT: i32 = 2;
const GENERATION: i32 = 4;
const BUFFER_TOO_SMALL: i32 = 5;
const INVALID_HANDLE: i32 = 7;

/// Each line `abuse.c` prints, in order: the call, the status (or size) it returned and a
/// part of the message `oxrelax_last_error` gave then.
const ABUSE: &[(&str, i32, &str)] = &[
    ("open_null_dir", INVALID_ARGUMENT, "`artifact_dir` is null"),
    ("open_null_out", INVALID_ARGUMENT, "`out` is null"),
    (
        "open_invalid_utf8",
        INVALID_ARGUMENT,
        "`artifact_dir` is not UTF-8",
    ),
    ("open_missing_dir", ARTIFACT, "oxrelax-model.json"),
    ("open_npu_null_backend", INVALID_ARGUMENT, "`npu` is null"),
    (
        "open_npu_unknown_backend",
        INVALID_ARGUMENT,
        "`npu` is `gpu`",
    ),
    ("open_npu_without_npu_graphs", ARTIFACT, "has no NPU graphs"),
    ("open_failure_nulls_out", OK, ""),
    ("open", OK, ""),
    ("encode_null_model", INVALID_ARGUMENT, "`model` is null"),
    ("encode_null_text", INVALID_ARGUMENT, "`text` is null"),
    (
        "encode_invalid_utf8",
        INVALID_ARGUMENT,
        "`text` is not UTF-8",
    ),
    ("encode_null_n_ids", INVALID_ARGUMENT, "`n_ids` is null"),
    (
        "encode_null_ids_capacity_8",
        INVALID_ARGUMENT,
        "`ids` is null but its length is 8",
    ),
    (
        "encode_huge_capacity",
        INVALID_ARGUMENT,
        "18446744073709551615 values",
    ),
    (
        "encode_misaligned_ids",
        INVALID_ARGUMENT,
        "not aligned to 4 bytes",
    ),
    ("encode_size_query", BUFFER_TOO_SMALL, "holds 0 ids"),
    ("encode_ok", OK, ""),
    ("encode_size_query_n_ids_match", 1, ""),
    ("generate_null_model", INVALID_ARGUMENT, "`model` is null"),
    (
        "generate_null_prompt_n_2",
        INVALID_ARGUMENT,
        "`prompt` is null but its length is 2",
    ),
    (
        "generate_n_prompt_size_max",
        GENERATION,
        "18446744073709551615 more",
    ),
    (
        "generate_prompt_past_window",
        GENERATION,
        "context window of",
    ),
    ("generate_empty_prompt", GENERATION, "the prompt is empty"),
    (
        "generate_id_out_of_vocab",
        GENERATION,
        "token id 4294967295",
    ),
    ("generate_invalid_options", INVALID_ARGUMENT, "temperature"),
    (
        "generate_null_out_capacity_8",
        INVALID_ARGUMENT,
        "`out_ids` is null but its length is 8",
    ),
    (
        "generate_huge_capacity",
        INVALID_ARGUMENT,
        "`out_ids` has a length of",
    ),
    ("generate_null_n_out", INVALID_ARGUMENT, "`n_out` is null"),
    ("cached_after_refusals", 0, ""),
    (
        "callback_reset_same_handle",
        INVALID_ARGUMENT,
        "in use by another call",
    ),
    ("generate_reentrant_callback", OK, ""),
    ("generate_ok", OK, ""),
    ("generate_ok_n_out", 2, ""),
    (
        "generate_n_prompt_size_max_with_cache",
        GENERATION,
        "18446744073709551615 more",
    ),
    ("reset", OK, ""),
    ("close", OK, ""),
    ("close_again", INVALID_HANDLE, "is not open"),
    ("encode_closed", INVALID_HANDLE, "is not open"),
    ("generate_closed", INVALID_HANDLE, "is not open"),
    ("reset_closed", INVALID_HANDLE, "is not open"),
    ("context_window_closed", 0, "is not open"),
    ("cached_tokens_closed", 0, "is not open"),
    ("close_made_up_handle", INVALID_HANDLE, "0x1234 is not open"),
    ("close_null", OK, ""),
    ("reset_null", INVALID_ARGUMENT, "`model` is null"),
    ("context_window_null", 0, "`model` is null"),
];

#[cfg(target_os = "linux")]
#[test]
fn every_entry_point_refuses_abuse_with_a_typed_status_and_never_crashes() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, artifact) = tiny_llama(tmp.path());
    let exe = tmp.path().join("abuse");
    build_c("tests/c_api/abuse.c", &exe);
    let run = Command::new(&exe).arg(&artifact).output().unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stdout}\n{stderr}");
    let lines: Vec<(&str, i32, &str)> = stdout
        .lines()
        .map(|line| {
            let mut parts = line.splitn(3, ' ');
            let name = parts.next().unwrap();
            let status = parts.next().and_then(|s| s.parse().ok()).unwrap();
            (name, status, parts.next().unwrap_or(""))
        })
        .collect();
    let names: Vec<&str> = lines.iter().map(|l| l.0).collect();
    let want: Vec<&str> = ABUSE.iter().map(|l| l.0).collect();
    assert_eq!(names, want, "{stdout}");
    for (&(name, status, message), &(_, want_status, fragment)) in lines.iter().zip(ABUSE) {
        assert_eq!(status, want_status, "{name}: {message}");
        assert!(
            message.contains(fragment),
            "{name}: {message:?} lacks {fragment:?}"
        );
    }
}
