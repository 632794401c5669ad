"""Checks that the official `openai` Python SDK's Responses types accept every body mektpoy's
Responses serializer writes: each `*.json` in the directory given (written by
`MEKTPOY_RESPONSES_BODIES=<dir> cargo test --test responses_loop`) must validate as
`openai.types.responses.ResponseCreateParamsNonStreaming` through a pydantic `TypeAdapter`
(the SDK's params are TypedDicts: required keys, literal types and unions are checked;
unknown keys are not, so the item `type` of every input item is checked against the union's
members as well). Exits non-zero naming each body that fails.

    python responses_types.py <dir>
"""

import json
import pathlib
import sys

from pydantic import TypeAdapter
from openai.types.responses import ResponseInputItemParam
from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming

params = TypeAdapter(ResponseCreateParamsNonStreaming)
item = TypeAdapter(ResponseInputItemParam)

files = sorted(pathlib.Path(sys.argv[1]).glob("*.json"))
if not files:
    sys.exit(f"no bodies in {sys.argv[1]}")
failed = 0
for path in files:
    body = json.loads(path.read_text())
    try:
        params.validate_python(body)
        for it in body["input"]:
            item.validate_python(it)
    except Exception as e:  # pydantic.ValidationError, KeyError
        failed += 1
        print(f"FAIL {path.name}: {str(e)[:600]}")
        continue
    print(f"ok   {path.name}")
print(f"{len(files) - failed} of {len(files)} bodies accepted by openai (Python) ResponseCreateParams")
sys.exit(1 if failed else 0)
