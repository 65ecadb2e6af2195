//! The runtime's tokenizer, chat template and detokenizer against the reference ids and
//! renderings of `shared/fixtures/tokenizers/*/reference.json` (made with Hugging Face
//! tokenizers and transformers), through the library and through `oxrelax tokenize`.

use oxrelax_runtime::chat::{Message, Tokenizer};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn fixtures() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/tokenizers");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("skipped: no tokenizer fixtures at {}", dir.display());
        None
    }
}

fn fixture_dirs(root: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.join("reference.json").is_file())
        .collect();
    dirs.sort();
    dirs
}

fn reference(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("reference.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn ids(value: &Value) -> Vec<u32> {
    serde_json::from_value(value.clone()).unwrap()
}

fn messages(chat: &Value) -> Vec<Message> {
    serde_json::from_value(chat["messages"].clone()).unwrap()
}

/// Streams `ids` through the detokenizer one id at a time.
fn streamed(tok: &Tokenizer, ids: &[u32]) -> String {
    let mut detok = tok.detokenizer(false);
    let mut text = String::new();
    for &id in ids {
        if let Some(piece) = detok.push(id).unwrap() {
            assert!(
                !piece.ends_with('\u{FFFD}'),
                "emitted an incomplete character"
            );
            text.push_str(&piece);
        }
    }
    text + &detok.finish().unwrap()
}

/// Every mismatch of one case, described.
fn check_case(tok: &Tokenizer, case: &Value) -> Vec<String> {
    let text = case["text"].as_str().unwrap();
    let want = ids(&case["ids"]);
    let mut bad = Vec::new();
    let mut check = |what: &str, got: &dyn std::fmt::Debug, ok: bool| {
        if !ok {
            bad.push(format!("{text:?} {what}: got {got:?}"));
        }
    };
    let got = tok.encode(text, false).unwrap();
    check("ids", &got, got == want);
    let got = tok.encode(text, true).unwrap();
    check(
        "ids_with_special_tokens",
        &got,
        got == ids(&case["ids_with_special_tokens"]),
    );
    let decoded = case["decoded"].as_str().unwrap();
    let got = tok.decode(&want, false).unwrap();
    check("decoded", &got, got == decoded);
    let got = streamed(tok, &want);
    check("streamed", &got, got == decoded);
    bad
}

fn check_chat(tok: &Tokenizer, chat: &Value) -> Vec<String> {
    let template = tok.chat_template().unwrap();
    let add_generation_prompt = chat["add_generation_prompt"].as_bool().unwrap();
    let rendered = template
        .render(&messages(chat), add_generation_prompt)
        .unwrap();
    let mut bad = Vec::new();
    if rendered != chat["rendered"].as_str().unwrap() {
        bad.push(format!("chat rendered: got {rendered:?}"));
    }
    let got = tok.encode(&rendered, false).unwrap();
    if got != ids(&chat["ids"]) {
        bad.push(format!("chat ids: got {got:?}"));
    }
    bad
}

#[test]
fn every_fixture_tokenizer_matches_its_reference() {
    let Some(root) = fixtures() else { return };
    let dirs = fixture_dirs(&root);
    assert!(
        !dirs.is_empty(),
        "no fixture folders under {}",
        root.display()
    );
    let mut bad = Vec::new();
    for dir in &dirs {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let reference = reference(dir);
        let tok = Tokenizer::from_dir(dir).unwrap();
        assert_eq!(
            tok.vocab_size() as u64,
            reference["vocab_size"].as_u64().unwrap(),
            "{name}"
        );
        let cases = reference["cases"].as_array().unwrap();
        let chats = reference["chat"].as_array().unwrap();
        assert!(cases.len() >= 30 && !chats.is_empty(), "{name}");
        let problems = cases.iter().flat_map(|case| check_case(&tok, case));
        let problems = problems.chain(chats.iter().flat_map(|chat| check_chat(&tok, chat)));
        bad.extend(problems.map(|p| format!("{name}: {p}")));
    }
    assert!(
        bad.is_empty(),
        "{} mismatches:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

#[test]
fn eos_and_bos_ids_come_from_the_config() {
    let Some(root) = fixtures() else { return };
    let llama = Tokenizer::from_dir(&root.join("llama2")).unwrap();
    assert_eq!((llama.bos_id(), llama.eos_ids()), (Some(1), &[2][..]));
    let qwen = Tokenizer::from_dir(&root.join("tiny-bpe-1024")).unwrap();
    assert_eq!((qwen.bos_id(), qwen.eos_ids()), (None, &[1023][..]));
}

fn oxrelax_tokenize(args: &[&str], stdin: &str) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_oxrelax"))
        .arg("tokenize")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn cli_stdin_jsonl_matches_the_reference() {
    let Some(root) = fixtures() else { return };
    let dir = root.join("tiny-spm-1024");
    let reference = reference(&dir);
    let mut input = String::new();
    let mut want = Vec::new();
    for case in reference["cases"].as_array().unwrap() {
        input += &format!("{}\n", case["text"]);
        want.push(serde_json::json!({"ids": case["ids"]}));
    }
    for chat in reference["chat"].as_array().unwrap() {
        let request = serde_json::json!({"messages": chat["messages"],
            "add_generation_prompt": chat["add_generation_prompt"]});
        input += &format!("{request}\n");
        want.push(serde_json::json!({"ids": chat["ids"], "rendered": chat["rendered"]}));
    }
    let out = oxrelax_tokenize(&[dir.to_str().unwrap(), "--stdin-jsonl"], &input);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(got, want);
}

#[test]
fn cli_text_prints_one_line() {
    let Some(root) = fixtures() else { return };
    let dir = root.join("qwen2");
    let out = oxrelax_tokenize(&[dir.to_str().unwrap(), "--text", "Hello world"], "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "{\"ids\":[9707,1879]}\n"
    );
}

#[test]
fn cli_reports_bad_input_without_a_panic() {
    let Some(root) = fixtures() else { return };
    let dir = root.join("tiny-spm-1024");
    let dir = dir.to_str().unwrap();
    let cases = [
        (
            vec![dir, "--stdin-jsonl"],
            "\"ok\"\n{\"messages\": 3}\n",
            "stdin line 2: not a chat request",
        ),
        (
            vec![dir, "--stdin-jsonl"],
            "[1]\n",
            "stdin line 1: expected a JSON string",
        ),
        (
            vec![dir, "--stdin-jsonl"],
            "{not json\n",
            "stdin line 1: not JSON",
        ),
        (
            vec![dir, "--stdin-jsonl"],
            "{\"messages\": [{\"role\": \"assistant\", \"content\": \"x\"}]}\n",
            "rejected the conversation: Conversation roles must alternate",
        ),
        (
            vec!["/nonexistent/model", "--text", "x"],
            "",
            "cannot read /nonexistent/model/tokenizer.json",
        ),
    ];
    for (args, stdin, message) in cases {
        let out = oxrelax_tokenize(&args, stdin);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}
