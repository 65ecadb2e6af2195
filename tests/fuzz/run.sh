#!/usr/bin/env bash
# Runs every fuzz target (or those named) for EXECUTIONS inputs each (default 1000000)
# and prints, per target, the executions libFuzzer reports and whether it crashed.
#
#   tests/fuzz/run.sh [EXECUTIONS] [TARGET...]
#
# Installs cargo-fuzz when it is missing (`cargo install cargo-fuzz --locked`) and builds
# with the project's toolchain and RUSTC_BOOTSTRAP=1 (libFuzzer's instrumentation and
# AddressSanitizer take unstable flags; the sanitizer runtimes ship with every channel). Each target's corpus
# (tests/fuzz/corpus/<target>, not committed) is seeded from tests/fuzz/seeds and from
# small real files of the repository. MAX_TIME (seconds, default 3600) caps each target's
# run as a safety net; a crash leaves its input in tests/fuzz/artifacts/<target>.
set -uo pipefail

fuzz_dir=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$fuzz_dir/../.." && pwd)
runs=${1:-1000000}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(safetensors gguf config ir_text manifest tokenizer chat_template npu_net)
max_time=${MAX_TIME:-3600}

# Largest input per target: room for the seeds, small enough to keep iterations fast.
max_len() {
    case $1 in
        ir_text) echo 8192 ;;
        npu_net) echo 40960 ;;
        *) echo 4096 ;;
    esac
}

# Copies the seeds of target $1 into its corpus.
seed() {
    local target=$1 corpus=$fuzz_dir/corpus/$1
    mkdir -p "$corpus"
    [ -d "$fuzz_dir/seeds/$target" ] && cp "$fuzz_dir/seeds/$target"/* "$corpus/"
    local fixtures=("$root"/../shared/fixtures/models/*/)
    case $target in
        config)
            cp "$root/models/assets/tiny-llama/config.json" "$corpus/tiny-llama.json"
            for dir in "${fixtures[@]}"; do
                [ -f "$dir/config.json" ] && cp "$dir/config.json" "$corpus/$(basename "$dir").json"
            done
            ;;
        ir_text)
            # Snapshots of IR text, without insta's header, small enough for max_len.
            for snap in "$root"/snapshots/*.snap; do
                [ "$(stat -c %s "$snap")" -le 8192 ] || continue
                awk 'header < 2 { if ($0 == "---") header++; next } { print }' "$snap" \
                    > "$corpus/$(basename "$snap" .snap).txt"
            done
            ;;
        chat_template)
            for config in "$root"/models/assets/*/tokenizer_config.json "${fixtures[@]/%/tokenizer_config.json}"; do
                [ -f "$config" ] || continue
                python3 -c 'import json, sys; t = json.load(open(sys.argv[1])).get("chat_template"); t and sys.stdout.write(t if isinstance(t, str) else t[0]["template"])' \
                    "$config" > "$corpus/$(basename "$(dirname "$config")").jinja"
            done
            ;;
    esac
}

mkdir -p "$fuzz_dir/logs"
cd "$root" || exit 1
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked || exit 1
fi
export RUSTC_BOOTSTRAP=1
cargo fuzz build --fuzz-dir tests/fuzz || exit 1
status=0
summary=()
for target in "${targets[@]}"; do
    seed "$target"
    log=$fuzz_dir/logs/$target.log
    cargo fuzz run --fuzz-dir tests/fuzz "$target" -- \
        -runs="$runs" -max_len="$(max_len "$target")" -max_total_time="$max_time" \
        -timeout=10 -print_final_stats=1 > "$log" 2>&1
    code=$?
    done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1 | awk '{print $1}')
    executed=$(grep -E '^stat::number_of_executed_units:' "$log" | tail -1 | awk '{print $2}')
    if [ $code -eq 0 ]; then
        result="no crash"
    else
        result="CRASHED (exit $code, see $log and tests/fuzz/artifacts/$target)"
        status=1
    fi
    summary+=("$(printf '%-14s %12s executions (%s)  %s' "$target" "${executed:-?}" "${done_line:-no DONE line}" "$result")")
    echo "${summary[-1]}"
done
echo
echo "summary ($runs executions asked per target):"
printf '%s\n' "${summary[@]}"
exit $status
