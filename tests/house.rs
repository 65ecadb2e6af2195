//! The house rules a reader relies on, checked on the source tree: the top level, the
//! README's length, which crate may import which, and the NPU kept in its own room.

use std::fs;
use std::path::{Path, PathBuf};

/// The repository root.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file below `dir`, as paths relative to the root, sorted.
fn rust_files(dir: &str) -> Vec<String> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(&root().join(dir), &mut files);
    let mut names: Vec<String> = files
        .iter()
        .map(|f| f.strip_prefix(root()).unwrap().display().to_string())
        .collect();
    names.sort();
    names
}

/// The lines of the files below `dir` (outside `allowed` prefixes) that contain `needle`
/// in code (not in `//` comments).
fn mentions(dir: &str, needle: &str, allowed: &[&str]) -> Vec<String> {
    rust_files(dir)
        .into_iter()
        .filter(|file| !allowed.iter().any(|a| file.starts_with(a)))
        .flat_map(|file| {
            let text = fs::read_to_string(root().join(&file)).unwrap();
            text.lines()
                .enumerate()
                .filter(|(_, line)| {
                    let code = line.split("//").next().unwrap_or("");
                    code.contains(needle)
                })
                .map(|(i, line)| format!("{file}:{}: {}", i + 1, line.trim()))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn the_top_level_holds_only_the_agreed_entries() {
    let agreed = [
        "Cargo.toml",
        "Cargo.lock",
        "src",
        "dsl",
        "schedules",
        "codegen",
        "models",
        "runtime",
        "tests",
        "snapshots",
        "README.md",
        "LICENSE",
        "docs",
        "examples",
        "target",
    ];
    for entry in fs::read_dir(root()).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        assert!(
            name.starts_with('.') || agreed.contains(&name.as_str()),
            "`{name}` at the top level"
        );
    }
}

#[test]
fn the_readme_is_a_short_manual() {
    let readme = fs::read_to_string(root().join("README.md")).unwrap();
    assert!(
        readme.lines().count() < 150,
        "README.md has grown past 150 lines"
    );
}

#[test]
fn the_generic_runtime_and_the_npu_import_each_other_only_one_way() {
    // The runtime outside its NPU module never names it, but for the NPU flags of the
    // `oxrelax-run` binary (behind the `npu` feature).
    let into_npu = mentions(
        "runtime/src",
        "qnn::",
        &["runtime/src/qnn/", "runtime/src/bin/oxrelax-run.rs"],
    );
    assert!(into_npu.is_empty(), "{into_npu:#?}");
    // The NPU's run side never imports the compiler.
    let into_compiler = mentions("runtime/src/qnn", "oxrelax::", &[]);
    assert!(into_compiler.is_empty(), "{into_compiler:#?}");
    // The compiler outside its NPU modules never names the NPU's code, but for the NPU
    // flags of the `generate` command (behind the `npu` feature).
    let npu_files = [
        "src/npu/",
        "src/artifact/npu.rs",
        "src/cli/npu.rs",
        "src/cli/compare_npu.rs",
        "src/cli/qnn_validate.rs",
        "src/cli/generate.rs",
    ];
    for needle in [
        "crate::npu",
        "oxrelax::npu",
        "super::npu",
        "oxrelax_runtime::qnn",
    ] {
        let found = mentions("src", needle, &npu_files);
        assert!(found.is_empty(), "{found:#?}");
    }
}

#[test]
fn codegen_depends_on_the_abi_not_on_the_runtime() {
    let manifest = fs::read_to_string(root().join("codegen/Cargo.toml")).unwrap();
    let dependencies = manifest
        .split("[dependencies]")
        .nth(1)
        .unwrap()
        .split("\n[")
        .next()
        .unwrap();
    assert!(dependencies.contains("oxrelax-abi"));
    assert!(!dependencies.contains("oxrelax-runtime"), "{dependencies}");
}
