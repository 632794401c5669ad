#!/usr/bin/env python3
"""Every public function, method, type and trait of the library has a doc example.

rustdoc's `missing_doc_code_examples` (run by `.ci/run` just before this) checks only the
items it calls "directly public": an item defined in a private module and re-exported
(`vocab::Message`, `mektpoy::ToolSchema`, `agent::AgentLoopBuilder`, ...) is not checked
there. This reads rustdoc's JSON output of the library (unstable too, hence
RUSTC_BOOTSTRAP in `.ci/run`), walks every public path from the crate root through
re-exports, and checks those items the same way: functions and methods (inherent or of a
public trait), structs, enums, unions and traits need a fenced code block in their docs;
fields, variants, constants, modules, trait impls and `#[doc(hidden)]` items do not.
Decision 166.

Usage: doc_examples.py target/doc/mektpoy.json
"""
import json
import re
import sys



def has_example(docs):
    # A fenced block that is Rust: ``` alone or with Rust attributes (not ```text, ```json, ...).
    for m in re.finditer(r"^\s*```([^\n]*)$", docs or "", re.M):
        info = m.group(1).strip()
        if info == "" or all(
            t in ("rust", "should_panic", "no_run", "compile_fail", "ignore") or t.startswith("edition")
            for t in re.split(r"[\s,]+", info)
        ):
            return True
    return False


def main(path):
    d = json.load(open(path))
    index = d["index"]
    crate_id = index[str(d["root"])]["crate_id"]
    seen, missing = set(), []

    def item(i):
        it = index.get(str(i))
        return it if it is not None and it["crate_id"] == crate_id else None

    def hidden(it):
        return any("doc(hidden)" in str(a) for a in it.get("attrs") or [])

    checked = []

    def need(it, where):
        checked.append(where)
        if not has_example(it.get("docs")):
            missing.append(where)

    def visit(i, where):
        it = item(i)
        if it is None or i in seen or hidden(it):
            return
        seen.add(i)
        kind, inner = next(iter(it["inner"].items()))
        name = it.get("name") or ""
        here = f"{where}::{name}" if name else where
        if kind == "module":
            if it["visibility"] != "public":
                return
            for c in inner["items"]:
                visit(c, here)
        elif kind == "use":
            if it["visibility"] != "public" or inner.get("id") is None:
                return
            target = item(inner["id"])
            if target is None:
                return
            if inner.get("is_glob"):
                # `pub use module::*`: the module's public items, whatever its own visibility.
                for c in next(iter(target["inner"].values())).get("items", []):
                    visit(c, where)
            else:
                visit(inner["id"], where)
        elif kind in ("function",):
            if it["visibility"] == "public":
                need(it, here)
        elif kind in ("struct", "enum", "union", "trait"):
            if it["visibility"] != "public":
                return
            need(it, here)
            if kind == "trait":
                for m in inner["items"]:
                    mi = item(m)
                    if mi and "function" in mi["inner"] and not hidden(mi):
                        need(mi, f"{here}::{mi['name']}")
                return
            for imp in inner.get("impls", []):
                ii = item(imp)
                if ii is None or hidden(ii):
                    continue
                body = ii["inner"]["impl"]
                if body["trait"] is not None or body.get("is_synthetic") or body.get("blanket_impl"):
                    continue
                for m in body["items"]:
                    mi = item(m)
                    if mi and "function" in mi["inner"] and mi["visibility"] == "public" and not hidden(mi):
                        need(mi, f"{here}::{mi['name']}")

    root = index[str(d["root"])]
    for c in root["inner"]["module"]["items"]:
        visit(c, root["name"])
    for m in sorted(set(missing)):
        print(f"missing doc example: {m}")
    print(f"{len(set(checked))} public items checked, {len(set(missing))} without an example")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
