//! Inputs that used to lose a user's data or kill the process (issue 40): output folders
//! that are not artifacts, paths that are not regular files, files changed under a
//! running model, and files crafted past their hash check.

use super::{artifact, assert_error, copy_tree, fixture, generate, oxrelax, oxrelax_in, Run};
use oxrelax::artifact::sha256_file;
use oxrelax_runtime::artifact::Artifact;
use oxrelax_runtime::engine::GenerateOptions;
use oxrelax_runtime::{Sampler, SamplingConfig, ThreadPool};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;

/// Every file under `dir` with its bytes (symlinks as their target's name).
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            let name = path.strip_prefix(dir).unwrap().display().to_string();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                pending.push(path);
            } else if meta.is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                files.insert(name, target.display().to_string().into_bytes());
            } else {
                files.insert(name, std::fs::read(&path).unwrap());
            }
        }
    }
    files
}

/// `compile tiny-llama -o out`, run in `cwd`.
fn compile_into(cwd: &Path, out: &str) -> Run {
    let src = fixture("tiny-llama");
    oxrelax_in(cwd, &["compile", src.to_str().unwrap(), "-o", out], b"")
}

/// `compile model -o model/out`.
fn compile_beside(model: &Path) -> Run {
    let out = model.join("out");
    let args = [
        "compile",
        model.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ];
    oxrelax(&args)
}

#[test]
fn compile_never_writes_over_a_folder_that_is_not_only_an_artifact() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir(&home).unwrap();
    std::fs::write(home.join("thesis.tex"), b"chapter 1").unwrap();
    std::fs::write(home.join("oxrelax-model.json"), b"not a manifest").unwrap();
    // `-o .`: the current folder, with a stray file named like a manifest.
    let home_before = snapshot(&home);
    assert_error(&compile_into(&home, "."), &["home", "not an artifact"]);
    assert_eq!(snapshot(&home), home_before);
    // An artifact beside a file of the user's.
    let mixed = tmp.path().join("mixed");
    copy_tree(artifact(), &mixed);
    std::fs::write(mixed.join("notes.txt"), b"keep me").unwrap();
    let before = snapshot(&mixed);
    let run = compile_into(tmp.path(), "mixed");
    assert_error(
        &run,
        &["mixed", "holds notes.txt", "not part of the artifact"],
    );
    assert_eq!(snapshot(&mixed), before);
    // A file where the folder should be.
    let file = tmp.path().join("report.pdf");
    std::fs::write(&file, b"%PDF").unwrap();
    assert_error(
        &compile_into(tmp.path(), "report.pdf"),
        &["report.pdf", "not a folder"],
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"%PDF");
    // `-o ..` from inside a folder: its parent, which holds other things.
    let run = compile_into(&home, "..");
    assert_error(&run, &["not an artifact"]);
    assert_eq!(snapshot(&home), home_before);
    // No staging or replaced folder is left anywhere.
    let names: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.starts_with('.')), "{names:?}");
}

#[test]
fn recompiling_replaces_an_artifact_and_leaves_nothing_beside_it() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("model");
    let run = compile_into(tmp.path(), "model");
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let first = snapshot(&out);
    // Through `.` from inside the artifact, too.
    let run = compile_into(&out, ".");
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(
        snapshot(&out).keys().collect::<Vec<_>>(),
        first.keys().collect::<Vec<_>>()
    );
    let names: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["model"]);
}

#[test]
fn artifact_files_are_readable_by_others_under_the_usual_umask() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("model");
    let src = fixture("tiny-llama");
    let status = std::process::Command::new("sh")
        .args([
            "-c",
            "umask 022; exec \"$@\"",
            "sh",
            env!("CARGO_BIN_EXE_oxrelax"),
        ])
        .args([
            "compile",
            src.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(status.status.success(), "{status:?}");
    for file in ["params/model.safetensors", "vm.json", "oxrelax-model.json"] {
        let mode = std::fs::metadata(out.join(file))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o644, "{file}: {mode:o}");
    }
}

#[test]
fn dump_logits_writes_through_a_symlink_and_never_replaces_a_device() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("logits.safetensors");
    std::fs::write(&target, b"old").unwrap();
    let link = tmp.path().join("link.safetensors");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let run = generate(artifact(), &["--dump-logits", link.to_str().unwrap()]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    assert!(std::fs::read(&target).unwrap().len() > 8);
    let full = Path::new("/dev/full");
    if std::fs::metadata(full).is_ok_and(|m| m.file_type().is_char_device()) {
        let run = generate(artifact(), &["--dump-logits", "/dev/full"]);
        assert_error(&run, &["/dev/full", "No space left"]);
        assert!(std::fs::metadata(full)
            .unwrap()
            .file_type()
            .is_char_device());
    }
}

/// A copy of the compiled artifact in which `file` is replaced by `bytes` and the
/// manifest's hash updated to match, as a tamperer would.
fn rehashed(file: &str, bytes: &[u8]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(artifact(), dir.path());
    std::fs::write(dir.path().join(file), bytes).unwrap();
    let hash = sha256_file(&dir.path().join(file)).unwrap();
    let manifest = dir.path().join("oxrelax-model.json");
    let mut json: Value = serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    json["files"][file] = json!(hash);
    std::fs::write(&manifest, json.to_string()).unwrap();
    dir
}

#[test]
fn a_truncated_or_crafted_kernel_library_is_refused_before_it_is_loaded() {
    let library = std::fs::read(artifact().join("kernels.so")).unwrap();
    let dir = rehashed("kernels.so", &library[..library.len() / 2]);
    assert_error(&generate(dir.path(), &[]), &["kernels.so", "truncated"]);
    // The signature table's length claims more than its symbol holds.
    let at = library
        .windows(9)
        .position(|w| w == b"[{\"name\":")
        .expect("the signature table's JSON")
        - 8;
    let mut crafted = library.clone();
    crafted[at..at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let dir = rehashed("kernels.so", &crafted);
    assert_error(
        &generate(dir.path(), &[]),
        &["kernels.so", "claims 1099511627776 bytes"],
    );
}

/// [`rehashed`] with the JSON file `file` edited by `edit`.
fn rehashed_json(file: &str, edit: impl FnOnce(&mut Value)) -> tempfile::TempDir {
    let path = artifact().join(file);
    let mut json: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    edit(&mut json);
    rehashed(file, json.to_string().as_bytes())
}

#[test]
fn a_huge_register_count_is_refused_without_allocating() {
    let dir = rehashed_json("vm.json", |vm| {
        for function in vm["functions"].as_object_mut().unwrap().values_mut() {
            function["num_regs"] = json!(u32::MAX);
        }
    });
    assert_error(
        &generate(dir.path(), &[]),
        &["vm.json", "4294967295 registers"],
    );
}

/// `generate --chat` on a copy of the artifact whose chat template is `template`.
fn chat_with_template(template: &str) -> Run {
    let dir = rehashed_json("tokenizer_config.json", |config| {
        config["chat_template"] = json!(template)
    });
    let model = dir.path().to_str().unwrap();
    oxrelax(&["generate", "--model", model, "--chat", "--prompt", "hi"])
}

#[test]
fn a_runaway_chat_template_is_an_error_not_an_abort() {
    let runaway = "{% for i in range(20000) %}{{ messages[0]['content'] * 1000 }}{% endfor %}";
    let run = chat_with_template(runaway);
    assert_error(&run, &["rendered more than 16777216 bytes"]);
}

#[test]
fn a_chat_template_that_doubles_a_string_forty_times_is_an_error_not_an_abort() {
    let doubling = "{% set s = namespace(v=messages[0]['content']) %}{% for i in range(40) %}\
                    {% set s.v = s.v ~ s.v %}{% endfor %}{{ s.v | length }}";
    let run = chat_with_template(doubling);
    assert_error(&run, &["chat template", "fuel"]);
}

#[test]
fn devices_and_fifos_are_refused_as_configs_and_texts() {
    let model = super::copy_of("tiny-llama");
    let config = model.path().join("config.json");
    std::fs::remove_file(&config).unwrap();
    let status = std::process::Command::new("mkfifo")
        .arg(&config)
        .status()
        .unwrap();
    assert!(status.success());
    let run = compile_beside(model.path());
    assert_error(&run, &["config.json", "not a regular file"]);
    let run = oxrelax(&[
        "perplexity",
        artifact().to_str().unwrap(),
        "--text",
        "/dev/zero",
    ]);
    assert_error(&run, &["/dev/zero", "not a regular file"]);
}

#[test]
fn weights_truncated_or_rewritten_under_a_running_model_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(artifact(), dir.path());
    let greedy = |engine: &mut oxrelax_runtime::Engine| {
        let mut sampler = Sampler::new(SamplingConfig::default());
        let options = GenerateOptions {
            max_new_tokens: 8,
            ..GenerateOptions::default()
        };
        engine.reset().unwrap();
        let generation = engine.generate(&[1, 2, 3], options, &mut sampler, |_| {
            Ok(oxrelax_runtime::engine::Step::Continue)
        });
        generation.unwrap().ids
    };
    let loaded = Artifact::open(dir.path()).unwrap();
    let mut engine = loaded.into_engine(ThreadPool::global()).unwrap().engine;
    let before = greedy(&mut engine);
    let params = dir.path().join("params/model.safetensors");
    let len = std::fs::metadata(&params).unwrap().len();
    std::fs::write(&params, vec![0x7f; len as usize]).unwrap();
    assert_eq!(greedy(&mut engine), before, "rewritten");
    std::fs::File::options()
        .write(true)
        .open(&params)
        .unwrap()
        .set_len(8)
        .unwrap();
    assert_eq!(greedy(&mut engine), before, "truncated");
}

#[test]
fn a_checkpoint_holding_nan_or_infinity_is_refused_naming_the_element() {
    for (value, shown) in [(f32::NAN, "NaN"), (f32::NEG_INFINITY, "-inf")] {
        let model = super::copy_of("tiny-llama");
        let path = model.path().join("model.safetensors");
        let mut bytes = std::fs::read(&path).unwrap();
        let (header, _) = super::split_safetensors(&bytes);
        let info = &header[super::TENSOR];
        assert_eq!(info["dtype"], "F32");
        let data_start = 8 + u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let at = data_start + info["data_offsets"][0].as_u64().unwrap() as usize + 5 * 4;
        bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
        std::fs::write(&path, bytes).unwrap();
        let run = compile_beside(model.path());
        let element = format!("element 5 is {shown}");
        assert_error(&run, &["model.safetensors", super::TENSOR, &element]);
    }
}
