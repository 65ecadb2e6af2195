#!/usr/bin/env bash
# Regenerates this machine's table in docs/benchmarks.md: oxrelax against llama.cpp on the
# same model, same machine, one sitting, plus the machine's measured limits (FMA peak and
# read bandwidth from `oxrelax bench-kernel`).
#
#   tests/bench/report.sh            # from the project root, ../shared beside it, idle machine
#
# Models: random-weight stories110m and TinyLlama-1.1B (../shared/tools/make_random_model.py,
# cached in $OXRELAX_BENCH_MODELS, default ~/.cache/oxrelax-bench-models) and the real
# SmolLM2-135M-Instruct Q4_1 GGUF (../shared/tools/real-models), which both engines run as it is.
# The peer is ../shared/tools/peer-llamacpp (llama-bench, built on first use).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
shared=${SHARED:-../shared}
tools=$shared/tools
models=${OXRELAX_BENCH_MODELS:-$HOME/.cache/oxrelax-bench-models}
prompt=${PROMPT:-128} gen=${GEN:-64} runs=${RUNS:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

cargo build --release -q -p oxrelax
bin=target/release/oxrelax
py=$HOME/.cache/oxrelax-peer/venv/bin/python
[ -x "$py" ] || py=python3
for m in stories110m tinyllama-1.1b; do
  [ -s "$models/$m/config.json" ] \
    || "$py" "$tools/make_random_model.py" --preset "$m" --dtype f32 --out "$models/$m" >/dev/null
done
smol=$("$tools/real-models" smollm2)

# model | llama.cpp type | oxrelax --quant
rows=(
  "$models/stories110m|f32|q0f32"
  "$models/tinyllama-1.1b|f32|q0f32"
  "$models/tinyllama-1.1b|q8_0|w8a8"
  "$models/tinyllama-1.1b|q4_0|q4f16_1"
  "$models/tinyllama-1.1b|q4_0|w4a8"
  "$smol|file|auto"
)

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
limits() { "$bin" bench-kernel --matmul 1x64x64 --rows 1 --runs 3; }
limits > "$out/limits.txt"
i=0
for row in "${rows[@]}"; do
  IFS='|' read -r model type quant <<< "$row"
  peer_type=$type
  [ "$type" = file ] && peer_type=f32 # a .gguf is run as it is whatever the type
  echo "== $(basename "$model") llama.cpp $type, oxrelax --quant $quant" >&2
  "$tools/peer-llamacpp" bench "$model" "$peer_type" "$prompt" "$gen" "$runs" > "$out/peer.$i.json"
  "$bin" bench "$model" --quant "$quant" --prompt-len "$prompt" --gen "$gen" --runs "$runs" --json \
    | tail -1 > "$out/ours.$i.json"
  echo "$model|$type|$quant" > "$out/row.$i"
  i=$((i + 1))
done
# Sequences decoded together: llama-batched-bench against `bench --batch`.
batches=${BATCHES:-1,2,4,8,16}
batched=(
  "$models/tinyllama-1.1b|q4_0|w4a8"
  "$models/tinyllama-1.1b|q4_0|q4f16_1"
)
j=0
for row in "${batched[@]}"; do
  IFS='|' read -r model type quant <<< "$row"
  echo "== batched $(basename "$model") llama.cpp $type, oxrelax --quant $quant" >&2
  "$tools/peer-llamacpp" batched "$model" "$type" "$prompt" "$gen" "$batches" > "$out/peer-batched.$j.jsonl"
  "$bin" bench "$model" --quant "$quant" --prompt-len "$prompt" --gen "$gen" --runs 1 \
    --batch "$batches" --json | tail -1 > "$out/ours-batched.$j.json"
  echo "$model|$type|$quant" > "$out/batched-row.$j"
  j=$((j + 1))
done
limits > "$out/limits-after.txt" # the machine's state can drift during a sitting
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

"$py" - "$out" "$i" docs/benchmarks.md "$prompt" "$gen" "$runs" "$j" <<'PY'
import json, os, re, subprocess, sys, time
out, n, doc, prompt, gen, runs, n_batched = sys.argv[1], int(sys.argv[2]), sys.argv[3], *sys.argv[4:]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "unknown CPU")
flags = next((l.split(":", 1)[1].split() for l in open("/proc/cpuinfo") if l.startswith("flags")), [])
isa = [f for f in ("avx2", "avx512f", "avx512_vnni", "avx512_vbmi", "avx512_bf16", "avx512_fp16", "amx_tile") if f in flags]
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True).stdout.strip()
limits = open(os.path.join(out, "limits.txt")).read()
peak = re.search(r"fp32 FMA peak.*= ([0-9.]+) GFLOP/s", limits)
bw = re.search(r"pool \(threads (\d+)\) ([0-9.]+) GB/s", limits)
bw_after = re.search(r"pool \(threads \d+\) ([0-9.]+) GB/s", open(os.path.join(out, "limits-after.txt")).read())
lines = [f"## {cpu}, {os.cpu_count()} cores", "",
         f"Measured {time.strftime('%Y-%m-%d', time.gmtime())} at commit `{commit}`{' (uncommitted changes)' if dirty else ''}; "
         f"ISA: {', '.join(isa) or 'none of note'}; fp32 FMA peak {peak.group(1) if peak else '?'} GFLOP/s, "
         f"read bandwidth {bw.group(2) if bw else '?'} GB/s on {bw.group(1) if bw else '?'} threads before the runs "
         f"and {bw_after.group(1) if bw_after else '?'} GB/s after "
         f"(`oxrelax bench-kernel`). Prompt {prompt} tokens, {gen} generated, median of {runs} runs, all cores. "
         "Ratio: oxrelax / llama.cpp (above 1: oxrelax faster). Weight GB/s: the bytes of every weight "
         "tensor times decode steps per second (an upper bound of what a step streams).", "",
         "| model | llama.cpp | oxrelax | prefill tok/s (llama.cpp / oxrelax) | ratio | decode tok/s (llama.cpp / oxrelax) | ratio | weight GB/s |",
         "|---|---|---|---|---|---|---|---|"]
for i in range(n):
    model, ty, quant = open(os.path.join(out, f"row.{i}")).read().strip().split("|")
    peer = json.load(open(os.path.join(out, f"peer.{i}.json")))
    ours = json.load(open(os.path.join(out, f"ours.{i}.json")))
    name = os.path.basename(model.rstrip("/"))
    ty = "same file" if ty == "file" else ty
    gbs = ours["weights_bytes"] * ours["decode_tok_s"] / 1e9
    lines.append(f"| {name} | {ty} | {quant} | {peer['prefill_tok_s']:.1f} / {ours['prefill_tok_s']:.1f} | "
                 f"{ours['prefill_tok_s'] / peer['prefill_tok_s']:.2f}x | {peer['decode_tok_s']:.1f} / {ours['decode_tok_s']:.1f} | "
                 f"{ours['decode_tok_s'] / peer['decode_tok_s']:.2f}x | {gbs:.1f} |")
lines += ["", f"Sequences decoded together (`oxrelax bench --batch`, one run; `llama-batched-bench`), each "
          f"after its own {prompt}-token prompt, {gen} tokens each: aggregate decode tok/s. oxrelax decodes a "
          "batch of one with its single-sequence GEMV and larger ones with `batch_decode`.", "",
          "| model | llama.cpp | oxrelax | batch | decode tok/s (llama.cpp / oxrelax) | ratio | oxrelax / its batch of 1 |",
          "|---|---|---|---|---|---|---|"]
for j in range(int(n_batched)):
    model, ty, quant = open(os.path.join(out, f"batched-row.{j}")).read().strip().split("|")
    peer = {r["batch"]: r for r in map(json.loads, open(os.path.join(out, f"peer-batched.{j}.jsonl")))}
    ours = {r["batch"]: r for r in json.load(open(os.path.join(out, f"ours-batched.{j}.json")))["batches"]}
    one = ours[min(ours)]["decode_tok_s"]
    for b in sorted(ours):
        p, o = peer[b]["decode_tok_s"], ours[b]["decode_tok_s"]
        lines.append(f"| {os.path.basename(model.rstrip('/'))} | {ty} | {quant} | {b} | {p:.1f} / {o:.1f} | "
                     f"{o / p:.2f}x | {o / one:.2f}x |")
section = "\n".join(lines) + "\n"
text = open(doc).read() if os.path.exists(doc) else ""
head = f"## {cpu}, "
parts = re.split(r"(?m)^(?=## )", text)
kept = [p for p in parts if not p.startswith(head)]
if not kept or kept[0].startswith("## "):
    kept.insert(0, "# Benchmarks\n\n")
kept.insert(1, section + "\n")
open(doc, "w").write("".join(kept).rstrip("\n") + "\n")
print(section)
PY
