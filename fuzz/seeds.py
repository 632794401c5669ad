#!/usr/bin/env python3
"""Writes the hand-made seeds of fuzz/corpus/<target>/seed-* (run from fuzz/: `python3 seeds.py`).

`load` and `append_json` seeds are session files and event lines. `record` and `project` take
`arbitrary`-decoded structs, so their seeds are written here from readable descriptions with an
encoder that mirrors arbitrary 1.x: integers little-endian, a bool is a byte's low bit, an enum
variant is a u32 `x` with `(x * variants) >> 32 == index`, an Option a bool then the value, and
each Vec element is preceded by a `true` byte and the Vec ended by a `false` one.
`cargo +nightly fuzz fmt <target> corpus/<target>/seed-...` prints what a seed decodes to.
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    path = os.path.join(HERE, "corpus", target, "seed-" + name)
    if isinstance(data, str):
        data = data.encode()
    with open(path, "wb") as f:
        f.write(data)


# --- encoder ---------------------------------------------------------------------------------
def u8(n):
    return bytes([n & 0xFF])


def u16(n):
    return (n & 0xFFFF).to_bytes(2, "little")


def boolean(b):
    return b"\x01" if b else b"\x00"


def variant(index, count):
    # The middle of the variant's range of u32 values.
    x = ((2 * index + 1) << 32) // (2 * count)
    assert (x * count) >> 32 == index
    return x.to_bytes(4, "little")


def vec(items):
    return b"".join(b"\x01" + i for i in items) + b"\x00"


def option(value):
    return b"\x00" if value is None else b"\x01" + value


def tool(name, version=0, deferred=False):
    return u8(name) + u8(version) + boolean(deferred)


# --- record ----------------------------------------------------------------------------------
# enum Op { Step, Answer, Call, StrayResult, Compact, Thinking, Restart }
OPS = 7
# Reasoning { None, Signed, Foreign, Unsigned, Redacted }; Args { Empty, Path, Malformed,
# NotObject, DuplicateKeys, BigNumber, Deep }; Summary { User, SystemNote, Assistant };
# Policy { Strip, DropBlock, Refuse }
READ, GREP, EDIT, WEB = 0, 1, 2, 3


def step(tools, config=1, prompt=1, new_series=False, attempt=0, users=1, reuse_id=False,
         switch_route=False):
    return (variant(0, OPS) + vec(tools) + u8(config) + u8(prompt) + boolean(new_series)
            + u8(attempt) + u8(users) + boolean(reuse_id) + boolean(switch_route))


def answer(text=True, reasoning=0):
    return variant(1, OPS) + boolean(text) + variant(reasoning, 5)


def call(tool_index=READ, args=1, skip_result=False, is_error=False, reasoning=0):
    return (variant(2, OPS) + u8(tool_index) + variant(args, 7) + boolean(skip_result)
            + boolean(is_error) + variant(reasoning, 5))


def stray(call_index):
    return variant(3, OPS) + u8(call_index)


def compact(start, end, summary=0):
    return variant(4, OPS) + u8(start) + u8(end) + variant(summary, 3)


def thinking(policy):
    return variant(5, OPS) + variant(policy, 3)


def restart():
    return variant(6, OPS)


def loop(*ops):
    # `Input { ops }`: the last field takes the rest, which for a Vec is the same encoding.
    return vec(ops)


write("record", "tool-churn", loop(
    step([tool(READ)]),
    call(READ, args=1),
    step([tool(READ), tool(GREP)]),                  # an addition
    answer(),
    step([tool(READ), tool(GREP), tool(WEB, deferred=True)]),
    step([tool(GREP), tool(WEB, deferred=True)]),    # a removal
    step([tool(GREP, version=1), tool(WEB)]),        # a redefinition, an activation
))
write("record", "thinking-rewrite", loop(
    thinking(1),                                     # drop-block
    step([tool(READ)], config=2),
    call(READ, reasoning=1),                         # signed reasoning, then a result
    answer(reasoning=4),                             # redacted thinking
    step([tool(READ), tool(EDIT)], config=2),        # tools rewrite: a thinking floor
    answer(reasoning=1),
    step([tool(READ), tool(EDIT)], config=2, prompt=2),  # a system rewrite
))
write("record", "compaction-restart", loop(
    step([tool(READ)], prompt=1, users=2),
    call(READ, args=4),                              # duplicate keys in the arguments
    answer(),
    compact(1, 4, summary=1),                        # a system-note summary
    step([tool(READ)], attempt=1, users=0),          # a retry
    restart(),
    step([tool(READ), tool(GREP)], new_series=True, switch_route=True),
    stray(0),
))
write("record", "refusals", loop(
    step([tool(READ), tool(READ)]),                  # a tool declared twice
    step([tool(15)]),                                # the reserved name
    step([tool(EDIT, version=2)], config=0),         # no max_tokens, no object root
    call(EDIT, args=6, skip_result=True),            # deep arguments, no result
    step([tool(EDIT)], config=4, reuse_id=True),     # forced tool_choice
    thinking(2),
))

# --- project ---------------------------------------------------------------------------------
# enum Who { User, Assistant(u8), Tool(Option<u8>), Developer, SystemPrompt, SystemNote }
WHO = 6
# enum Block { Text(bool), Reasoning{signed, extra_type}, Redacted, Image, NoType,
#              Call{id, name, args}, Addition(u8), Removal(u8), Redefinition(u8) }
BLOCKS = 9
A, B, C = 0, 1, 2


def who(index, payload=b""):
    return variant(index, WHO) + payload


def text(empty=False):
    return variant(0, BLOCKS) + boolean(empty)


def reasoning(signed=True, extra_type=False):
    return variant(1, BLOCKS) + boolean(signed) + boolean(extra_type)


def tcall(i, name=A, args=1):
    return variant(5, BLOCKS) + u8(i) + u8(name) + u8(args)


def addition(n):
    return variant(6, BLOCKS) + u8(n)


def removal(n):
    return variant(7, BLOCKS) + u8(n)


def redefinition(n):
    return variant(8, BLOCKS) + u8(n)


def msg(w, blocks, reuse_id=None, is_error=None):
    return (w + vec(blocks) + option(None if reuse_id is None else u8(reuse_id))
            + option(None if is_error is None else boolean(is_error)))


def update(message, additions, redefinitions=()):
    return u8(message) + vec(additions) + vec(list(redefinitions))


def request(messages, tools, history, config=1, previous_blocks=None, plan=None):
    return (vec(messages) + option(None if tools is None else vec(tools))
            + option(None if history is None else vec(history[0]) + vec(history[1]))
            + u8(config) + option(None if previous_blocks is None else u8(previous_blocks))
            + option(None if plan is None else u8(plan[0]) + u16(plan[1])))


USER, ASSISTANT, TOOL, DEVELOPER, PROMPT, NOTE = range(6)
conversation = [
    msg(who(PROMPT), [text()]),                                  # m0
    msg(who(USER), [text()]),                                    # m1
    msg(who(ASSISTANT, u8(0)), [reasoning(), tcall(1, A)]),      # m2
    msg(who(TOOL, option(u8(1))), [text()]),                     # m3
    msg(who(DEVELOPER), [addition(B), removal(C)]),              # m4
    msg(who(USER), [text()]),                                    # m5
    msg(who(DEVELOPER), [redefinition(A), addition(C)]),         # m6
    msg(who(ASSISTANT, u8(0)), [text()]),                        # m7
]
write("project", "in-history", request(
    conversation,
    [tool(A), tool(B), tool(C, version=1)],
    ([tool(A), tool(C)], [update(4, [tool(B, deferred=True)]),
                          update(6, [tool(C, version=1)], [tool(A, version=1)])]),
))
write("project", "missing-update", request(
    conversation[:4],
    [tool(A), tool(B, deferred=True)],
    ([tool(A)], [update(1, [tool(B)])]),                         # m1 is no developer message
    config=2, previous_blocks=3,
))
write("project", "thinking-plan", request(
    conversation,
    [tool(A, deferred=True), tool(B, deferred=True)],            # all deferred
    ([tool(A, deferred=True)], [update(4, [tool(B)])]),
    config=2, previous_blocks=2, plan=(1, 0b0000_0111),          # drop-block, m0..m2 before it
))
write("project", "no-history", request(
    [msg(who(USER), [text(), variant(3, BLOCKS)]),               # an image block
     msg(who(ASSISTANT, u8(1)), [tcall(2, A, args=5), variant(2, BLOCKS)]),  # deep args
     msg(who(TOOL, option(u8(2))), [text(True)], is_error=True),
     msg(who(NOTE), [text()], reuse_id=0)],
    [tool(A, version=2), tool(14)],                              # no object root, empty name
    None, config=5,
))

# --- load ------------------------------------------------------------------------------------
SESSION = '{"type":"session","version":0,"id":"s"}\n'
# A real file: a 4-step loop recorded on deepseek-flash (tool additions, a removal, a deferred
# tool, calls and results, signed reasoning, a compaction), kept as written (see README.md).
with open(os.path.join(HERE, "corpus", "load", "seed-recorded-deepseek-flash.jsonl")) as f:
    RECORDED = f.read()
# The same file cut in the middle of its last framed batch: a torn batch.
cut = RECORDED.rindex('{"batch":')
write("load", "torn-batch.jsonl", RECORDED[: cut + 200])
CATALOG = [l for l in open(os.path.join(HERE, "..", "docs", "catalog", "events.md"))
           .read().split("```json\n")[1:]]
CATALOG = [c.split("\n```")[0] for c in CATALOG]
EVENTS = [c for c in CATALOG if not c.startswith('{"batch"')]
write("load", "catalog-events.jsonl", SESSION + "\n".join(EVENTS) + "\n")
# Every event type, a replace, an opaque surface node, no trailing newline.
write("load", "every-type-unterminated.jsonl", SESSION + "\n".join([
    '{"type":"system/message","data":{"message":{"id":"p","role":"system","content":[{"type":"text","text":"P"}],"source":{"kind":"system-prompt"}}},"surfaceOp":"append"}',
    '{"type":"user/message","data":{"turn":1,"message":{"id":"u","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}},"surfaceOp":"append"}',
    '{"type":"request/header","data":{"header":{"config":{"provider":"p","model":"m"},"tools":[{"name":"a","description":"d","parameters":{}},{"name":"b","description":"d","parameters":{},"deferLoading":true}]},"reason":"initial"}}',
    '{"type":"developer/message","data":{"message":{"id":"d","role":"developer","content":[{"type":"tool-addition","toolName":"b"},{"type":"tool-removal","toolName":"a"}],"source":{"kind":"tool-registry"}},"headerSeq":2},"surfaceOp":"append"}',
    '{"type":"assistant/message","data":{"message":{"id":"x","role":"assistant","content":[{"type":"tool-call","id":"c","name":"b","arguments":"{}"}],"source":{"kind":"model","provider":"p","model":"m"}}},"surfaceOp":{"op":"replace","start":1,"end":2}}',
    '{"type":"tool/result","data":{"message":{"id":"t","role":"tool","content":[],"source":{"kind":"tool","callId":"c"},"isError":true}}}',
    '{"type":"plugin/x","data":{},"surfaceOp":"append"}',
]))

# Valid but not as the crate writes it: a frame line with spaces, a line with leading spaces
# and a CR, escapes, unknown fields, numbers spelled 1.50 / 1e3, keys out of order. Loading
# must keep every byte.
write("load", "odd-spellings.jsonl", '{"type":"session","version":0,"id":"odd"}\n{ "batch" : 2 }\n{"type":"system/message","data":{"message":{"id":"p","role":"system","content":[{"type":"text","text":"P \\u00e9\\n"}],"source":{"kind":"system-prompt"}}},"surfaceOp":"append"}\n {"type" : "user/message", "data":{"turn":1,"message":{"id":"u","role":"user","content":[{"type":"text","text":"hi","lang":"en"}],"source":{"kind":"user"},"meta":{"k":1.50}}},"surfaceOp":"append"}\r\n{"batch":3}\n{"type":"request/header","data":{"header":{"config":{"provider":"p","model":"m","max_tokens":1e3},"tools":[{"name":"a","description":"d","parameters":{"type":"object"},"title":"A"}]},"reason":"initial"}}\n{"data":{"message":{"id":"x","role":"assistant","content":[{"type":"tool-call","id":"c","name":"a","arguments":"{\\"n\\": 123456789012345678901234567890}"}],"source":{"kind":"model","provider":"p","model":"m"}}},"type":"assistant/message","surfaceOp":"append"}\n{"type":"tool/result","data":{"message":{"id":"t","role":"tool","content":[{"type":"text","text":"\\ud83d\\ude00"}],"source":{"kind":"tool","callId":"c"},"isError":false}},"surfaceOp":"append"}\n{"type":"plugin/x","data":{"nested":[1,[2,[3]],{"a":null}]}}\n')

# --- append_json -----------------------------------------------------------------------------
# First byte: "0" starts from an empty session, "1" from a prompt, a user message and header 2.
lines = [l for l in RECORDED.splitlines()[1:] if not l.startswith('{"batch"')]
write("append_json", "recorded-lines", "0" + "\n".join(lines))
write("append_json", "catalog-lines", "1" + "\n".join(EVENTS))
write("append_json", "after-header", "1" + "\n".join([
    '{"type":"developer/message","data":{"message":{"id":"d","role":"developer","content":[{"type":"tool-addition","toolName":"b"}],"source":{"kind":"tool-registry"}},"headerSeq":2},"surfaceOp":"append"}',
    '{\n  "type": "assistant/message",\n  "data": {"message": {"id": "x", "role": "assistant", "content": [{"type": "tool-call", "id": "c", "name": "b", "arguments": "{}"}], "source": {"kind": "model", "provider": "p", "model": "m"}}},\n  "surfaceOp": "append"\n}'.replace("\n", "\r"),
    '{"type":"tool/result","data":{"message":{"id":"t","role":"tool","content":[{"type":"text","text":"ok"}],"source":{"kind":"tool","callId":"c"}}},"surfaceOp":"append"}',
    '{"type":"thinking/policy","data":{"policy":"refuse"}}',
    '{"type":"plugin/note","data":{"any":"shape"},"surfaceOp":{"op":"replace","start":0,"end":1}}',
]))

# --- proxy_request ---------------------------------------------------------------------------
# First two bytes: bit i of the second set makes body i a Responses-API body, else bit i of the
# first set a chat-API body, else a Messages one; bodies are separated by NUL bytes. Each
# sequence is one conversation: extended, retried, rewritten (compaction), the route switched.
import json


def bodies(apis, *items, responses=0):
    return bytes([apis, responses]) + b"\0".join(json.dumps(i).encode() for i in items)


TOOLS = [{"name": "read", "description": "read a file", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}},
         {"name": "grep", "description": "search", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}]
U1 = {"role": "user", "content": "fix the bug"}
A1 = {"role": "assistant", "content": [{"type": "thinking", "thinking": "look", "signature": "sig"},
                                       {"type": "tool_use", "id": "tu_1", "name": "read", "input": {"path": "a.rs"}}]}
R1 = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu_1", "content": "fn main() {}"},
                                  {"type": "text", "text": "go on", "cache_control": {"type": "ephemeral"}}]}
M = {"model": "claude-opus-5", "max_tokens": 64, "system": [{"type": "text", "text": "Be careful."}], "stream": True}
write("proxy_request", "messages-loop", bodies(0, dict(M, tools=TOOLS, messages=[U1]),
      dict(M, tools=TOOLS, messages=[U1, A1, R1]), dict(M, tools=TOOLS[:1], messages=[U1, A1, R1]),
      dict(M, tools=TOOLS[1:], messages=[{"role": "user", "content": "Summary: read a.rs"}, {"role": "user", "content": "next"}])))
write("proxy_request", "deepseek-thinking", bodies(0, dict(M, model="deepseek-flash", thinking={"type": "enabled", "budget_tokens": 1024}, tools=TOOLS, messages=[U1]),
      dict(M, model="deepseek-flash", tools=TOOLS + [{"name": "edit", "input_schema": {"type": "object"}, "defer_loading": True}], messages=[U1, A1, R1])))
CT = [{"type": "function", "function": {"name": "read", "description": "read", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]
CA = {"role": "assistant", "content": None, "reasoning_content": "hm",
      "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a.rs\"}"}}]}
C = {"model": "deepseek-v4-pro", "stream": False, "max_tokens": 64}
write("proxy_request", "chat-loop", bodies(0xFF, dict(C, tools=CT, messages=[{"role": "system", "content": "Be careful."}, {"role": "user", "content": "fix it"}]),
      dict(C, tools=CT, messages=[{"role": "system", "content": "Be careful."}, {"role": "user", "content": "fix it"}, CA,
                                  {"role": "tool", "tool_call_id": "call_1", "content": "fn main() {}"}]),
      dict(C, tools=[], messages=[{"role": "developer", "content": "tools changed"}, {"role": "user", "content": [{"type": "text", "text": "fix it"}]}])))
write("proxy_request", "retry-and-switch", bodies(0b0100, dict(M, messages=[U1]), dict(M, messages=[U1]),
      dict(C, messages=[{"role": "user", "content": "fix the bug"}]), dict(M, model="claude-fable-5-1", messages=[U1])))

# Responses-API conversations (Codex's shapes: `instructions`, `input` items, flat function
# tools, `store: false`, reasoning items with `encrypted_content`, `additional_tools` items).
RT = [{"type": "function", "name": "read", "description": "read a file", "strict": False,
       "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}]
RU = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix the bug"}]}
RR = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "look"}], "encrypted_content": "gAAA=="}
RC = {"type": "function_call", "call_id": "call_1", "name": "read", "arguments": "{\"path\":\"a.rs\"}"}
RO = {"type": "function_call_output", "call_id": "call_1", "output": "fn main() {}"}
RA = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Fixed."}]}
RX = {"type": "additional_tools", "role": "developer", "tools": [{"type": "function", "name": "grep", "description": "search",
                                                                  "parameters": {"type": "object"}, "strict": False}]}
R = {"model": "gpt-5.4", "instructions": "Be careful.", "store": False, "stream": True,
     "include": ["reasoning.encrypted_content"], "prompt_cache_key": "thread-1", "parallel_tool_calls": True}
write("proxy_request", "responses-loop", bodies(0, dict(R, tools=RT, input=[RU]),
      dict(R, tools=RT, input=[RU, RR, RC, RO]),
      dict(R, tools=RT, input=[RU, RR, RC, RO, RA, {"role": "user", "content": "and the tests"}, RX]),
      dict(R, tools=RT, input=[RU, RR, RC, RO, RA, {"role": "user", "content": "and the tests"}, RX]),
      dict(R, tools=[], input=[{"role": "user", "content": "Summary: fixed a.rs"}, {"role": "user", "content": "next"}]),
      responses=0xFF))
write("proxy_request", "responses-refused", bodies(0b0100, dict(R, input=[RO]), dict(R, previous_response_id="resp_1", input=[RU]),
      dict(C, messages=[{"role": "user", "content": "fix the bug"}]), dict(R, model="gpt-4.1", input=[RU, RX]),
      dict(R, input=[{"type": "item_reference", "id": "x"}]), responses=0b11011))

# --- responses_answer --------------------------------------------------------------------------
# First byte: the SSE split (1 + byte % 61 bytes a push); the rest a JSON body or SSE text.
def answer_seed(split, text):
    return bytes([split]) + text.encode()


USAGE = {"input_tokens": 2006, "input_tokens_details": {"cached_tokens": 1920},
         "output_tokens": 300, "output_tokens_details": {"reasoning_tokens": 128}, "total_tokens": 2306}
OUT = [{"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "look"}], "encrypted_content": "gAAA=="},
       {"id": "msg_1", "type": "message", "status": "completed", "role": "assistant",
        "content": [{"type": "output_text", "text": "Reading.", "annotations": []}]},
       {"id": "fc_1", "type": "function_call", "status": "completed", "call_id": "call_1", "name": "read",
        "arguments": "{\"path\":\"a.rs\"}"}]
BODY = {"id": "resp_1", "object": "response", "status": "completed", "model": "gpt-5.4", "output": OUT, "usage": USAGE}
write("responses_answer", "json-completed", answer_seed(7, json.dumps(BODY)))
write("responses_answer", "json-incomplete", answer_seed(7, json.dumps(dict(BODY, status="incomplete",
      incomplete_details={"reason": "max_output_tokens"}, output=OUT[:2]))))
write("responses_answer", "json-failed", answer_seed(7, json.dumps(dict(BODY, status="failed", output=[],
      error={"code": "server_error", "message": "The server had an error."}))))


def sse(events):
    return "".join("event: %s\ndata: %s\n\n" % (e["type"], json.dumps(e)) for e in events)


HEAD = dict(BODY, status="in_progress", output=[], usage=None)
EVENTS = [{"type": "response.created", "response": HEAD},
          {"type": "response.in_progress", "response": HEAD},
          {"type": "response.output_item.added", "output_index": 0, "item": dict(OUT[0], summary=[])},
          {"type": "response.output_item.done", "output_index": 0, "item": OUT[0]},
          {"type": "response.output_item.added", "output_index": 1, "item": dict(OUT[1], content=[], status="in_progress")},
          {"type": "response.output_text.delta", "output_index": 1, "content_index": 0, "delta": "Read"},
          {"type": "response.output_text.delta", "output_index": 1, "content_index": 0, "delta": "ing."},
          {"type": "response.output_item.done", "output_index": 1, "item": OUT[1]},
          {"type": "response.output_item.added", "output_index": 2, "item": dict(OUT[2], arguments="", status="in_progress")},
          {"type": "response.function_call_arguments.delta", "output_index": 2, "item_id": "fc_1", "delta": "{\"path\":"},
          {"type": "response.function_call_arguments.delta", "output_index": 2, "item_id": "fc_1", "delta": "\"a.rs\"}"},
          {"type": "response.function_call_arguments.done", "output_index": 2, "item_id": "fc_1", "arguments": OUT[2]["arguments"]},
          {"type": "response.completed", "response": BODY}]
write("responses_answer", "sse-completed", answer_seed(5, sse(EVENTS)))
# Items never closed: rebuilt from their `added` item and deltas.
write("responses_answer", "sse-unclosed", answer_seed(13, sse([e for e in EVENTS if e["type"] != "response.output_item.done"])))
write("responses_answer", "sse-incomplete", answer_seed(60, sse(EVENTS[:7] + [{"type": "response.incomplete",
      "response": dict(BODY, status="incomplete", incomplete_details={"reason": "max_output_tokens"}, output=OUT[:2])}])))
write("responses_answer", "sse-error", answer_seed(2, sse(EVENTS[:3] + [{"type": "error", "code": "rate_limit_exceeded",
      "message": "Rate limit reached", "param": None}])))
