#!/usr/bin/env python3
"""A Codex-like Responses conversation through mektpoy-proxy with the official OpenAI Python SDK
(`client.responses.create`), the Responses twin of harness_chat.py beside it, kept short.

Run by run.sh beside this file (the proxy with `--upstream openai=<stand-in>/v1`):

    python harness_responses.py --proxy URL --run ID

The client is `openai.OpenAI(base_url=<URL>/v1, api_key="sk-test")` on `gpt-5.4`, with
`store=False` and `include=["reasoning.encrypted_content"]`, as Codex sends. Every request
re-sends the whole input (the answer's output items as the SDK returns them, reasoning
included) and the whole tool list, which gains two tools at step 3 and loses one at step 5.
Every third step asks the stand-in for a tool call, answered with a `function_call_output`.
Without and with `stream=True` (the input rebuilt from `response.completed`); then a
Codex-shaped conversation on `gpt-5.5-codex` (`custom`, `local_shell` and `web_search` tools,
custom and local shell calls and their outputs, `phase`, a developer message mid-way). Prints
one `RESPONSES` line per mode; exits 1 when a request failed or the cache read nothing from the
second request on.
"""

import argparse
import sys

import openai

STEPS = 8
INSTRUCTIONS = "You are a coding agent. " + "rules " * 600


def tool(name, description):
    return {"type": "function", "name": name, "description": description, "strict": False,
            "parameters": {"type": "object", "properties": {"arg": {"type": "string"}}}}


def tools_at(i):
    tools = [tool("read", "Read a file"), tool("shell", "Run a command")]
    if not 5 <= i <= 6:
        tools.append(tool("lint", "Lint the tree"))
    if i >= 3:
        tools += [tool("mcp__gh__search", "Search issues"), tool("mcp__gh__issue", "Open an issue")]
    return tools


def conversation(client, thread, stream):
    items, cached, refused = [], [], 0
    for i in range(STEPS):
        items.append({"role": "user", "content": f"step {i}: go on"})
        headers = {"thread_id": thread, "x-mektpoy-test-session": thread}
        if i % 3 == 1:
            headers["x-mektpoy-test-tool-use"] = "read"
        params = dict(model="gpt-5.4", instructions=INSTRUCTIONS, input=items, tools=tools_at(i),
                      store=False, include=["reasoning.encrypted_content"],
                      prompt_cache_key=thread, extra_headers=headers)
        try:
            if stream:
                response = None
                for event in client.responses.create(stream=True, **params):
                    if event.type == "response.completed":
                        response = event.response
            else:
                response = client.responses.create(**params)
        except openai.APIError as e:
            print(f"FAIL step {i}: {e}", file=sys.stderr)
            refused += 1
            items.pop()
            continue
        cached.append(response.usage.input_tokens_details.cached_tokens)
        for item in response.output:
            items.append(item.model_dump(mode="json", exclude_none=True))
            if item.type == "function_call":
                items.append({"type": "function_call_output", "call_id": item.call_id,
                              "output": "file contents"})
    return refused, cached


CODEX_TOOLS = [
    tool("shell", "Run a command"),
    {"type": "custom", "name": "apply_patch", "description": "Edit files.",
     "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}},
    {"type": "local_shell"},
    {"type": "web_search"},
]
# mektpoy_standin::responses::CUSTOM_INPUT, the custom call the stand-in makes.
CUSTOM_INPUT = ("*** Begin Patch\n*** Update File: a \"b\".txt\n@@\n-\told\\path\n"
                "+\tnew \u00e9t\u00e9 \U0001f600\n*** End Patch\n")
CODEX_CALLS = ["apply_patch", "local_shell", "web_search", "shell", "apply_patch", None]


def codex_conversation(client, thread):
    """Codex's own shapes (decisions 139 to 142): its tools that are not functions, custom and
    local shell calls answered as Codex answers them, the answers' `phase`, a developer message
    mid-way. Returns refusals, cached tokens, and whether the custom calls' `input` came back in
    the stand-in's exact bytes (the SDK types it as a string)."""
    items, cached, refused, exact = [], [], 0, True
    for i, call in enumerate(CODEX_CALLS):
        if i == 2:
            items.append({"type": "message", "role": "developer",
                          "content": [{"type": "input_text", "text": "approval: never"}]})
        items.append({"role": "user", "content": f"step {i}: go on"})
        headers = {"thread_id": thread, "x-mektpoy-test-session": thread}
        if call:
            headers["x-mektpoy-test-tool-use"] = call
        try:
            response = client.responses.create(
                model="gpt-5.5-codex", instructions=INSTRUCTIONS + "codex " * 200, input=items, tools=CODEX_TOOLS,
                store=False, include=["reasoning.encrypted_content"], prompt_cache_key=thread,
                extra_headers=headers)
        except openai.APIError as e:
            print(f"FAIL codex step {i}: {e}", file=sys.stderr)
            refused += 1
            items.pop()
            continue
        cached.append(response.usage.input_tokens_details.cached_tokens)
        for item in response.output:
            items.append(item.model_dump(mode="json", exclude_none=True))
            if item.type == "custom_tool_call":
                exact = exact and item.input == CUSTOM_INPUT
                items.append({"type": "custom_tool_call_output", "call_id": item.call_id,
                              "output": "Success."})
            elif item.type in ("function_call", "local_shell_call"):
                items.append({"type": "function_call_output", "call_id": item.call_id,
                              "output": "exit 0"})
    return refused, cached, exact


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--proxy", required=True)
    ap.add_argument("--run", required=True)
    args = ap.parse_args()
    client = openai.OpenAI(base_url=f"{args.proxy}/v1", api_key="sk-test", max_retries=0)
    ok = True
    for stream in (False, True):
        mode = "stream" if stream else "create"
        refused, cached = conversation(client, f"{args.run}-responses-{mode}", stream)
        print(f"RESPONSES sdk=python-openai model=gpt-5.4 mode={mode} requests={STEPS} "
              f"refused={refused} cached_tokens={','.join(map(str, cached))}")
        ok = ok and refused == 0 and len(cached) == STEPS and all(c > 0 for c in cached[1:5])
    refused, cached, exact = codex_conversation(client, f"{args.run}-responses-codex")
    print(f"RESPONSES sdk=python-openai model=gpt-5.5-codex mode=codex requests={len(CODEX_CALLS)} "
          f"refused={refused} cached_tokens={','.join(map(str, cached))} custom_input_exact={exact}")
    ok = ok and refused == 0 and exact and all(c > 0 for c in cached[1:])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
