#!/usr/bin/env python3
"""A harness-like chat completions conversation through mektpoy-proxy with the official OpenAI
Python SDK (`openai`), the chat twin of harness.py beside it.

Run by run.sh beside this file (which starts the stand-in and the proxy, the proxy with
`--upstream openai-compatible=<stand-in>`, and installs the SDK):

    python harness_chat.py --proxy URL --standin URL --run ID --out DIR

The client is `openai.OpenAI(base_url=<URL>/v1, api_key="sk-test")` on `deepseek-v4-pro`. As in
harness.py, every request re-sends the whole tool list (function tools) and history while the
tools churn: an MCP server's two tools connect at step 3, a plugin tool `lint` is disabled at
steps 5 and 6 and back at 7, the list comes in reversed order from step 9, a description changes
at step 10, and a compaction replaces the history with a summary at step 11. The system prompt is
the first `system` message. Every third step asks the stand-in for a tool call
(`x-mektpoy-test-tool-use: read`); the next request answers it with a `tool` message before the
user's words. `create` sends the SDK's own assistant message back; `stream` (`stream: true`,
`stream_options.include_usage`) rebuilds it (content and tool_calls) from the chunks.

Prints one `RESULT` line per mode x target and exits 1 when a request through the proxy failed
(each failure's exact request and response is written under --out). The direct runs (SDK ->
stand-in, no proxy) are informative: their refusals do not fail the run.
"""

import argparse
import json
import sys
import time
from pathlib import Path

import openai

SDK = "python-openai"
MODELS = ["deepseek-v4-pro"]
STEPS = 12
CACHED = "x-standin-cached-bytes"
TOTAL = "x-standin-total-bytes"
CONTENT = "x-standin-content"
SECRET = {"x-api-key", "authorization"}  # left out of the failure records

SYSTEM = (
    "You are a coding agent. " + "rules " * 300
    + "\n\nEnvironment: a Rust workspace on Linux. " + "facts " * 40
)


def tool(name, description):
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": {"arg": {"type": "string"}}},
        },
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
            if t["function"]["name"] == "read":
                t["function"]["description"] = "Read a file (v2)"
    return tools


def dump(o):
    if hasattr(o, "model_dump"):
        return o.model_dump(mode="json", exclude_unset=True, by_alias=True)
    return o


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
            try:
                body = _json_or_text(response.content)
            except Exception:  # a stream cut off: its body was already read in part
                body = None
            record["response"] = {
                "status": response.status_code,
                "headers": dict(response.headers.items()),
                "body": body,
            }
        if response is None or response.status_code < 300:
            record["params"] = json.loads(json.dumps(params, default=_default))
        path.write_text(json.dumps(record, indent=2))
        status = record.get("response", {}).get("status", "-")
        body = record.get("response", {}).get("body") or str(error)
        if loud:
            kind = "REFUSED" if label.startswith("direct") else "FAIL"
            print(f"{kind} {SDK} {label} step {step}: {status} {json.dumps(body)[:600]} ({path})",
                  file=sys.stderr)


def _default(o):
    if hasattr(o, "model_dump"):
        return dump(o)
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


def rebuild(stream):
    """The assistant message and the usage, from the chunks, as a client rebuilds them."""
    role, content, calls, usage = None, [], {}, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            delta = choice.delta
            if delta.role:
                role = delta.role
            if delta.content:
                content.append(delta.content)
            for part in delta.tool_calls or []:
                call = calls.setdefault(
                    part.index,
                    {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                )
                if part.id:
                    call["id"] = part.id
                if part.type:
                    call["type"] = part.type
                if part.function is not None:
                    call["function"]["name"] += part.function.name or ""
                    call["function"]["arguments"] += part.function.arguments or ""
    message = {"role": role or "assistant", "content": "".join(content) or None}
    if calls:
        message["tool_calls"] = [calls[k] for k in sorted(calls)]
    return message, usage


def conversation(client, session, model, stream, failures, label, expected=False):
    """Runs the 12 steps; returns the figures."""
    history = [{"role": "system", "content": SYSTEM}]
    pending = []  # the tool messages answering the last answer's calls
    out = {"requests": 0, "refused": 0, "cached": 0, "total": 0, "mismatch": 0, "usage_cached": 0}
    for i in range(STEPS):
        if i == 11:
            # A compaction: the client replaces its history with a summary.
            history = [
                history[0],
                {"role": "user", "content": "Summary of the work so far: steps 0 to 10."},
                {"role": "assistant", "content": "Understood."},
            ]
            pending = []
        turn = pending + [
            {"role": "user", "content": f"step {i}: go on. " + "context " * 40}
        ]
        headers = {
            "x-mektpoy-session": session,
            # The stand-in keys its state (its cache) by this header, else by the API key: one
            # per conversation, as the proxy keys by the one above.
            "x-mektpoy-test-session": session,
        }
        if i % 3 == 2:
            headers["x-mektpoy-test-tool-use"] = "read"
        params = dict(
            model=model,
            max_tokens=256,
            tools=tools_at(i),
            messages=history + turn,
            extra_headers=headers,
        )
        if stream:
            params.update(stream=True, stream_options={"include_usage": True})
        out["requests"] += 1
        try:
            raw = client.chat.completions.with_raw_response.create(**params)
            response_headers = raw.headers
            if stream:
                message, usage = rebuild(raw.parse())
                sent_back = message
            else:
                completion = raw.parse()
                usage = completion.usage
                # The SDK's own message object, sent back as is (as OpenAI's guide does).
                sent_back = completion.choices[0].message
                message = dump(sent_back)
        except openai.APIError as e:
            out["refused"] += 1
            # Direct refusals are expected (and shown once); through the proxy, none is.
            failures.record(label, i, e, params, loud=not expected or out["refused"] == 1)
            pending = turn[:-1]
            continue
        out["cached"] += int(response_headers.get(CACHED, "0"))
        out["total"] += int(response_headers.get(TOTAL, "0"))
        details = getattr(usage, "prompt_tokens_details", None) if usage else None
        out["usage_cached"] += (getattr(details, "cached_tokens", 0) or 0) if details else 0
        announced = json.loads(response_headers.get(CONTENT, "null"))
        if announced != message:
            out["mismatch"] += 1
            print(f"NOTE {SDK} {label} step {i}: the SDK's message differs from the stand-in's: "
                  f"{json.dumps(message)[:400]} vs {json.dumps(announced)[:400]}", file=sys.stderr)
        history += turn
        history.append(sent_back)
        pending = [
            {"role": "tool", "tool_call_id": c["id"], "content": "file contents"}
            for c in message.get("tool_calls") or []
        ]
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
    for target, base in [("proxy", args.proxy), ("direct", args.standin)]:
        client = openai.OpenAI(
            api_key="sk-test", base_url=f"{base}/v1", max_retries=0, timeout=60
        )
        for model in MODELS:
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
                    f"content_mismatch={r['mismatch']} usage_cached_tokens={r['usage_cached']} "
                    f"seconds={time.monotonic() - start:.1f}",
                    flush=True,
                )
    return 1 if proxied_failures else 0


if __name__ == "__main__":
    sys.exit(main())
