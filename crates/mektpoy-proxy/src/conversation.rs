//! Which conversation a stateless client request belongs to.
//!
//! A harness sends its whole state with every request and no conversation id of the proxy's.
//! The proxy takes the first of these that is present (most specific first, so that a harness
//! that sends several is keyed by the one it means as its conversation):
//!
//! 1. `x-mektpoy-session`: a client that knows the proxy names its conversation itself;
//! 2. `x-claude-code-session-id`, with `x-claude-code-agent-id` when present (a subagent is a
//!    conversation of its own: its tools and history are not the main loop's);
//! 3. Codex's `thread_id` / `thread-id`, else its `session_id` / `session-id` headers (a
//!    Codex session can hold several threads, each a conversation of its own);
//! 4. OpenCode's `x-opencode-session` / `x-session-affinity` / `x-session-id`;
//! 5. the session part of `metadata.user_id` (`..._session_<id>`), as Claude Code sends it;
//! 6. the body's `prompt_cache_key` (a caller's own cache key names one conversation);
//! 7. last, a hash of the model, the system prompt (or `instructions`) and the first user
//!    message (a string `input` is one): the part of a
//!    conversation a harness never rewrites.
//!
//! Every id is scoped by a hash of the caller's API key, never the key itself: an id guessed or
//! forged by another caller names another conversation, not this one.

use axum::http::HeaderMap;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::client_body::Body;

/// The store's key of the conversation a request belongs to: `<key hash>:<source>:<id>`.
pub fn conversation_key(headers: &HeaderMap, body: &Body<'_>) -> String {
    let scope = key_hash(headers);
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    let id = if let Some(id) = header("x-mektpoy-session") {
        format!("session:{id}")
    } else if let Some(id) = header("x-claude-code-session-id") {
        match header("x-claude-code-agent-id") {
            Some(agent) => format!("claude-code:{id}/{agent}"),
            None => format!("claude-code:{id}"),
        }
    } else if let Some(id) = ["thread_id", "thread-id", "session_id", "session-id"]
        .into_iter()
        .find_map(header)
    {
        format!("codex:{id}")
    } else if let Some(id) = ["x-opencode-session", "x-session-affinity", "x-session-id"]
        .into_iter()
        .find_map(header)
    {
        format!("opencode:{id}")
    } else if let Some(id) = body
        .head
        .pointer("/metadata/user_id")
        .and_then(Value::as_str)
        .and_then(|u| u.rsplit_once("_session_"))
        .map(|(_, s)| s)
        .filter(|s| !s.is_empty())
    {
        format!("user-id:{id}")
    } else if let Some(id) = body.head.get("prompt_cache_key").and_then(Value::as_str) {
        format!("cache-key:{id}")
    } else {
        format!("content:{}", content_hash(body))
    };
    // Bounded: a hostile header cannot make a key of any length.
    let id = if id.len() > 256 {
        format!("long:{}", hex(&Sha256::digest(id.as_bytes())[..16]))
    } else {
        id
    };
    format!("{scope}:{id}")
}

/// 16 bytes of SHA-256 of the caller's API key: `x-api-key`, else `authorization` without its
/// `Bearer ` scheme. Anthropic's SDKs send the key as `x-api-key` up to their 2026-10-21 majors
/// and as `Authorization: Bearer` from them on (Python 2.0.0, TypeScript 1.0.0), and the
/// vendor reads `x-api-key` when both come: one key is one scope whichever header carries it,
/// so a harness that upgrades its SDK keeps its conversations.
pub fn key_hash(headers: &HeaderMap) -> String {
    let key = headers
        .get("x-api-key")
        .map(|v| v.as_bytes())
        .or_else(|| headers.get("authorization").map(|v| bearer(v.as_bytes())))
        .unwrap_or_default();
    scope(key)
}

/// The credentials of an `authorization` value: what follows a `Bearer` scheme (any case), or
/// the whole value when it names no such scheme.
fn bearer(value: &[u8]) -> &[u8] {
    match value.split_at_checked(7) {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case(b"bearer ") => rest.trim_ascii(),
        _ => value,
    }
}

/// The scope of the conversations of a caller whose API key is `key` (see [`key_hash`]): what
/// their conversation keys start with.
pub fn scope(key: &[u8]) -> String {
    hex(&Sha256::digest(key)[..16])
}

/// The model, the system prompt and the first user message, hashed.
fn content_hash(body: &Body<'_>) -> String {
    // Messages are read in order up to the first user message (usually the first).
    let first_user = body
        .messages()
        .iter()
        .filter_map(|m| serde_json::from_str::<Value>(m.get()).ok())
        .find(|m| m["role"] == "user" || m.is_string())
        .map(|m| match m {
            Value::String(_) => m.to_string(),
            _ => m["content"].to_string(),
        })
        .unwrap_or_default();
    let mut h = Sha256::new();
    for part in [
        body.head["model"].to_string(),
        body.head
            .get("system")
            .or_else(|| body.head.get("instructions"))
            .unwrap_or(&Value::Null)
            .to_string(),
        first_user,
    ] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    hex(&h.finalize()[..16])
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The key of `body` (a value, written out and read as the proxy reads it).
    fn conversation_key(headers: &HeaderMap, body: &Value) -> String {
        let text = body.to_string();
        super::conversation_key(headers, &crate::client_body::parse(&text).unwrap())
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn the_first_present_source_names_the_conversation() {
        let body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}],
            "metadata": {"user_id": "user_ab_account_cd_session_ef"}, "prompt_cache_key": "pk"});
        let key = |pairs: &[(&'static str, &str)]| conversation_key(&headers(pairs), &body);
        let all = [
            ("x-api-key", "k"),
            ("x-mektpoy-session", "mine"),
            ("x-claude-code-session-id", "cc"),
            ("session_id", "cx"),
            ("x-opencode-session", "oc"),
        ];
        assert!(key(&all).ends_with(":session:mine"));
        assert!(key(&all[2..]).ends_with(":claude-code:cc"));
        assert!(
            key(&[
                ("x-claude-code-session-id", "cc"),
                ("x-claude-code-agent-id", "sub")
            ])
            .ends_with(":claude-code:cc/sub"),
            "a subagent is a conversation of its own"
        );
        assert!(key(&all[3..]).ends_with(":codex:cx"));
        for (thread, session) in [("thread_id", "session_id"), ("thread-id", "session-id")] {
            assert!(
                key(&[(session, "s1"), (thread, "t1")]).ends_with(":codex:t1"),
                "a Codex thread before its session: {thread}"
            );
            assert!(key(&[(session, "s1")]).ends_with(":codex:s1"), "{session}");
        }
        assert!(key(&all[4..]).ends_with(":opencode:oc"));
        assert!(key(&[]).ends_with(":user-id:ef"));
        let mut no_user = body.clone();
        no_user["metadata"] = json!({});
        assert!(conversation_key(&HeaderMap::new(), &no_user).ends_with(":cache-key:pk"));
        no_user.as_object_mut().unwrap().remove("prompt_cache_key");
        let hashed = conversation_key(&HeaderMap::new(), &no_user);
        assert!(hashed.contains(":content:"));
        no_user["messages"]
            .as_array_mut()
            .unwrap()
            .push(json!({"role": "assistant", "content": "later"}));
        assert_eq!(
            conversation_key(&HeaderMap::new(), &no_user),
            hashed,
            "later messages do not move a hashed conversation"
        );
    }

    #[test]
    fn a_forged_id_under_another_key_is_another_conversation_and_no_key_is_stored() {
        let body = json!({});
        let mine = conversation_key(
            &headers(&[("x-api-key", "sk-mine"), ("x-mektpoy-session", "s")]),
            &body,
        );
        let theirs = conversation_key(
            &headers(&[("x-api-key", "sk-theirs"), ("x-mektpoy-session", "s")]),
            &body,
        );
        assert_ne!(mine, theirs);
        assert!(!mine.contains("sk-mine"));
        // The same key as a bearer token (Anthropic's SDKs from their 2026-10-21 majors on)
        // is the same caller; without a scheme the whole value is the key.
        for value in ["Bearer sk-mine", "bearer  sk-mine"] {
            let bearer = headers(&[("authorization", value), ("x-mektpoy-session", "s")]);
            assert_eq!(conversation_key(&bearer, &body), mine, "{value}");
        }
        let bare = headers(&[("authorization", "sk-mine"), ("x-mektpoy-session", "s")]);
        assert_eq!(conversation_key(&bare, &body), mine);
        let both = headers(&[
            ("x-api-key", "sk-mine"),
            ("authorization", "Bearer sk-theirs"),
            ("x-mektpoy-session", "s"),
        ]);
        assert_eq!(conversation_key(&both, &body), mine, "x-api-key wins");
        let long = "x".repeat(10_000);
        assert!(conversation_key(&headers(&[("x-mektpoy-session", &long)]), &body).len() < 128);
    }
}
