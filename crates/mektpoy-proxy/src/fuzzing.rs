//! The request-to-log path in process, for the fuzz target `fuzz/fuzz_targets/proxy_request.rs`
//! and its regression tests: not an API. A client body goes through what the server does with
//! it under its conversation's lock, the counterfactual meter included (no HTTP, no upstream,
//! no answer).

use mektpoy::WireRequest;

use crate::conversation_state::{Conversation, Refusal};
use crate::server::Api;
use crate::store::Store;

/// `body` as a request of the conversation `key` of `store` (held in `slot` between requests):
/// parsed, read for the API (`chat`: the OpenAI-compatible one, else Messages) and prepared,
/// which logs it. A refused request leaves the conversation as the server does: one it would
/// have opened absent from the store, one on a store fault reloaded next time.
///
/// # Errors
/// What the server answers with a 400 ([`Refusal::Invalid`]) or a 503 ([`Refusal::Store`]).
pub fn take(
    store: &Store,
    slot: &mut Option<Conversation>,
    key: &str,
    chat: bool,
    body: &[u8],
) -> Result<WireRequest, Refusal> {
    take_as(
        store,
        slot,
        key,
        if chat { Api::Chat } else { Api::Messages },
        body,
    )
}

/// [`take`] for a Responses-API body (`POST /v1/responses`).
///
/// # Errors
/// As [`take`].
pub fn take_responses(
    store: &Store,
    slot: &mut Option<Conversation>,
    key: &str,
    body: &[u8],
) -> Result<WireRequest, Refusal> {
    take_as(store, slot, key, Api::Responses, body)
}

fn take_as(
    store: &Store,
    slot: &mut Option<Conversation>,
    key: &str,
    api: Api,
    body: &[u8],
) -> Result<WireRequest, Refusal> {
    let (text, parsed) = std::str::from_utf8(body)
        .map_err(|e| e.to_string())
        .and_then(|text| Ok((text, api.parse(text)?)))
        .map_err(|e| Refusal::Invalid(format!("the body is not JSON: {e}")))?;
    let model = parsed
        .head
        .get("model")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default();
    let provider = api.provider(model);
    let prepared = (|| {
        if slot.is_none() {
            *slot = Some(Conversation::load(store, key, provider, model)?);
        }
        let conversation = slot.as_mut().expect("loaded above");
        let client = api.read(&parsed, provider, conversation.known())?;
        let wire = conversation.prepare(provider, client)?;
        // The counterfactual meter, as the server runs it (every debug build compares its
        // reading path with a whole parse).
        conversation.observe_direct(&parsed, text);
        Ok(wire)
    })();
    if let Err(r) = &prepared {
        if slot.as_ref().is_some_and(Conversation::is_empty) {
            let _ = store.delete(key);
            *slot = None;
        } else if matches!(r, Refusal::Store(_))
            || slot.as_ref().is_some_and(Conversation::is_stale)
        {
            *slot = None;
        }
    }
    prepared
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    /// A body refused after its step was recorded (more deferred tools than the provider
    /// takes) leaves the stored log as it was, on a new conversation (absent) and on one that
    /// exists (a compaction: a replace, then the step); the next request goes on from the
    /// store. Found by `tests/faults.rs`; the target `proxy_request` checks it on every
    /// refusal.
    #[test]
    fn a_request_refused_after_its_step_was_recorded_changes_nothing_stored() {
        let store = Store::open(":memory:").unwrap();
        let (key, mut slot) = ("k:session:s", None);
        let body = |messages: Value, tools: usize| {
            let tools: Vec<Value> = (0..tools)
                .map(|i| json!({"name": format!("t{i}"), "input_schema": {"type": "object"}, "defer_loading": true}))
                .collect();
            json!({"model": "claude-opus-5", "max_tokens": 8, "messages": messages, "tools": tools})
                .to_string()
        };
        let refused = |slot: &mut Option<Conversation>, messages: Value| {
            let taken = take(&store, slot, key, false, body(messages, 10_001).as_bytes());
            matches!(taken, Err(Refusal::Invalid(_)))
        };
        let hello = json!([{"role": "user", "content": "hello"}]);
        assert!(refused(&mut slot, hello.clone()));
        assert_eq!(
            store.load(key).unwrap(),
            None,
            "a new conversation stays absent"
        );
        assert!(slot.is_none());

        let more = json!([{"role": "user", "content": "hello"},
            {"role": "assistant", "content": [{"type": "text", "text": "hi"}]},
            {"role": "user", "content": "and now?"}]);
        take(&store, &mut slot, key, false, body(hello, 2).as_bytes()).unwrap();
        take(
            &store,
            &mut slot,
            key,
            false,
            body(more.clone(), 2).as_bytes(),
        )
        .unwrap();
        let kept = store.load(key).unwrap().unwrap();
        // A compaction: a replace appended, then the step recorded, then its body refused.
        assert!(refused(
            &mut slot,
            json!([{"role": "user", "content": "compacted"}])
        ));
        assert!(
            store.load(key).unwrap().unwrap() == kept,
            "nothing stored changed"
        );
        assert!(slot.is_none(), "the copy ahead of the store is dropped");

        take(&store, &mut slot, key, false, body(more, 3).as_bytes()).unwrap();
        let bytes = store.load(key).unwrap().unwrap();
        assert!(bytes.starts_with(&kept) && bytes.len() > kept.len());
        let loaded = mektpoy::Session::load_bytes(&bytes).unwrap();
        let held = slot.as_mut().unwrap().agent().session().to_jsonl();
        assert!(
            loaded.session.to_jsonl() == held,
            "the copy held is the stored log"
        );
    }

    proptest::proptest! {
        /// Responses bodies of items good and bad, one conversation: each is refused with a
        /// 400 that changes nothing stored, or accepted, and then the stored log is the one
        /// held in memory.
        #[test]
        fn responses_bodies_are_taken_whole_or_change_nothing(
            bodies in proptest::collection::vec(proptest::collection::vec(0usize..ITEMS.len(), 1..8), 1..6),
        ) {
            let store = Store::open(":memory:").unwrap();
            let (key, mut slot) = ("k:codex:p", None);
            for picks in bodies {
                let input: Vec<Value> = picks.iter().map(|&i| serde_json::from_str(ITEMS[i]).unwrap()).collect();
                let body = json!({"model": "gpt-5.4", "instructions": "Be brief.", "input": input,
                    "store": false, "tools": [{"type": "function", "name": "read", "parameters": {"type": "object"}}]});
                let before = store.load(key).unwrap();
                match take_responses(&store, &mut slot, key, body.to_string().as_bytes()) {
                    Err(r) => {
                        proptest::prop_assert!(matches!(r, Refusal::Invalid(_)), "{}", r);
                        proptest::prop_assert!(store.load(key).unwrap() == before, "{}", r);
                    }
                    Ok(wire) => {
                        proptest::prop_assert!(serde_json::from_str::<Value>(wire.body()).is_ok());
                        let bytes = store.load(key).unwrap().unwrap();
                        let loaded = mektpoy::Session::load_bytes(&bytes).unwrap();
                        let held = slot.as_mut().unwrap().agent().session().to_jsonl();
                        proptest::prop_assert!(loaded.session.to_jsonl() == held);
                    }
                }
            }
        }
    }

    /// Input items, good and bad, for the property above.
    const ITEMS: [&str; 10] = [
        r#"{"role":"user","content":"hi"}"#,
        r#"{"role":"developer","content":"rules"}"#,
        r#"{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"e"}"#,
        r#"{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]}"#,
        r#"{"type":"function_call","call_id":"c1","name":"read","arguments":"{}"}"#,
        r#"{"type":"function_call_output","call_id":"c1","output":"done"}"#,
        r#"{"type":"function_call_output","call_id":"c9","output":"stray"}"#,
        r#"{"type":"item_reference","id":"x"}"#,
        r#"{"role":"user","content":[{"type":"input_image","image_url":"x"}]}"#,
        r#""just text""#,
    ];
}
