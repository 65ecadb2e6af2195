#!/usr/bin/env bash
# End to end on aarch64 under qemu-user: tiny-qwen2 compiled for aarch64-unknown-linux-gnu
# and run by an aarch64 `oxrelax-run` (the runtime alone).
# - f32 (NEON microkernels) matches transformers within 1e-4 with its greedy ids.
# - w4a8, w8a8 and q4f16_1, with `+dotprod,+i8mm` (the NEON smmla prefill and sdot decode
#   int8 kernels), `+dotprod` (sdot only) and without (the scalar twins), generate the ids this host generates for the scheme, with logits
#   compared loosely (prefill 0.1, decode 1e-3): kernels may round f32 differently (sums
#   of codes or of bytes minus corrections, other summation orders), which int8
#   activations can turn into a code one step off and prefill logits 1e-2 apart. Each
#   kernel against its scalar twin is the runtime's aarch64 unit tests' job.
# Needs qemu-aarch64, aarch64-linux-gnu-gcc and the rustup target (.ci/run installs them)
# and ../shared beside the repository. Run from the repository root.
set -euo pipefail
fx=../shared/fixtures/models/tiny-qwen2
compare=../shared/tools/safetensors_compare.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The host binaries with the features the test suite builds (its dev-dependencies' too), so
# after `cargo test --workspace` nothing but the binaries is linked.
cargo build -q --workspace --all-targets
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
for quant in w4a8 w8a8 q4f16_1; do
  for features in +dotprod,+i8mm +dotprod +neon; do
    "$oxrelax" compile "$fx" --quant "$quant" --target aarch64-unknown-linux-gnu --target-features "$features" \
      -o "$tmp/arm$features" >/dev/null
    generate "$arm_run" "$tmp/arm$features" 2 "$tmp/arm$features.safetensors"
  done
  "$oxrelax" compile "$fx" --quant "$quant" -o "$tmp/host" >/dev/null
  generate "$host_run" "$tmp/host" 2 "$tmp/host.safetensors"
  for features in +dotprod,+i8mm +dotprod +neon; do
    python3 "$compare" "$tmp/arm$features.safetensors" "$tmp/host.safetensors" \
      prefill_logits=prefill_logits:0.1 decode_logits=decode_logits:1e-3 generated_ids=generated_ids
  done
done
echo "aarch64 artifacts under qemu: all match"
