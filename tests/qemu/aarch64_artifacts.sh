#!/usr/bin/env bash
# End to end on aarch64 under qemu-user: tiny-qwen2 compiled for aarch64-unknown-linux-gnu
# (f32, and the w4a8 and q4f16_1 schemes), run by an aarch64 `oxrelax-run` (the runtime
# alone), matches transformers within 1e-4 (f32), or (quantized) the same scheme's
# artifact run on this host with the microkernels aarch64 runs for it: the scalar twins
# (int8 activations round to the nearest code, so a 1e-6 difference between two
# microkernels can move a code by one and the logits by 1e-2: kernels are compared with
# the same kernels). Needs qemu-aarch64, aarch64-linux-gnu-gcc and the rustup target
# (.ci/run installs them) and ../shared beside the repository. Run from the repository root.
set -euo pipefail
fx=../shared/fixtures/models/tiny-qwen2
compare=../shared/tools/safetensors_compare.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cargo build -q -p oxrelax -p oxrelax-runtime --bin oxrelax --bin oxrelax-run
CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
  cargo build -q -p oxrelax-runtime --bin oxrelax-run --target aarch64-unknown-linux-gnu
oxrelax=target/debug/oxrelax
host_run=target/debug/oxrelax-run
arm_run="qemu-aarch64 -L /usr/aarch64-linux-gnu target/aarch64-unknown-linux-gnu/debug/oxrelax-run"

# generate RUNNER ARTIFACT PROMPT OUT: 17 greedy tokens of prompt PROMPT, logits to OUT.
generate() {
  local ids
  ids=$(python3 -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['prompts'][int(sys.argv[2])]['input_ids'])))" "$fx/reference.json" "$3")
  $1 generate --model "$2" --prompt-ids "$ids" --max-new-tokens 17 --ignore-eos --dump-logits "$4" >/dev/null
}

"$oxrelax" compile "$fx" --target aarch64-unknown-linux-gnu -o "$tmp/f32" >/dev/null
file "$tmp/f32/kernels.so" | grep -q 'ARM aarch64'
for p in 0 1 2; do
  generate "$arm_run" "$tmp/f32" "$p" "$tmp/out.safetensors"
  python3 "$compare" "$tmp/out.safetensors" "$fx/reference.safetensors" \
    "prefill_logits=prompt$p.prefill_logits:1e-4" "decode_logits[0:16]=prompt$p.decode_logits:1e-4" \
    "generated_ids[0:16]=prompt$p.greedy_ids"
done
for quant in w4a8 q4f16_1; do
  "$oxrelax" compile "$fx" --quant "$quant" --target aarch64-unknown-linux-gnu -o "$tmp/arm-$quant" >/dev/null
  "$oxrelax" compile "$fx" --quant "$quant" --target-features +sse4.1 -o "$tmp/host-$quant" >/dev/null
  generate "$arm_run" "$tmp/arm-$quant" 2 "$tmp/arm.safetensors"
  generate "$host_run" "$tmp/host-$quant" 2 "$tmp/host.safetensors"
  python3 "$compare" "$tmp/arm.safetensors" "$tmp/host.safetensors" \
    prefill_logits=prefill_logits:1e-4 decode_logits=decode_logits:1e-4 generated_ids=generated_ids
done
echo "aarch64 artifacts under qemu: all match"
