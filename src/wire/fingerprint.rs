//! What a Messages-API body looks like to the provider's prefix checks: the serialized
//! `tools`, `system` and each message with thinking blocks and cache breakpoints ignored.
//!
//! Two requests of a route compare by these: a request *rewrites* when its `tools` or
//! `system` differ from the previous request's, or when the previous request's messages are
//! not a prefix of its own. Thinking blocks are ignored because the thinking policy decides
//! them; `cache_control` markers because they move without changing the prompt.

use serde_json::Value;

use super::Rewrite;

/// A Messages-API body cut into what rewrite detection and the lookback compare.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Fingerprint {
    tools: String,
    system: String,
    messages: Vec<String>,
    /// Content blocks over the wire messages, in order (thinking included): what the
    /// automatic-caching lookback counts.
    pub blocks: usize,
}

impl Fingerprint {
    /// The fingerprint of a body the serializer wrote; `None` for a body that is not a
    /// Messages-API request.
    pub fn of(body: &str) -> Option<Fingerprint> {
        let v: Value = serde_json::from_str(body).ok()?;
        let messages = v.get("messages")?.as_array()?;
        let mut blocks = 0;
        let messages = messages
            .iter()
            .map(|m| {
                let mut m = m.clone();
                if let Some(content) = m.get_mut("content").and_then(Value::as_array_mut) {
                    blocks += content.len();
                    content.retain(|b| {
                        !matches!(
                            b.get("type").and_then(Value::as_str),
                            Some("thinking" | "redacted_thinking")
                        )
                    });
                    for b in content.iter_mut() {
                        if let Some(b) = b.as_object_mut() {
                            b.remove("cache_control");
                        }
                    }
                }
                m.to_string()
            })
            .collect();
        let part = |key: &str| v.get(key).map(Value::to_string).unwrap_or_default();
        Some(Fingerprint {
            tools: part("tools"),
            system: part("system"),
            messages,
            blocks,
        })
    }

    /// What `self` (a later request) rewrote against `previous`, if anything.
    pub fn rewrite_since(&self, previous: &Fingerprint) -> Option<Rewrite> {
        if self.tools != previous.tools {
            return Some(Rewrite::Tools);
        }
        if self.system != previous.system {
            return Some(Rewrite::System);
        }
        previous
            .messages
            .iter()
            .zip(
                self.messages
                    .iter()
                    .map(Some)
                    .chain(std::iter::repeat(None)),
            )
            .position(|(p, n)| n != Some(p))
            .map(|message| Rewrite::History { message })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(body: &str) -> Fingerprint {
        Fingerprint::of(body).unwrap()
    }

    #[test]
    fn rewrites_are_tools_system_or_a_broken_message_prefix() {
        let base = fp(
            r#"{"model":"m","system":"s","tools":[{"name":"a"}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}"#,
        );
        let longer = fp(
            r#"{"model":"m","system":"s","tools":[{"name":"a"}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"x"},{"type":"text","text":"ok"}]}]}"#,
        );
        assert_eq!(longer.rewrite_since(&base), None);
        assert_eq!(longer.blocks, 3);
        let tools = fp(
            r#"{"model":"m","system":"s","tools":[{"name":"b"}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}"#,
        );
        assert_eq!(tools.rewrite_since(&base), Some(Rewrite::Tools));
        let system = fp(
            r#"{"model":"m","system":"t","tools":[{"name":"a"}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}"#,
        );
        assert_eq!(system.rewrite_since(&base), Some(Rewrite::System));
        let history = fp(
            r#"{"model":"m","system":"s","tools":[{"name":"a"}],"messages":[{"role":"user","content":[{"type":"text","text":"summary"}]}]}"#,
        );
        assert_eq!(
            history.rewrite_since(&base),
            Some(Rewrite::History { message: 0 })
        );
        // A shorter request does not extend the previous one.
        assert_eq!(
            base.rewrite_since(&longer),
            Some(Rewrite::History { message: 1 })
        );
    }

    #[test]
    fn thinking_blocks_and_cache_breakpoints_are_ignored() {
        let with = fp(
            r#"{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"x"},{"type":"text","text":"ok"}]}]}"#,
        );
        let without = fp(
            r#"{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"assistant","content":[{"type":"text","text":"ok"}]}]}"#,
        );
        assert_eq!(with.rewrite_since(&without), None);
        assert_eq!(without.rewrite_since(&with), None);
        assert_eq!((with.blocks, without.blocks), (3, 2));
    }
}
