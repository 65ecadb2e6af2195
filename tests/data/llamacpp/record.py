#!/usr/bin/env python3
"""Records llama.cpp's outputs on the real GGUF models, the references tests/gguf_models.rs
checks oxrelax against: token ids of hard strings and of the evaluation text, greedy
continuations of four prompts, and perplexity over a prefix of the evaluation text.

Greedy text and perplexity (`ppl`) come from llama.cpp on an F32 GGUF of the same weights
(llama-quantize --allow-requantize), what oxrelax computes with `--quant q0f32`; `ppl_file`
is llama.cpp's perplexity on the file as it is, what `--quant auto` is checked against. Run from the project root with ../shared beside it:

    python3 tests/data/llamacpp/record.py smollm2 gemma3
"""
import hashlib, json, os, subprocess, sys, tempfile

SHARED = os.environ.get("SHARED", "../shared")
PEER = os.environ.get("OXRELAX_PEER_DIR", os.path.expanduser("~/.cache/oxrelax-peer"))
BIN = os.path.join(PEER, "llama.cpp", "build", "bin")
HERE = os.path.dirname(os.path.abspath(__file__))
TEXT = os.path.join(SHARED, "fixtures", "text", "shakespeare-eval.txt")
PREFIX_BYTES = 12000  # perplexity over this much of the evaluation text
CTX = 256
HARD = ["Hello world! 12345 The capital   of France", "  leading spaces\n\ttabs and emoji 😀 end",
        "digits 3.14159 and 1,000,000 and 0x1F", "\n\n\nmany newlines\n\n", "mixed\r\nCRLF\tand   \t tabs",
        "Ünïcödé façade naïve — “quotes” ‘single’", "中文字符和日本語のテキスト", "emoji 👩‍👩‍👧‍👦 🇫🇷 ✓",
        "don't I'LL we've THEY'RE", "    code:\n    def f(x):\n        return x**2\n", " ", "a",
        "<html><body>tags</body></html>", "trailing space ", "<|im_start|>user<|im_end|><start_of_turn>"]
PROMPTS = ["The capital of France is", "def fibonacci(n):", "Once upon a time, in a small village,",
           "The three primary colors are"]
GREEDY_TOKENS = 32


def run(*args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def tokenize(model, text):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(text)
    out = run(os.path.join(BIN, "llama-tokenize"), "-m", model, "-f", f.name, "--ids", "--log-disable",
              "--no-bos")  # special tokens written in the text are parsed, as transformers does
    os.unlink(f.name)
    return json.loads(out.strip().splitlines()[-1])


def perplexity(model, text_file):
    out = subprocess.run([os.path.join(BIN, "llama-perplexity"), "-m", model, "-f", text_file, "-c", str(CTX),
                          "-b", str(CTX), "-t", "2"], capture_output=True, text=True, check=True)
    final = [l for l in (out.stdout + out.stderr).splitlines() if "Final estimate: PPL" in l][0]
    return float(final.split("PPL =")[1].split()[0])


def ids_digest(ids):
    return hashlib.sha256(",".join(map(str, ids)).encode()).hexdigest()


def record(name):
    path = run(os.path.join(SHARED, "tools", "real-models"), name).strip()
    subprocess.run(["ninja", "-C", os.path.join(PEER, "llama.cpp", "build"), "llama-tokenize", "llama-simple"],
                   check=True, capture_output=True, env={**os.environ, "PATH": f"{PEER}/venv/bin:" + os.environ["PATH"]})
    f32 = os.path.join(tempfile.mkdtemp(), name + "-f32.gguf")
    run(os.path.join(BIN, "llama-quantize"), "--allow-requantize", path, f32, "F32")
    text = open(TEXT, encoding="utf-8").read()
    eval_ids = tokenize(path, text)
    greedy = []
    for prompt in PROMPTS:
        out = run(os.path.join(BIN, "llama-simple"), "-m", f32, "-n", str(GREEDY_TOKENS), prompt)
        out = out.removeprefix("<bos>")  # llama-simple prints the BOS it adds
        assert out.startswith(prompt), out
        continuation = out[len(prompt):].removesuffix("\n")  # and a newline after the text
        greedy.append({"prompt": prompt, "continuation": continuation})
    prefix = text.encode()[:PREFIX_BYTES].decode("utf-8", "ignore")
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(prefix)
    ppl, ppl_file = perplexity(f32, f.name), perplexity(path, f.name)
    sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
    reference = {
        "model": name, "file": os.path.basename(path), "sha256": sha,
        "llama_cpp": subprocess.run([os.path.join(BIN, "llama-bench"), "--version"], capture_output=True,
                                    text=True).stderr.strip().splitlines()[0],
        "tokenize": [{"text": t, "ids": tokenize(path, t)} for t in HARD],
        "eval_text": {"tokens": len(eval_ids), "ids_sha256": ids_digest(eval_ids)},
        "greedy": greedy,
        "perplexity": {"prefix_bytes": PREFIX_BYTES, "ctx": CTX, "ppl": ppl, "ppl_file": ppl_file},
    }
    with open(os.path.join(HERE, name + ".json"), "w", encoding="utf-8") as out:
        out.write("{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}"
                                      for k, v in reference.items()) + "\n}\n")
    os.remove(f32)
    print(name, "recorded:", reference["eval_text"], reference["perplexity"])


if __name__ == "__main__":
    for model in sys.argv[1:] or ["smollm2", "gemma3"]:
        record(model)
