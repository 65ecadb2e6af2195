#!/usr/bin/env bash
# The `openai` Python package against `oxrelax serve` on loopback: compiles the tiny Llama
# fixture, starts the server on a free port, runs tests/serve/openai_client.py (greedy
# completions equal `oxrelax generate`, streaming, chat, errors, an 8x20 load test with
# latency, tokens/s and memory), then stops the server with SIGTERM and expects exit 0.
# The venv lives in target/serve-venv. OXRELAX_BIN runs that binary instead of building
# one (CI passes the one its tests built).
set -euo pipefail
cd "$(dirname "$0")/../.."
shared=${SHARED:-../shared}
bin=${OXRELAX_BIN:-}
if [ -z "$bin" ]; then
  cargo build -q -p oxrelax
  bin=target/debug/oxrelax
fi
venv=target/serve-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -c "import openai" 2>/dev/null || "$venv/bin/pip" install -q openai

tmp=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
"$bin" compile "$shared/fixtures/models/tiny-llama" -o "$tmp/tiny-llama" >/dev/null
want=$("$bin" generate --model "$tmp/tiny-llama" --prompt "To be, or not to be" \
  --max-new-tokens 24 --json 2>/dev/null | python3 -c 'import json, sys; print(json.load(sys.stdin)["text"])')

"$bin" serve "$tmp/tiny-llama" --host 127.0.0.1 --port 0 2>"$tmp/serve.log" &
pid=$!
url=
for _ in $(seq 600); do
  url=$(grep -o 'http://[0-9.:]*' "$tmp/serve.log" | head -1) && [ -n "$url" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$tmp/serve.log"; exit 1; }
  sleep 0.1
done
[ -n "$url" ] || { echo "the server did not start"; cat "$tmp/serve.log"; exit 1; }

status=0
"$venv/bin/python" tests/serve/openai_client.py "$url/v1" "$pid" "$want" || status=$?
kill -TERM "$pid"
served=0
wait "$pid" || served=$?
pid=
echo "server: $(grep -c ': prompt' "$tmp/serve.log") requests logged, exit status $served after SIGTERM"
[ "$status" -eq 0 ] && [ "$served" -eq 0 ] || { tail -5 "$tmp/serve.log"; exit 1; }
