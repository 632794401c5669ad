#!/usr/bin/env bash
# The real Codex CLI (`codex exec`, npm @openai/codex, version pinned in run.sh) through
# mektpoy-proxy's POST /v1/responses against the loopback stand-in (decisions 139 to 142).
#
#   codex_cli.sh PROXY_URL CODEX_BIN WORK_DIR
#
# A private CODEX_HOME holds a config.toml whose `model_providers` entry has `base_url` the
# proxy and `wire_api = "responses"`, with retries, update checks and analytics off. Three runs,
# each bounded by `timeout`: a one-turn `exec`, an `exec resume --last` of that thread (its
# second request must read the first from the cache), and an `exec` where the stand-in answers
# every request with a call of Codex's `apply_patch` custom tool (a patch Codex cannot apply, so
# it goes on until the timeout: every one of its requests must be accepted). Prints one
# `CODEX` line; exits 1 when a run failed or a request through the proxy was refused.
set -euo pipefail

proxy="$1"
codex="$2"
work="$3"
home="$work/codex-home"
repo="$work/codex-repo"
mkdir -p "$home" "$repo"

config() {
  cat >"$home/config.toml" <<EOF
model = "gpt-5.5-codex"
model_provider = "mektpoy"
check_for_update_on_startup = false

[model_providers.mektpoy]
name = "mektpoy-proxy"
base_url = "$proxy/v1"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
http_headers = { "x-mektpoy-test-session" = "codex-cli"$1 }

[analytics]
enabled = false

[otel]
exporter = "none"
EOF
}

# A counter of the proxy's /metrics (0 when absent).
metric() {
  curl -s "$proxy/metrics" | awk -v name="$1" 'index($0, name) == 1 { sum += $NF } END { print sum + 0 }'
}

exec_codex() {
  (cd "$repo" && CODEX_HOME="$home" OPENAI_API_KEY=sk-codex-cli timeout "$1" "$codex" exec \
    --skip-git-repo-check "${@:2}" </dev/null >>"$work/codex.out" 2>>"$work/codex.log")
}

status=0
before_ok="$(metric 'mektpoy_proxy_requests_total{api="responses",status="200"}')"
before_all="$(metric 'mektpoy_proxy_requests_total{api="responses"')"
config ""
exec_codex 120 "say ok" || { echo "codex_cli.sh: codex exec failed" >&2; status=1; }
cached_before="$(metric 'mektpoy_proxy_cached_tokens_total')"
exec_codex 120 resume --last "and again" || { echo "codex_cli.sh: codex exec resume failed" >&2; status=1; }
cached_resume=$(($(metric 'mektpoy_proxy_cached_tokens_total') - cached_before))
if ((cached_resume == 0)); then
  echo "codex_cli.sh: the resumed thread read nothing from the cache" >&2
  status=1
fi
config ', "x-mektpoy-test-tool-use" = "apply_patch"'
exec_codex 20 "fix a.txt" || [[ $? == 124 ]] || { echo "codex_cli.sh: codex exec (apply_patch) failed" >&2; status=1; }
ok=$(($(metric 'mektpoy_proxy_requests_total{api="responses",status="200"}') - before_ok))
all=$(($(metric 'mektpoy_proxy_requests_total{api="responses"') - before_all))
patches="$(grep -c 'apply_patch verification failed' "$work/codex.log" || true)"
version="$("$codex" --version)"
echo "CODEX cli=\"$version\" requests=$all refused=$((all - ok)) resume_cached_tokens=$cached_resume apply_patch_calls=$patches"
if ((all == 0 || all != ok || patches == 0)); then
  echo "codex_cli.sh: requests refused or no custom call made; see $work/codex.log" >&2
  status=1
fi
exit "$status"
