//! Arbitrary text lines appended one by one with `Session::append_json`: each is accepted
//! (`len()` grows by one) or refused with a typed `AppendError` (`len()` unchanged), never a
//! panic. What was accepted saves and loads back byte for byte, to the same events and folds.
//!
//! Input: the first byte's low bit picks the start (an empty session, or one holding a
//! system prompt, a user message and a header with tools `a`, `b` (deferred), so that
//! developer messages can name header 2); the rest, as UTF-8 (lossy), is split on `\n`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mektpoy::Session;

const START: &str = concat!(
    r#"{"type":"session","version":0,"id":"s"}"#,
    "\n",
    r#"{"type":"system/message","data":{"message":{"id":"p","role":"system","content":[{"type":"text","text":"P"}],"source":{"kind":"system-prompt"}}},"surfaceOp":"append"}"#,
    "\n",
    r#"{"type":"user/message","data":{"turn":1,"message":{"id":"u","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}},"surfaceOp":"append"}"#,
    "\n",
    r#"{"type":"request/header","data":{"header":{"config":{"provider":"p","model":"m"},"tools":[{"name":"a","description":"d","parameters":{}},{"name":"b","description":"d","parameters":{},"deferLoading":true}]},"reason":"initial"}}"#,
    "\n",
);

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let session = if first & 1 == 0 {
        Session::new("s")
    } else {
        Session::load_bytes(START.as_bytes()).unwrap().session
    };
    let text = String::from_utf8_lossy(rest);
    for line in text.split('\n') {
        let before = session.len();
        match session.append_json(line) {
            Ok(seq) => {
                assert_eq!(seq.index(), before);
                assert_eq!(session.len(), before + 1);
            }
            Err(e) => {
                let _ = e.to_string();
                assert_eq!(
                    session.len(),
                    before,
                    "a refused line leaves the log as it was"
                );
            }
        }
    }
    let saved = session.to_jsonl();
    let loaded = Session::load_bytes(saved.as_bytes()).expect("what append_json took loads");
    assert_eq!(loaded.torn_tail, None);
    assert_eq!(loaded.session.to_jsonl(), saved);
    assert_eq!(loaded.session.events(), session.events());
    assert_eq!(loaded.session.tool_history(), session.tool_history());
    assert_eq!(
        loaded.session.tool_history_by_value(),
        session.tool_history_by_value()
    );
    let _ = session.view();
});
