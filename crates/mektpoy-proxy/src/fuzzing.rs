//! The request-to-log path in process, for the fuzz target `fuzz/fuzz_targets/proxy_request.rs`
//! and its regression tests: not an API. A client body goes through what the server does with
//! it under its conversation's lock (no HTTP, no upstream, no answer).

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
    let api = if chat { Api::Chat } else { Api::Messages };
    let value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| Refusal::Invalid(format!("the body is not JSON: {e}")))?;
    let model = value
        .get("model")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default();
    let provider = api.provider(model);
    let prepared = (|| {
        if slot.is_none() {
            *slot = Some(Conversation::load(store, key, provider, model)?);
        }
        let conversation = slot.as_mut().expect("loaded above");
        let client = api.read(&value, provider, conversation.memo())?;
        conversation.prepare(provider, client)
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
