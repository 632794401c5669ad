#!/usr/bin/env python3
"""A harness-like conversation through mektpoy-proxy with the official Anthropic Python SDK.

Run by run.sh beside this file (which starts the stand-in and the proxy and installs the SDK):

    python harness.py --proxy URL --standin URL --run ID --out DIR

Like a coding harness, every request re-sends the whole tool list and history, while the tools
churn: an MCP server's two tools connect at step 3, a plugin tool `lint` is disabled at steps 5
and 6 and back at 7, the list comes in reversed order from step 9, a description changes at
step 10, and a compaction replaces the history with a summary at step 11. Every third step
asks the stand-in for a tool call (`x-mektpoy-test-tool-use: read`); the next user message
starts with its `tool_result`. The assistant content sent back is what the SDK returned.

Prints one `RESULT` line per model x mode x target and exits 1 when a request through the
proxy failed (each failure's exact request and response is written under --out). The direct
runs (SDK -> stand-in, no proxy, claude-fable-5-1 only) are informative: their refusals do not
fail the run.
"""

import argparse
import json
import sys
import time
from pathlib import Path

import anthropic

SDK = "python"
MODELS = ["claude-opus-5", "claude-fable-5-1", "deepseek-flash"]
DIRECT_MODELS = ["claude-fable-5-1"]
STEPS = 12
CACHED = "x-standin-cached-bytes"
TOTAL = "x-standin-total-bytes"
CONTENT = "x-standin-content"
SECRET = {"x-api-key", "authorization"}  # left out of the failure records

SYSTEM = [
    {"type": "text", "text": "You are a coding agent. " + "rules " * 300},
    {"type": "text", "text": "Environment: a Rust workspace on Linux. " + "facts " * 40},
]


def tool(name, description):
    return {
        "name": name,
        "description": description,
        "input_schema": {"type": "object", "properties": {"arg": {"type": "string"}}},
    }


def tools_at(i):
    """The harness's tool list at step i (0-based): the churn of a real session."""
    tools = [tool("read", "Read a file"), tool("shell", "Run a command")]
    if not 5 <= i <= 6:
        tools.append(tool("lint", "Lint the tree"))  # a plugin: off at 5 and 6, back at 7
    if i >= 3:  # an MCP server connects
        tools += [tool("mcp__gh__search", "Search issues"), tool("mcp__gh__issue", "Open an issue")]
    if i >= 9:  # the same tools, listed in another order
        tools.reverse()
    if i >= 10:  # a description changes
        for t in tools:
            if t["name"] == "read":
                t["description"] = "Read a file (v2)"
    return tools


def dump_block(block):
    return block.model_dump(mode="json", exclude_unset=True, by_alias=True)


class Failures:
    def __init__(self, out):
        self.dir = Path(out)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.count = 0

    def record(self, label, step, error, params, loud=True):
        self.count += 1
        path = self.dir / f"{SDK}-{label}-step{step}.json"
        record = {"sdk": SDK, "run": label, "step": step, "error": repr(error)}
        response = getattr(error, "response", None)
        if response is not None:
            request = response.request
            record["request"] = {
                "method": request.method,
                "url": str(request.url),
                "headers": {k: v for k, v in request.headers.items() if k.lower() not in SECRET},
                "body": _json_or_text(request.content),
            }
            record["response"] = {
                "status": response.status_code,
                "headers": dict(response.headers.items()),
                "body": _json_or_text(response.content),
            }
        else:
            record["params"] = json.loads(json.dumps(params, default=_default))
        path.write_text(json.dumps(record, indent=2))
        status = record.get("response", {}).get("status", "-")
        body = record.get("response", {}).get("body", str(error))
        if loud:
            kind = "REFUSED" if label.startswith("direct") else "FAIL"
            print(f"{kind} {SDK} {label} step {step}: {status} {json.dumps(body)[:600]} ({path})",
                  file=sys.stderr)


def _default(o):
    if hasattr(o, "model_dump"):
        return dump_block(o)
    return str(o)


def _json_or_text(raw):
    try:
        text = raw.decode() if isinstance(raw, (bytes, bytearray)) else raw
    except UnicodeDecodeError:
        return repr(raw)
    try:
        return json.loads(text)
    except ValueError:
        return text


def conversation(client, session, model, stream, failures, label, expected=False):
    """Runs the 12 steps; returns the figures."""
    history, pending = [], []
    out = {"requests": 0, "refused": 0, "cached": 0, "total": 0, "mismatch": 0}
    for i in range(STEPS):
        if i == 11:
            # A compaction: the client replaces its history with a summary.
            history = [
                {"role": "user", "content": "Summary of the work so far: steps 0 to 10."},
                {"role": "assistant", "content": [{"type": "text", "text": "Understood."}]},
            ]
            pending = []
        user = pending + [{"type": "text", "text": f"step {i}: go on. " + "context " * 40}]
        pending = []
        history.append({"role": "user", "content": user})
        headers = {
            "x-mektpoy-session": session,
            # The stand-in keys its state (its cache, its thinking signatures) by this header,
            # else by the API key: one per conversation, as the proxy keys by the one above.
            "x-mektpoy-test-session": session,
        }
        if i % 3 == 2:
            headers["x-mektpoy-test-tool-use"] = "read"
        params = dict(
            model=model,
            max_tokens=256,
            system=SYSTEM,
            tools=tools_at(i),
            messages=list(history),
            extra_headers=headers,
        )
        out["requests"] += 1
        try:
            if stream:
                with client.messages.stream(**params) as s:
                    message = s.get_final_message()
                    response_headers = s.response.headers
            else:
                raw = client.messages.with_raw_response.create(**params)
                response_headers = raw.headers
                message = raw.parse()
        except anthropic.APIError as e:
            out["refused"] += 1
            # Direct refusals are expected (and shown once); through the proxy, none is.
            failures.record(label, i, e, params, loud=not expected or out["refused"] == 1)
            history.pop()
            pending = [b for b in user if b.get("type") == "tool_result"]
            continue
        out["cached"] += int(response_headers.get(CACHED, "0"))
        out["total"] += int(response_headers.get(TOTAL, "0"))
        announced = json.loads(response_headers.get(CONTENT, "null"))
        if announced != [dump_block(b) for b in message.content]:
            out["mismatch"] += 1
            print(f"NOTE {SDK} {label} step {i}: the SDK's content differs from the stand-in's: "
                  f"{json.dumps([dump_block(b) for b in message.content])[:400]} vs "
                  f"{json.dumps(announced)[:400]}", file=sys.stderr)
        pending = [
            {"type": "tool_result", "tool_use_id": b.id, "content": "file contents"}
            for b in message.content
            if b.type == "tool_use"
        ]
        # Exactly what the SDK returned (thinking blocks included).
        history.append({"role": "assistant", "content": message.content})
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--proxy", required=True)
    p.add_argument("--standin", required=True)
    p.add_argument("--run", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    failures = Failures(args.out)
    proxied_failures = 0
    for target, base, models in [
        ("proxy", args.proxy, MODELS),
        ("direct", args.standin, DIRECT_MODELS),
    ]:
        client = anthropic.Anthropic(api_key="sk-test", base_url=base, max_retries=0, timeout=60)
        for model in models:
            for mode in ["create", "stream"]:
                label = f"{target}-{model}-{mode}"
                session = f"{args.run}-{SDK}-{label}"
                before = failures.count
                start = time.monotonic()
                r = conversation(
                    client, session, model, mode == "stream", failures, label, target == "direct"
                )
                if target == "proxy":
                    proxied_failures += failures.count - before
                print(
                    f"RESULT sdk={SDK} target={target} model={model} mode={mode} "
                    f"requests={r['requests']} refused={r['refused']} "
                    f"cached_bytes={r['cached']} total_bytes={r['total']} "
                    f"content_mismatch={r['mismatch']} seconds={time.monotonic() - start:.1f}",
                    flush=True,
                )
    return 1 if proxied_failures else 0


if __name__ == "__main__":
    sys.exit(main())
