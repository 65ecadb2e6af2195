//! `oxrelax serve` run as a user would, on the tiny Llama fixture over loopback: greedy
//! completions equal `oxrelax generate`'s text, streamed or not; chat completions; every
//! bad request is a 4xx with OpenAI's error JSON; a full queue is a 503; a client that
//! drops its stream (or gives up waiting) cancels the generation; SIGTERM lets the
//! request in flight finish, and after the grace period ends streams with an error event
//! and `[DONE]` and answers waiting requests 503; slow clients are cut off by the header
//! and body timeouts; OpenAI fields not served are refused by name.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

const PROMPT: &str = "To be, or not to be";
/// The context the fixture is compiled with: greedy generation from [`PROMPT`] runs to
/// 1000 tokens without an EOS, long enough (about a second) to queue behind or cancel.
const CONTEXT: &str = "1024";
/// Tokens of a long request.
const LONG: u32 = 1000;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/models/tiny-llama")
}

/// An `oxrelax serve` process on a free loopback port; killed when dropped.
struct Server {
    child: Child,
    url: String,
    log: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// Starts the server on the fixture with `extra` options and waits until it listens.
    fn start(extra: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_oxrelax"))
            .arg("serve")
            .arg(fixture())
            .args(["--port", "0", "--max-context", CONTEXT])
            .args(extra)
            .stderr(Stdio::piped())
            .spawn()
            .expect("oxrelax serve starts");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (address_tx, address_rx) = mpsc::channel();
        let lines = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some((_, address)) = line.split_once("listening on ") {
                    let address = address.split_whitespace().next().unwrap_or_default();
                    let _ = address_tx.send(address.to_string());
                }
                lines.lock().unwrap().push(line);
            }
        });
        let url = address_rx
            .recv_timeout(Duration::from_secs(120))
            .expect("the server prints its address");
        Server { child, url, log }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    /// POSTs `body` to `path`: the status and the body as JSON.
    fn post(&self, path: &str, body: &str) -> (u16, Value) {
        let (status, text) = self.post_text(path, body);
        let json = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{path}: status {status}, body not JSON ({e}): {text}"));
        (status, json)
    }

    /// POSTs `body` to `path`: the status and the body as text.
    fn post_text(&self, path: &str, body: &str) -> (u16, String) {
        let request = ureq::post(&self.url(path)).set("Content-Type", "application/json");
        into_text(request.send_string(body))
    }

    /// GETs `path`: the status and the body as JSON.
    fn get(&self, path: &str) -> (u16, Value) {
        let (status, text) = into_text(ureq::get(&self.url(path)).call());
        (status, serde_json::from_str(&text).unwrap())
    }

    /// A completion of [`PROMPT`] with these extra fields.
    fn complete(&self, fields: Value) -> (u16, Value) {
        let mut body = json!({"model": "tiny-llama", "prompt": PROMPT});
        body.as_object_mut()
            .unwrap()
            .extend(fields.as_object().unwrap().clone());
        self.post("/v1/completions", &body.to_string())
    }

    /// A streamed request's reader, its headers read.
    fn stream(&self, path: &str, body: Value) -> BufReader<Box<dyn Read + Send + Sync>> {
        let response = ureq::post(&self.url(path))
            .send_string(&body.to_string())
            .expect("the stream starts");
        assert_eq!(response.content_type(), "text/event-stream");
        BufReader::new(response.into_reader())
    }

    fn stats(&self) -> Value {
        self.get("/stats").1
    }

    /// Waits until the server's stats satisfy `done`.
    fn wait_for_stats(&self, done: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            let stats = self.stats();
            if done(&stats) {
                return stats;
            }
            assert!(start.elapsed() < Duration::from_secs(30), "{stats}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends SIGTERM and waits (30 s at most) for the server to exit.
    fn terminate(&mut self) -> ExitStatus {
        let pid = self.child.id().to_string();
        let killed = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(killed.success());
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "no exit after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until a line of the server's stderr satisfies `found`; returns it.
    fn wait_for_log(&self, found: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            if let Some(line) = self.log.lock().unwrap().iter().find(|l| found(l)) {
                return line.clone();
            }
            assert!(start.elapsed() < Duration::from_secs(30), "{:?}", self.log);
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn into_text(result: Result<ureq::Response, ureq::Error>) -> (u16, String) {
    let response = match result {
        Ok(response) | Err(ureq::Error::Status(_, response)) => response,
        Err(error) => panic!("request failed: {error}"),
    };
    (response.status(), response.into_string().unwrap())
}

/// Opens a raw connection to `server` and sends `bytes`.
fn raw(server: &Server, bytes: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(server.url.trim_start_matches("http://")).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream.write_all(bytes).unwrap();
    stream
}

/// Everything the server sends on `stream` until it closes the connection, and how long
/// that took; panics if it does not close it within the read timeout.
fn read_until_closed(mut stream: TcpStream) -> (String, Duration) {
    let start = Instant::now();
    let mut received = Vec::new();
    let mut buffer = [0; 4096];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => received.extend_from_slice(&buffer[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("the server kept the connection open: {e}"),
        }
    }
    (
        String::from_utf8_lossy(&received).into_owned(),
        start.elapsed(),
    )
}

/// The data of the next server-sent event (`None` at the end of the stream).
fn next_event(reader: &mut impl BufRead) -> Option<String> {
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if let Some(data) = line.trim_end().strip_prefix("data: ") {
            return Some(data.to_string());
        }
    }
}

/// Every event's data up to `[DONE]`, parsed.
fn all_events(mut reader: impl BufRead) -> Vec<Value> {
    let mut events = Vec::new();
    while let Some(data) = next_event(&mut reader) {
        if data == "[DONE]" {
            return events;
        }
        events.push(serde_json::from_str(&data).unwrap());
    }
    panic!("the stream ended without [DONE]: {events:?}");
}

/// The text `oxrelax generate --json` generates greedily from [`PROMPT`].
fn generated_text(max_new_tokens: u32) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_oxrelax"))
        .arg("generate")
        .arg("--model")
        .arg(fixture())
        .args(["--max-context", CONTEXT, "--prompt", PROMPT, "--json"])
        .args(["--max-new-tokens", &max_new_tokens.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    report["text"].as_str().unwrap().to_string()
}

#[test]
fn greedy_completions_equal_generate_streamed_or_not() {
    let want = generated_text(24);
    let server = Server::start(&[]);
    assert_eq!(server.get("/health"), (200, json!({"status": "ok"})));
    let (status, models) = server.get("/v1/models");
    assert_eq!(status, 200);
    assert_eq!(models["data"][0]["id"], "tiny-llama");
    assert_eq!(models["data"][0]["object"], "model");

    let (status, body) = server.complete(json!({"max_tokens": 24, "temperature": 0}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["object"], "text_completion");
    assert_eq!(body["choices"][0]["text"], want.as_str());
    assert_eq!(body["choices"][0]["finish_reason"], "length");
    assert_eq!(body["usage"]["completion_tokens"], 24);

    let body = json!({"model": "tiny-llama", "prompt": PROMPT, "max_tokens": 24,
        "temperature": 0, "stream": true});
    let events = all_events(server.stream("/v1/completions", body));
    let text: String = events
        .iter()
        .map(|e| e["choices"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, want);
    assert_eq!(
        events.last().unwrap()["choices"][0]["finish_reason"],
        "length"
    );

    // A stop string ends the text before it.
    let cut = &want[..want.find("body").unwrap()];
    let (_, body) = server.complete(json!({"max_tokens": 24, "temperature": 0, "stop": "body"}));
    assert_eq!(body["choices"][0]["text"], cut);
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
}

/// The greedy completions of `prompts` one at a time, then `repeats` times each all at
/// once, checked to be the same text; returns the ones made alone.
fn alone_then_together(server: &Server, prompts: &[&str], repeats: usize) -> Vec<Value> {
    let alone: Vec<Value> = prompts
        .iter()
        .map(|p| server.post("/v1/completions", &completion_body(p)).1)
        .collect();
    let together: Vec<(u16, Value)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..repeats)
            .flat_map(|_| prompts.iter())
            .map(|p| scope.spawn(move || server.post("/v1/completions", &completion_body(p))))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (i, (status, body)) in together.iter().enumerate() {
        assert_eq!(*status, 200, "{body}");
        let want = &alone[i % prompts.len()]["choices"][0]["text"];
        assert_eq!(&body["choices"][0]["text"], want, "request {i}");
    }
    alone
}

#[test]
fn concurrent_requests_are_batched_and_each_generates_what_it_would_alone() {
    let prompts = [
        "To be, or not to be",
        "Now is the winter",
        "Friends, Romans",
        "O Romeo",
    ];
    let server = Server::start(&["--max-batch", "4"]);
    let alone = alone_then_together(&server, &prompts, 3);
    // Requests are counted just after their last event is sent.
    let stats = server.wait_for_stats(|s| s["completed"] == 4 + 12);
    let tokens = |b: &Value| b["usage"]["completion_tokens"].as_u64().unwrap();
    let generated: u64 = alone.iter().map(tokens).sum::<u64>() * 4;
    assert_eq!(stats["generated_tokens"], generated, "{stats}");
    assert!(stats["peak_batch"].as_u64().unwrap() >= 2, "{stats}");
    assert!(stats["peak_batch"].as_u64().unwrap() <= 4, "{stats}");
    // Every repeated prompt found its keys and values in another request's cache.
    let prompts: u64 = alone
        .iter()
        .map(|b| b["usage"]["prompt_tokens"].as_u64().unwrap())
        .sum();
    assert_eq!(stats["prompt_tokens"], prompts * 4, "{stats}");
    let reused = stats["prompt_tokens_reused"].as_u64().unwrap();
    assert!(
        reused >= (prompts - 4) * 3,
        "{stats} {:?}",
        server.log.lock().unwrap()
    );
}

#[test]
fn requests_wait_for_kv_pages_and_one_larger_than_the_pool_is_a_400() {
    let prompts = ["To be, or not to be", "Now is the winter", "O Romeo"];
    // One page (32 positions of the fixture) holds a prompt and 24 tokens: one request
    // at a time holds the pool, the others wait for it.
    let server = Server::start(&["--max-batch", "4", "--kv-pages", "1"]);
    alone_then_together(&server, &prompts, 2);
    let stats = server.wait_for_stats(|s| s["completed"] == 3 + 6);
    assert_eq!(
        (
            stats["kv_pages"].as_u64(),
            stats["kv_page_positions"].as_u64()
        ),
        (Some(1), Some(32)),
        "{stats}"
    );
    assert!(stats["kv_pages_used"].as_u64().unwrap() <= 1, "{stats}");
    assert_eq!(
        stats["peak_batch"], 1,
        "one request runs at a time: {stats}"
    );
    let body = json!({"model": "tiny-llama", "prompt": prompts[0], "max_tokens": 40});
    let (status, body) = server.post("/v1/completions", &body.to_string());
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["param"], "max_tokens", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("needs 2 KV pages; the pool holds 1"),
        "{message}"
    );
}

/// `oxrelax serve` on the fixture with `extra` options, expected to refuse to start: its
/// stderr.
fn refused(extra: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_oxrelax"))
        .arg("serve")
        .arg(fixture())
        .args(["--port", "0", "--max-context", CONTEXT])
        .args(extra)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{extra:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

#[test]
fn the_page_pool_fits_in_max_memory_with_the_model() {
    // The fixture takes about 1.9 MiB (weights, a cache, arenas); one request at the full
    // context of 1024 positions takes 32 pages of 16 KiB, the 16 the model batches 512.
    let server = Server::start(&["--max-memory", "4M"]);
    let pages = server.stats()["kv_pages"].as_u64().unwrap();
    assert!((32..512).contains(&pages), "{pages} pages");
    alone_then_together(&server, &["To be, or not to be", "O Romeo"], 1);
    let error = refused(&["--max-memory", "2M"]);
    assert!(
        error.contains("less than one request at the full context of 1024 positions needs"),
        "{error}"
    );
    let error = refused(&["--max-memory", "4M", "--kv-pages", "400"]);
    assert!(
        error.contains("a KV page pool of 400 pages") && error.contains("+ KV pages 6.25 MiB"),
        "{error}"
    );
}

#[test]
fn bench_serve_loads_the_server_and_the_shared_prefix_is_computed_once() {
    let server = Server::start(&["--max-batch", "4"]);
    let out = Command::new(env!("CARGO_BIN_EXE_oxrelax"))
        .args([
            "bench-serve",
            &server.url,
            "--clients",
            "4",
            "--requests",
            "2",
        ])
        .args([
            "--prompt-len",
            "24",
            "--shared-prefix",
            "16",
            "--gen",
            "6",
            "--json",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(
        (report["requests"].as_u64(), report["errors"].as_u64()),
        (Some(8), Some(0))
    );
    assert_eq!(report["tokens"], 8 * 6, "{report}");
    for key in [
        "throughput_tok_s",
        "ttft_p50_ms",
        "ttft_p95_ms",
        "itl_p50_ms",
    ] {
        assert!(report[key].as_f64().unwrap() > 0.0, "{key}: {report}");
    }
    let stats = server.wait_for_stats(|s| s["completed"] == 8);
    assert_eq!(stats["prompt_tokens"], 8 * 24, "{stats}");
    // Only the first request computes the shared 16 tokens.
    assert!(
        stats["prompt_tokens_reused"].as_u64().unwrap() >= 7 * 16,
        "{stats}"
    );
}

/// A greedy completion of 24 tokens after `prompt`.
fn completion_body(prompt: &str) -> String {
    json!({"model": "tiny-llama", "prompt": prompt, "max_tokens": 24, "temperature": 0}).to_string()
}

#[test]
fn chat_completions_use_the_chat_template() {
    let server = Server::start(&[]);
    let messages = json!([{"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello"}]);
    let request = json!({"model": "tiny-llama", "messages": messages, "max_tokens": 8,
        "temperature": 0});
    let (status, body) = server.post("/v1/chat/completions", &request.to_string());
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["object"], "chat.completion");
    let message = &body["choices"][0]["message"];
    assert_eq!(message["role"], "assistant");
    let content = message["content"].as_str().unwrap();
    // The template's rendering is more tokens than the two messages' text.
    assert!(
        body["usage"]["prompt_tokens"].as_u64().unwrap() > 8,
        "{body}"
    );

    let mut request = request;
    request["stream"] = json!(true);
    let events = all_events(server.stream("/v1/chat/completions", request));
    assert_eq!(events[0]["object"], "chat.completion.chunk");
    assert_eq!(events[0]["choices"][0]["delta"]["role"], "assistant");
    let streamed: String = events
        .iter()
        .filter_map(|e| e["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(streamed, content);
}

#[test]
fn bad_requests_are_4xx_with_openai_errors() {
    let server = Server::start(&["--max-body", "8192"]);
    let too_long = "To be, or not to be. ".repeat(340);
    let cases: [(&str, String, u16); 14] = [
        ("bad JSON", "{".into(), 400),
        (
            "model not a string",
            r#"{"model": 1, "prompt": "x"}"#.into(),
            400,
        ),
        ("no prompt", r#"{"model": "tiny-llama"}"#.into(), 400),
        (
            "prompt a number",
            r#"{"model": "tiny-llama", "prompt": 5}"#.into(),
            400,
        ),
        (
            "temperature a string",
            r#"{"model": "tiny-llama", "prompt": "x", "temperature": "hot"}"#.into(),
            400,
        ),
        (
            "negative max_tokens",
            r#"{"model": "tiny-llama", "prompt": "x", "max_tokens": -5}"#.into(),
            400,
        ),
        (
            "zero max_tokens",
            r#"{"model": "tiny-llama", "prompt": "x", "max_tokens": 0}"#.into(),
            400,
        ),
        (
            "huge max_tokens",
            r#"{"model": "tiny-llama", "prompt": "x", "max_tokens": 1000000000000}"#.into(),
            400,
        ),
        (
            "n = 2",
            r#"{"model": "tiny-llama", "prompt": "x", "n": 2}"#.into(),
            400,
        ),
        (
            "temperature 5",
            r#"{"model": "tiny-llama", "prompt": "x", "temperature": 5}"#.into(),
            400,
        ),
        (
            "token id out of range",
            r#"{"model": "tiny-llama", "prompt": [1, 99999]}"#.into(),
            400,
        ),
        (
            "prompt longer than the context",
            json!({"model": "tiny-llama", "prompt": &too_long[..7000]}).to_string(),
            400,
        ),
        (
            "unknown model",
            r#"{"model": "gpt-4", "prompt": "x"}"#.into(),
            404,
        ),
        (
            "body over --max-body",
            json!({"model": "tiny-llama", "prompt": "x".repeat(9000)}).to_string(),
            413,
        ),
    ];
    for (case, body, status) in &cases {
        let (got, json) = server.post("/v1/completions", body);
        assert_eq!(got, *status, "{case}: {json}");
        assert!(json["error"]["message"].is_string(), "{case}: {json}");
        assert!(json["error"]["type"].is_string(), "{case}: {json}");
    }
    let (status, json) = server.post(
        "/v1/chat/completions",
        r#"{"model": "tiny-llama", "messages": []}"#,
    );
    assert_eq!(
        (status, json["error"]["param"].as_str()),
        (400, Some("messages"))
    );
    let (status, json) = server.post("/v1/nothing", "{}");
    assert_eq!(
        (status, json["error"]["code"].as_str()),
        (404, Some("unknown_url"))
    );
    let (status, json) = server.get("/v1/completions");
    assert_eq!(status, 405, "{json}");
    // OpenAI fields not served, or unknown, or values out of range, are named.
    let refused = [
        (json!({"logprobs": 2}), "logprobs"),
        (json!({"logit_bias": {"1": 1e39}}), "logit_bias"),
        (json!({"temprature": 1}), "temprature"),
        (json!({"presence_penalty": 1e39}), "presence_penalty"),
        (json!({"frequency_penalty": 1}), "frequency_penalty"),
        (json!({"top_p": 1e39}), "top_p"),
    ];
    for (fields, param) in refused {
        let (status, json) = server.complete(fields.clone());
        assert_eq!(
            (status, json["error"]["param"].as_str()),
            (400, Some(param)),
            "{fields}: {json}"
        );
    }
    let (status, json) = server.post(
        "/v1/chat/completions",
        &json!({"model": "tiny-llama", "tools": [{"type": "function"}],
            "messages": [{"role": "user", "content": "x"}]})
        .to_string(),
    );
    assert_eq!(
        (status, json["error"]["param"].as_str()),
        (400, Some("tools")),
        "{json}"
    );
    let image = json!([{"type": "image_url", "image_url": {"url": "http://x"}}]);
    let (status, json) = server.post(
        "/v1/chat/completions",
        &json!({"model": "tiny-llama", "messages": [{"role": "user", "content": image}]})
            .to_string(),
    );
    assert_eq!(
        (status, json["error"]["param"].as_str()),
        (400, Some("messages")),
        "{json}"
    );
    // The server is still well.
    let (status, _) = server.complete(json!({"max_tokens": 2}));
    assert_eq!(status, 200);
}

#[test]
fn usage_chunks_content_parts_cors_and_model_routes() {
    let server = Server::start(&[]);
    let body = json!({"model": "tiny-llama", "prompt": PROMPT, "max_tokens": 5,
        "stream": true, "stream_options": {"include_usage": true}});
    let events = all_events(server.stream("/v1/completions", body));
    let last = events.last().unwrap();
    assert_eq!(last["choices"], json!([]), "{last}");
    assert_eq!(last["usage"]["completion_tokens"], 5, "{last}");
    assert!(events[..events.len() - 1]
        .iter()
        .all(|e| e.get("usage").is_none()));

    let text = json!([{"role": "user", "content": "Hello\nthere"}]);
    let parts = json!([{"role": "user", "content": [{"type": "text", "text": "Hello"},
        {"type": "text", "text": "there"}]}]);
    let replies: Vec<Value> = [text, parts]
        .into_iter()
        .map(|messages| {
            let request = json!({"model": "tiny-llama", "messages": messages, "max_tokens": 6,
                "temperature": 0});
            let (status, body) = server.post("/v1/chat/completions", &request.to_string());
            assert_eq!(status, 200, "{body}");
            body["choices"][0]["message"].clone()
        })
        .collect();
    assert_eq!(replies[0], replies[1]);

    let preflight = ureq::request("OPTIONS", &server.url("/v1/chat/completions"))
        .set("Origin", "http://example.com")
        .set("Access-Control-Request-Method", "POST")
        .set(
            "Access-Control-Request-Headers",
            "content-type, authorization",
        )
        .call()
        .expect("the preflight is answered");
    assert_eq!(preflight.header("access-control-allow-origin"), Some("*"));
    let methods = preflight.header("access-control-allow-methods").unwrap();
    assert!(methods.contains("POST"), "{methods}");
    assert!(preflight.header("access-control-allow-headers").is_some());

    let (status, card) = server.get("/v1/models/tiny-llama");
    assert_eq!(
        (status, card["id"].as_str()),
        (200, Some("tiny-llama")),
        "{card}"
    );
    let (status, error) = server.get("/v1/models/gpt-4");
    assert_eq!(
        (status, error["error"]["code"].as_str()),
        (404, Some("model_not_found")),
        "{error}"
    );
}

#[test]
fn slow_and_idle_clients_are_cut_off() {
    let server = Server::start(&[
        "--header-timeout",
        "0.5",
        "--body-timeout",
        "0.5",
        "--max-body",
        "8192",
    ]);
    // Headers a byte at a time, forever.
    let slowloris = raw(&server, b"POST /v1/completions HTTP/1.1\r\n");
    let mut dribble = slowloris.try_clone().unwrap();
    std::thread::spawn(move || {
        while dribble.write_all(b"X").is_ok() {
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    let (_, took) = read_until_closed(slowloris);
    assert!(took < Duration::from_secs(5), "{took:?}");
    // An idle keep-alive connection is closed after its response.
    let idle = raw(&server, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    let (response, took) = read_until_closed(idle);
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    // A Content-Length over the limit is refused before any body is read.
    let huge = raw(
        &server,
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000000\r\n\r\n{\"model\"",
    );
    let (response, took) = read_until_closed(huge);
    assert!(response.starts_with("HTTP/1.1 413"), "{response}");
    assert!(response.contains("\"error\""), "{response}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    // So is a chunked body once it passes the limit.
    let mut chunked =
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    chunked
        .extend_from_slice(format!("{:x}\r\n{}\r\n0\r\n\r\n", 9000, "x".repeat(9000)).as_bytes());
    let (response, _) = read_until_closed(raw(&server, &chunked));
    assert!(response.starts_with("HTTP/1.1 413"), "{response}");
    // A body that stalls is a 408.
    let stalled = raw(
        &server,
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 20\r\n\r\n{\"model\"",
    );
    let (response, took) = read_until_closed(stalled);
    assert!(response.starts_with("HTTP/1.1 408"), "{response}");
    assert!(
        response.contains("did not arrive within 0.5 s"),
        "{response}"
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
    // The server is still well.
    assert_eq!(server.get("/health").0, 200);
}

#[test]
fn durations_that_do_not_fit_are_clap_errors() {
    for flag in ["--shutdown-grace", "--header-timeout", "--body-timeout"] {
        for value in ["1e20", "-1", "NaN", "inf"] {
            let out = Command::new(env!("CARGO_BIN_EXE_oxrelax"))
                .arg("serve")
                .arg(fixture())
                .arg(format!("{flag}={value}"))
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{flag} {value}: {stderr}");
            assert!(
                stderr.contains(&format!("invalid value '{value}' for '{flag}")),
                "{stderr}"
            );
            assert!(!stderr.contains("panicked"), "{stderr}");
        }
    }
}

#[test]
fn a_full_queue_answers_503() {
    let server = Arc::new(Server::start(&["--queue", "1"]));
    let clients: Vec<_> = (0..6)
        .map(|_| {
            let server = server.clone();
            std::thread::spawn(move || {
                server.complete(json!({"max_tokens": LONG, "temperature": 0}))
            })
        })
        .collect();
    let results: Vec<(u16, Value)> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    let statuses: Vec<u16> = results.iter().map(|(status, _)| *status).collect();
    assert!(statuses.contains(&200), "{statuses:?}");
    assert!(statuses.contains(&503), "{statuses:?}");
    for (status, body) in &results {
        match status {
            200 => assert_eq!(body["usage"]["completion_tokens"], LONG),
            503 => assert_eq!(body["error"]["code"], "server_overloaded"),
            _ => panic!("{status}: {body}"),
        }
    }
    let rejected = statuses.iter().filter(|&&s| s == 503).count() as u64;
    assert_eq!(server.stats()["rejected"], rejected);
}

#[test]
fn a_dropped_stream_cancels_its_generation() {
    let server = Server::start(&[]);
    let body = json!({"model": "tiny-llama", "prompt": PROMPT, "max_tokens": LONG,
        "temperature": 0, "stream": true});
    let mut reader = server.stream("/v1/completions", body);
    assert!(next_event(&mut reader).is_some());
    drop(reader);
    let stats = server.wait_for_stats(|s| s["cancelled"] == 1);
    assert_eq!(stats["completed"], 0, "{stats}");
    let line = server.wait_for_log(|l| l.ends_with("cancelled"));
    let generated: u32 = line
        .split("completion ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!(generated < LONG, "{line}");
    // So does a client that gives up on a response that is not streamed.
    let body = json!({"model": "tiny-llama", "prompt": PROMPT, "max_tokens": LONG});
    let gave_up = ureq::post(&server.url("/v1/completions"))
        .timeout(Duration::from_millis(25))
        .send_string(&body.to_string());
    assert!(
        matches!(gave_up, Err(ureq::Error::Transport(_))),
        "{gave_up:?}"
    );
    server.wait_for_stats(|s| s["cancelled"] == 2);
    // The engine is free again at once.
    let start = Instant::now();
    let (status, _) = server.complete(json!({"max_tokens": 4}));
    assert_eq!(status, 200);
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn sigterm_lets_the_request_in_flight_finish() {
    let server = Server::start(&[]);
    let body = json!({"model": "tiny-llama", "prompt": PROMPT, "max_tokens": 200,
        "temperature": 0, "stream": true});
    let mut reader = server.stream("/v1/completions", body);
    assert!(next_event(&mut reader).is_some());
    let terminated = std::thread::spawn(move || {
        let mut server = server;
        let status = server.terminate();
        (server, status)
    });
    // The stream goes on to its end.
    let events = all_events(reader);
    assert_eq!(
        events.last().unwrap()["choices"][0]["finish_reason"],
        "length"
    );
    let (server, status) = terminated.join().unwrap();
    assert!(status.success(), "{status}");
    server.wait_for_log(|l| l.ends_with("stopped"));
}

#[test]
fn after_the_shutdown_grace_what_is_left_is_cancelled() {
    let mut server = Server::start(&["--shutdown-grace", "0.05"]);
    // A client that never finishes its request.
    let mut stuck = TcpStream::connect(server.url.trim_start_matches("http://")).unwrap();
    stuck
        .write_all(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    // More long generations than the grace can finish, however fast each one is: the
    // worker is inside one of them when the grace ends, and the rest are queued.
    let body = json!({"model": "tiny-llama", "prompt": PROMPT, "max_tokens": LONG,
        "temperature": 0, "stream": true});
    let mut first = server.stream("/v1/completions", body.clone());
    assert!(next_event(&mut first).is_some());
    let queued: Vec<_> = (0..QUEUED_BEHIND)
        .map(|_| {
            let url = server.url("/v1/completions");
            let body = body.to_string();
            std::thread::spawn(move || into_text(ureq::post(&url).send_string(&body)))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    let status = server.terminate();
    assert!(status.success(), "{status}");
    // Every stream ends with [DONE]: at its length, or, for the one cut off, with an
    // error event; the requests still queued are 503s.
    let mut outcomes = vec![stream_outcome(all_events(first))];
    for request in queued {
        let (status, text) = request.join().unwrap();
        outcomes.push(match status {
            200 => stream_outcome(all_events(BufReader::new(text.as_bytes()))),
            503 => {
                let error: Value = serde_json::from_str(&text).unwrap();
                assert!(error["error"]["message"].is_string(), "{error}");
                "503"
            }
            _ => panic!("status {status}: {text}"),
        });
    }
    assert!(outcomes.contains(&"cancelled"), "{outcomes:?}");
    assert!(outcomes.contains(&"503"), "{outcomes:?}");
    server.wait_for_log(|l| l.starts_with("cmpl-") && l.ends_with("cancelled"));
    server.wait_for_log(|l| l.ends_with("stopped"));
}

/// Long generations queued behind the first in [`after_the_shutdown_grace_what_is_left_is_cancelled`].
const QUEUED_BEHIND: usize = 40;

/// How a stream's events end: `"length"` or `"cancelled"` (an OpenAI `server_error`).
fn stream_outcome(events: Vec<Value>) -> &'static str {
    let last = events.last().unwrap();
    if last["error"]["type"] == "server_error" {
        return "cancelled";
    }
    assert_eq!(last["choices"][0]["finish_reason"], "length", "{last}");
    "length"
}
