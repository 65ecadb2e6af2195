"""The `openai` Python client against a running `oxrelax serve`.

Checks greedy completions (streamed and not) against the text `oxrelax generate` printed,
a chat completion (streamed and not), a stream's usage chunk (`stream_options`), content
given as text parts, `models.retrieve`, OpenAI-style errors, then runs a bounded load test
(CLIENTS threads x REQUESTS sampled completions) and prints latency percentiles, tokens/s,
errors and the server's resident memory before and after. Exits non-zero on any failure.

Usage: openai_client.py BASE_URL SERVER_PID EXPECTED_TEXT
"""

import json
import sys
import threading
import time
import urllib.error
import urllib.request

import openai
from openai import OpenAI

PROMPT = "To be, or not to be"
CLIENTS = 8
REQUESTS = 20
# Resident memory the load test may add (allocator slack), in KiB.
RSS_SLACK_KIB = 16 * 1024


def rss_kib(pid):
    """The server's resident set size in KiB (VmRSS of /proc/PID/status)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise SystemExit(f"no VmRSS for pid {pid}")


def check_completions(client, model, want):
    r = client.completions.create(model=model, prompt=PROMPT, max_tokens=24, temperature=0)
    assert r.choices[0].text == want, (r.choices[0].text, want)
    assert r.choices[0].finish_reason == "length", r.choices[0].finish_reason
    assert r.usage.completion_tokens == 24, r.usage
    chunks = client.completions.create(
        model=model, prompt=PROMPT, max_tokens=24, temperature=0, stream=True
    )
    streamed = "".join(chunk.choices[0].text for chunk in chunks)
    assert streamed == want, (streamed, want)


def check_chat(client, model):
    messages = [{"role": "user", "content": "Hello"}]
    m = client.chat.completions.create(model=model, messages=messages, max_tokens=8, temperature=0)
    content = m.choices[0].message.content
    assert m.choices[0].message.role == "assistant"
    assert content is not None
    chunks = client.chat.completions.create(
        model=model, messages=messages, max_tokens=8, temperature=0, stream=True
    )
    streamed = "".join(chunk.choices[0].delta.content or "" for chunk in chunks)
    assert streamed == content, (streamed, content)


def check_openai_extras(client, model):
    chunks = list(
        client.completions.create(
            model=model, prompt=PROMPT, max_tokens=5, stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 5, chunks[-1]
    text = [{"role": "user", "content": "Hello"}]
    parts = [{"role": "user", "content": [{"type": "text", "text": "Hello"}]}]
    chunks = list(
        client.chat.completions.create(
            model=model, messages=parts, max_tokens=8, temperature=0, stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0, chunks[-1]
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    m = client.chat.completions.create(model=model, messages=text, max_tokens=8, temperature=0)
    assert streamed == m.choices[0].message.content, (streamed, m.choices[0].message.content)
    assert client.models.retrieve(model).id == model
    try:
        client.models.retrieve("gpt-4")
        raise SystemExit("retrieved gpt-4")
    except openai.NotFoundError:
        pass
    try:
        client.chat.completions.create(model=model, messages=text, logprobs=True)
        raise SystemExit("accepted logprobs=True")
    except openai.BadRequestError as e:
        assert e.body["param"] == "logprobs", e.body


def check_errors(client, base_url, model):
    bad = [
        (openai.BadRequestError, dict(model=model, prompt="x", max_tokens=-5)),
        (openai.BadRequestError, dict(model=model, prompt="x", n=2)),
        (openai.BadRequestError, dict(model=model, prompt="x", temperature=5)),
        (openai.NotFoundError, dict(model="gpt-4", prompt="x")),
    ]
    for error, fields in bad:
        try:
            client.completions.create(**fields)
            raise SystemExit(f"accepted {fields}")
        except error as e:
            assert "message" in e.body, e.body
    for body in [b"{", b'{"model": 1}']:
        request = urllib.request.Request(
            f"{base_url}/completions", data=body, headers={"Content-Type": "application/json"}
        )
        try:
            urllib.request.urlopen(request)
            raise SystemExit(f"accepted {body}")
        except urllib.error.HTTPError as e:
            assert e.code == 400 and "error" in json.loads(e.read()), e.code


def load_test(client, model, pid):
    latencies, tokens, errors = [], [], []

    def worker():
        for _ in range(REQUESTS):
            start = time.time()
            try:
                r = client.completions.create(
                    model=model, prompt="Speak", max_tokens=16, temperature=0.7, seed=1
                )
                latencies.append(time.time() - start)
                tokens.append(r.usage.completion_tokens)
            except Exception as e:  # noqa: BLE001 - every failure is counted and shown
                errors.append(repr(e))

    rss_before = rss_kib(pid)
    start = time.time()
    threads = [threading.Thread(target=worker) for _ in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.time() - start
    rss_after = rss_kib(pid)
    latencies.sort()
    p50 = latencies[len(latencies) // 2] * 1e3 if latencies else 0.0
    p99 = latencies[max(int(len(latencies) * 0.99) - 1, 0)] * 1e3 if latencies else 0.0
    print(
        f"serve load: {CLIENTS}x{REQUESTS} requests, {len(errors)} errors, "
        f"p50 {p50:.0f} ms, p99 {p99:.0f} ms, {sum(tokens) / wall:.0f} tokens/s, "
        f"RSS before {rss_before / 1024:.1f} MiB, after {rss_after / 1024:.1f} MiB"
    )
    assert not errors, errors[:3]
    assert rss_after <= rss_before + RSS_SLACK_KIB, (rss_before, rss_after)


def main():
    base_url, pid, want = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    client = OpenAI(base_url=base_url, api_key="none", max_retries=0)
    model = client.models.list().data[0].id
    check_completions(client, model, want)
    check_chat(client, model)
    check_openai_extras(client, model)
    check_errors(client, base_url, model)
    # Warm up the allocator at the load's request size before measuring memory.
    client.completions.create(model=model, prompt="Speak", max_tokens=16, temperature=0.7)
    load_test(client, model, pid)
    print("openai client: completions, streaming, chat, usage chunks, content parts, models, errors and load all passed")


if __name__ == "__main__":
    main()
