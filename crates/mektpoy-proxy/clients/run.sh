#!/usr/bin/env bash
# The official Anthropic SDKs (Python `anthropic`, TypeScript `@anthropic-ai/sdk`) and OpenAI
# SDKs (Python `openai`, npm `openai`) through mektpoy-proxy against the loopback stand-in: a
# harness-like conversation (harness.py, harness.mjs beside this file) on claude-opus-5,
# claude-fable-5-1 and deepseek-flash, with messages.create and messages.stream; and its chat
# completions twin (harness_chat.py, harness_chat.mjs) on deepseek-v4-pro (the openai-compatible
# upstream), with chat.completions.create, without and with `stream: true`. Each conversation
# also goes straight to the stand-in, for comparison. Then the Responses API bodies the crate
# writes (tests/responses_loop.rs) are checked against both `openai` SDKs' ResponseCreateParams
# (responses_types.py: pydantic TypeAdapter; responses_types.mjs: tsc --strict), and a
# Codex-like conversation goes through the proxy's POST /v1/responses with the Python SDK's
# client.responses.create (harness_responses.py, gpt-5.4, without and with `stream=True`; then
# Codex's own shapes on gpt-5.5-codex: custom, local_shell and web_search tools, custom and local
# shell calls, phase, a developer message mid-way), and the real Codex CLI (`codex exec`,
# @openai/codex pinned, codex_cli.sh) runs against the proxy. Exits non-zero if any request
# through the proxy fails or the SDKs' types refuse a body.
#
#   bash crates/mektpoy-proxy/clients/run.sh        (from anywhere)
#
# Builds the two binaries (debug), installs the SDKs once under target/clients/ (from PyPI and
# the npm registry; MEKTPOY_CLIENTS_REFRESH=1 reinstalls them), starts the stand-in and the
# proxy on ports the OS picks (store in a temporary folder), and stops both at exit. Each
# refused request (the expected direct ones too) is kept with its response under
# target/clients/last-run/failures/, and both programs' logs under target/clients/last-run/.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
cd "$root"

echo "== building mektpoy-proxy and mektpoy-standin"
cargo build -p mektpoy-proxy -p mektpoy-standin
echo "built in ${SECONDS}s"
target="$(cargo metadata -q --format-version 1 --no-deps |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
bin="$target/debug"
clients="$target/clients"
mkdir -p "$clients"

echo "== installing the SDKs (cached in $clients)"
venv="$clients/venv"
pkg_version='import importlib.metadata, sys; print(importlib.metadata.version(sys.argv[1]))'
if [[ "${MEKTPOY_CLIENTS_REFRESH:-0}" == 1 ]] || ! "$venv/bin/python" -c "$pkg_version" anthropic >/dev/null 2>&1; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check anthropic openai
elif ! "$venv/bin/python" -c "$pkg_version" openai >/dev/null 2>&1; then
  "$venv/bin/pip" install -q --disable-pip-version-check openai
fi
npm_dir="$clients/npm"
sdk_pkg="$npm_dir/node_modules/@anthropic-ai/sdk/package.json"
openai_pkg="$npm_dir/node_modules/openai/package.json"
if [[ "${MEKTPOY_CLIENTS_REFRESH:-0}" == 1 ]] || [[ ! -f "$sdk_pkg" ]]; then
  rm -rf "$npm_dir"
  mkdir -p "$npm_dir"
  echo '{"name": "mektpoy-clients", "private": true}' >"$npm_dir/package.json"
  (cd "$npm_dir" && npm install --silent --no-audit --no-fund @anthropic-ai/sdk openai typescript)
elif [[ ! -f "$openai_pkg" ]]; then
  (cd "$npm_dir" && npm install --silent --no-audit --no-fund openai typescript)
elif [[ ! -x "$npm_dir/node_modules/.bin/tsc" ]]; then
  (cd "$npm_dir" && npm install --silent --no-audit --no-fund typescript)
fi
# The Codex CLI, pinned: its config keys and request shapes change between releases.
codex_version=0.171.0
codex_bin="$npm_dir/node_modules/.bin/codex"
if [[ ! -x "$codex_bin" ]] || [[ "$("$codex_bin" --version 2>/dev/null)" != "codex-cli $codex_version" ]]; then
  (cd "$npm_dir" && npm install --silent --no-audit --no-fund "@openai/codex@$codex_version")
fi
python_is="on Python $("$venv/bin/python" -c 'import platform; print(platform.python_version())')"
py_version="$("$venv/bin/python" -c "$pkg_version" anthropic) $python_is"
py_openai_version="$("$venv/bin/python" -c "$pkg_version" openai) $python_is"
npm_version='const p = JSON.parse(require("fs").readFileSync(process.argv[1])); console.log(p.version, "on Node", process.versions.node)'
ts_version="$(node -e "$npm_version" "$sdk_pkg")"
ts_openai_version="$(node -e "$npm_version" "$openai_pkg")"
echo "python anthropic $py_version"
echo "python openai $py_openai_version"
echo "npm @anthropic-ai/sdk $ts_version"
echo "npm openai $ts_openai_version"
echo "ready at ${SECONDS}s"

work="$(mktemp -d)"
last="$clients/last-run"
rm -rf "$last"
mkdir -p "$last/failures"
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  cp "$work"/*.log "$last/" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# Starts a program that prints `NAME listening on http://ADDR` as its first stdout line; sets
# `url` to that address.
start() {
  local name="$1"
  shift
  : >"$work/$name.out"
  "$@" >"$work/$name.out" 2>"$work/$name.log" &
  pids+=("$!")
  local i line
  for ((i = 0; i < 100; i++)); do
    line="$(head -n 1 "$work/$name.out" 2>/dev/null || true)"
    if [[ "$line" =~ listening\ on\ (http://[^[:space:]]+) ]]; then
      url="${BASH_REMATCH[1]}"
      return 0
    fi
    if ! kill -0 "${pids[-1]}" 2>/dev/null; then
      break
    fi
    sleep 0.1
  done
  echo "run.sh: $name did not start:" >&2
  cat "$work/$name.log" >&2
  exit 1
}

start mektpoy-standin "$bin/mektpoy-standin" --listen 127.0.0.1:0
standin="$url"
start mektpoy-proxy "$bin/mektpoy-proxy" --listen 127.0.0.1:0 \
  --upstream "anthropic=$standin" --upstream "deepseek=$standin" \
  --upstream "openai-compatible=$standin" --upstream "openai=$standin/v1" \
  --store "sqlite:$work/proxy.db"
proxy="$url"
echo "stand-in $standin, proxy $proxy"

run="run-$(date +%s)-$$"
results="$work/results"
status=0
echo "== python SDK"
"$venv/bin/python" "$here/harness.py" --proxy "$proxy" --standin "$standin" --run "$run" \
  --out "$last/failures" | tee -a "$results" || status=1
echo "== typescript SDK"
MEKTPOY_NPM_DIR="$npm_dir" node "$here/harness.mjs" --proxy "$proxy" --standin "$standin" \
  --run "$run" --out "$last/failures" | tee -a "$results" || status=1
echo "== python openai SDK (chat completions)"
"$venv/bin/python" "$here/harness_chat.py" --proxy "$proxy" --standin "$standin" --run "$run" \
  --out "$last/failures" | tee -a "$results" || status=1
echo "== typescript openai SDK (chat completions)"
MEKTPOY_NPM_DIR="$npm_dir" node "$here/harness_chat.mjs" --proxy "$proxy" --standin "$standin" \
  --run "$run" --out "$last/failures" | tee -a "$results" || status=1
echo "== python openai SDK (responses.create, through the proxy)"
"$venv/bin/python" "$here/harness_responses.py" --proxy "$proxy" --run "$run" || status=1
echo "== the Codex CLI $codex_version (codex exec, through the proxy)"
bash "$here/codex_cli.sh" "$proxy" "$codex_bin" "$work" || status=1
echo "== the Responses bodies the crate writes, against both openai SDKs' types"
bodies="$work/responses-bodies"
mkdir -p "$bodies"
MEKTPOY_RESPONSES_BODIES="$bodies" cargo test -q -p mektpoy --test responses_loop >/dev/null || status=1
"$venv/bin/python" "$here/responses_types.py" "$bodies" || status=1
node "$here/responses_types.mjs" "$bodies" "$npm_dir" || status=1

echo
echo "== summary (python anthropic $py_version; @anthropic-ai/sdk $ts_version;"
echo "   python openai $py_openai_version; npm openai $ts_openai_version)"
python3 - "$results" <<'EOF' || status=1
import sys
rows = [dict(f.split("=", 1) for f in line.split()[1:]) for line in open(sys.argv[1]) if line.startswith("RESULT ")]
print(f"{'sdk':<19}{'target':<8}{'model':<18}{'mode':<8}{'requests':>9}{'refused':>9}{'cached bytes':>14}{'of bytes':>10}")
for r in rows:
    print(f"{r['sdk']:<19}{r['target']:<8}{r['model']:<18}{r['mode']:<8}{r['requests']:>9}{r['refused']:>9}"
          f"{r['cached_bytes']:>14}{r['total_bytes']:>10}")
proxied = [r for r in rows if r["target"] == "proxy"]
direct = [r for r in rows if r["target"] == "direct"]
print(f"through the proxy: {sum(int(r['requests']) for r in proxied)} requests in {len(proxied)} runs, "
      f"{sum(int(r['refused']) for r in proxied)} refused")
for model in dict.fromkeys(r["model"] for r in direct):
    runs = [r for r in direct if r["model"] == model]
    print(f"direct to the stand-in ({model}, informative): "
          f"{sum(int(r['refused']) for r in runs)} of {sum(int(r['requests']) for r in runs)} requests refused, "
          f"{sum(int(r['cached_bytes']) for r in runs)} of {sum(int(r['total_bytes']) for r in runs)} bytes cached")
chat = [r for r in proxied if r["model"] == "deepseek-v4-pro"]
print(f"chat completions through the proxy (deepseek-v4-pro): "
      f"{sum(int(r['cached_bytes']) for r in chat)} of {sum(int(r['total_bytes']) for r in chat)} bytes cached")
if len(proxied) != 16:
    print(f"run.sh: {len(proxied)} proxied runs reported, 16 expected", file=sys.stderr)
    sys.exit(1)
EOF
if ((status != 0)); then
  cp "$work"/*.log "$last/" 2>/dev/null || true
  echo "run.sh: FAILED: a request through the proxy failed; requests and responses in $last/failures" >&2
  exit 1
fi
echo "run.sh: OK: no request refused through the proxy (${SECONDS}s in all)"
