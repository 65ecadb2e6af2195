//! The C API: `examples/generate.c` built against `runtime/include/oxrelax.h` and the
//! runtime's shared library, run on an artifact of the tiny Llama fixture, generates
//! transformers' greedy ids.

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
    let fixture = root().join("../shared/fixtures/models/tiny-llama");
    let tmp = tempfile::tempdir().unwrap();
    let artifact = tmp.path().join("tiny-llama");
    compile_artifact(&fixture, &artifact, &CompileOptions::default(), |_| {}).unwrap();

    let lib = runtime_library_dir();
    let exe = tmp.path().join("generate");
    let built = Command::new("cc")
        .arg("-O2")
        .arg("-Wall")
        .arg("-Werror")
        .arg(format!("-I{}", root().join("runtime/include").display()))
        .arg(root().join("examples/generate.c"))
        .arg("-o")
        .arg(&exe)
        .arg(format!("-L{}", lib.display()))
        .arg("-loxrelax_runtime")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&built.stderr);
    assert!(built.status.success(), "cc failed: {stderr}");

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
