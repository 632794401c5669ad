//! Usage normalized across the APIs.
//!
//! The vendors split the same four numbers differently, and a cache meter that adds the wrong
//! ones reports a hit rate that is off by the cached prefix. Read 2026-12-01:
//! - Messages API (<https://platform.claude.com/docs/en/api/beta/messages.md>; the vendor's
//!   generated `Usage` type): "Total input tokens in a request is the summation of
//!   `input_tokens`, `cache_creation_input_tokens`, and `cache_read_input_tokens`", so
//!   `input_tokens` **excludes** both cache figures. `cache_creation` breaks the written tokens
//!   down by TTL (`ephemeral_5m_input_tokens`, `ephemeral_1h_input_tokens`). In a stream, the
//!   `message_delta` usage is cumulative and replaces what `message_start` said.
//! - OpenAI-compatible chat: `prompt_tokens` **includes** `prompt_tokens_details.cached_tokens`;
//!   nothing reports tokens written to a cache.
//! - DeepSeek chat (<https://api-docs.deepseek.com/guides/kv_cache>): `prompt_cache_hit_tokens`
//!   and `prompt_cache_miss_tokens`, which add up to `prompt_tokens`.
//! - OpenAI Responses (read 2026-12-06; the API reference's `ResponseUsage`, and
//!   <https://developers.openai.com/api/docs/guides/prompt-caching>): `input_tokens`
//!   **includes** `input_tokens_details.cached_tokens`; `cache_write_tokens` on GPT-5.6 and
//!   later.

use serde::Deserialize;

use super::{Malformation, ResponseError};

/// What a request cost, in the same terms for every API.
///
/// `prompt_tokens` is the whole prompt; `cache_read_tokens` and `cache_write_tokens` are parts
/// of it (`None` when the vendor does not report the figure, which is not the same as zero).
///
/// | | `prompt_tokens` | `cache_read_tokens` | `cache_write_tokens` |
/// |---|---|---|---|
/// | Messages | `input_tokens + cache_read_input_tokens + cache_creation_input_tokens` | `cache_read_input_tokens` | `cache_creation_input_tokens` |
/// | OpenAI chat | `prompt_tokens` | `prompt_tokens_details.cached_tokens` | — |
/// | DeepSeek chat | `prompt_tokens` (else hit + miss) | `prompt_cache_hit_tokens` | — |
/// | OpenAI Responses | `input_tokens` | `input_tokens_details.cached_tokens` | `input_tokens_details.cache_write_tokens` (GPT-5.6 and later) |
///
/// ```
/// use mektpoy::response::decode_chat;
/// // DeepSeek: hit and miss add up to the prompt.
/// let body = r#"{"id":"r1","model":"deepseek-flash","choices":[{"index":0,"message":{"role":"assistant",
///   "content":"Hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":100,"completion_tokens":2,
///   "prompt_cache_hit_tokens":64,"prompt_cache_miss_tokens":36}}"#;
/// let usage = decode_chat(body, "deepseek", None)?.usage.unwrap();
/// assert_eq!((usage.prompt_tokens, usage.cache_read_tokens, usage.cache_write_tokens), (100, Some(64), None));
/// # Ok::<(), mektpoy::response::ResponseError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Usage {
    /// Every prompt token of the request, cached or not.
    pub prompt_tokens: u64,
    /// Of those, the tokens read from the provider's cache.
    pub cache_read_tokens: Option<u64>,
    /// Of those, the tokens written to the provider's cache (Messages API; Responses API on
    /// GPT-5.6 and later).
    pub cache_write_tokens: Option<u64>,
    /// The tokens of the answer (reasoning included).
    pub output_tokens: u64,
    /// The written tokens by cache lifetime (Messages `usage.cache_creation`).
    pub cache_creation: Option<CacheCreation>,
    /// Of the output, the reasoning tokens (chat `completion_tokens_details.reasoning_tokens`,
    /// Responses `output_tokens_details.reasoning_tokens`).
    pub reasoning_tokens: Option<u64>,
}

impl Usage {
    /// The prompt tokens neither read from nor written to the cache.
    ///
    /// ```
    /// use mektpoy::response::decode_messages;
    /// let body = r#"{"id":"m1","type":"message","role":"assistant","model":"claude-fable-5-1",
    ///   "content":[{"type":"text","text":"Hi"}],"usage":{"input_tokens":10,
    ///   "cache_read_input_tokens":2000,"cache_creation_input_tokens":300,"output_tokens":2}}"#;
    /// let usage = decode_messages(body, "anthropic", None)?.usage.unwrap();
    /// assert_eq!(usage.prompt_tokens, 2310);
    /// assert_eq!(usage.uncached_prompt_tokens(), 10);
    /// # Ok::<(), mektpoy::response::ResponseError>(())
    /// ```
    pub fn uncached_prompt_tokens(&self) -> u64 {
        self.prompt_tokens
            .saturating_sub(self.cache_read_tokens.unwrap_or(0))
            .saturating_sub(self.cache_write_tokens.unwrap_or(0))
    }
}

/// Messages `usage.cache_creation`: the tokens written to the cache, by lifetime.
///
/// ```
/// use mektpoy::response::decode_messages;
/// let body = r#"{"id":"m1","type":"message","role":"assistant","model":"claude-fable-5-1",
///   "content":[{"type":"text","text":"Hi"}],"usage":{"input_tokens":10,"cache_creation_input_tokens":300,
///   "cache_creation":{"ephemeral_5m_input_tokens":100,"ephemeral_1h_input_tokens":200},"output_tokens":2}}"#;
/// let created = decode_messages(body, "anthropic", None)?.usage.unwrap().cache_creation.unwrap();
/// assert_eq!((created.ephemeral_5m_input_tokens, created.ephemeral_1h_input_tokens), (Some(100), Some(200)));
/// # Ok::<(), mektpoy::response::ResponseError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Deserialize)]
#[non_exhaustive]
pub struct CacheCreation {
    /// Written with the 5-minute lifetime.
    #[serde(default)]
    pub ephemeral_5m_input_tokens: Option<u64>,
    /// Written with the 1-hour lifetime.
    #[serde(default)]
    pub ephemeral_1h_input_tokens: Option<u64>,
}

/// Messages `usage` as sent (every field optional: a `message_delta` carries only some).
#[derive(Clone, Debug, Default, Deserialize)]
pub(super) struct MessagesUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation: Option<CacheCreation>,
}

impl MessagesUsage {
    /// Takes the fields a later (cumulative) report sends.
    pub(super) fn update(&mut self, later: MessagesUsage) {
        fn take<T>(into: &mut Option<T>, from: Option<T>) {
            if from.is_some() {
                *into = from;
            }
        }
        take(&mut self.input_tokens, later.input_tokens);
        take(&mut self.output_tokens, later.output_tokens);
        take(
            &mut self.cache_creation_input_tokens,
            later.cache_creation_input_tokens,
        );
        take(
            &mut self.cache_read_input_tokens,
            later.cache_read_input_tokens,
        );
        take(&mut self.cache_creation, later.cache_creation);
    }

    pub(super) fn normalize(&self, context: &str) -> Result<Usage, ResponseError> {
        let required = |value: Option<u64>, name: &'static str| {
            value.ok_or_else(|| ResponseError::malformed(context, Malformation::UsageField(name)))
        };
        let input = required(self.input_tokens, "input_tokens")?;
        let read = self.cache_read_input_tokens;
        let write = self.cache_creation_input_tokens;
        Ok(Usage {
            prompt_tokens: input
                .saturating_add(read.unwrap_or(0))
                .saturating_add(write.unwrap_or(0)),
            cache_read_tokens: read,
            cache_write_tokens: write,
            output_tokens: required(self.output_tokens, "output_tokens")?,
            cache_creation: self.cache_creation,
            reasoning_tokens: None,
        })
    }
}

/// Responses `usage` as sent: `input_tokens` includes the cached tokens (as chat's
/// `prompt_tokens` does); `input_tokens_details.cache_write_tokens` is reported on GPT-5.6 and
/// later (the prompt-caching guide: "OpenAI reports writes in cache_write_tokens and reads in
/// cached_tokens"). The guide does not say in so many words that `input_tokens` includes the
/// written tokens; they are read as included, like the cached ones (the safe side: the
/// uncached figure can only come out smaller, never above the prompt).
#[derive(Clone, Debug, Default, Deserialize)]
pub(super) struct ResponsesUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    input_tokens_details: Option<InputDetails>,
    #[serde(default)]
    output_tokens_details: Option<CompletionDetails>,
}

#[derive(Clone, Debug, Default, Deserialize)]
struct InputDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
    #[serde(default)]
    cache_write_tokens: Option<u64>,
}

impl ResponsesUsage {
    pub(super) fn normalize(&self, context: &str) -> Result<Usage, ResponseError> {
        let required = |value: Option<u64>, name: &'static str| {
            value.ok_or_else(|| ResponseError::malformed(context, Malformation::UsageField(name)))
        };
        let details = self.input_tokens_details.as_ref();
        Ok(Usage {
            prompt_tokens: required(self.input_tokens, "input_tokens")?,
            cache_read_tokens: details.and_then(|d| d.cached_tokens),
            cache_write_tokens: details.and_then(|d| d.cache_write_tokens),
            output_tokens: required(self.output_tokens, "output_tokens")?,
            cache_creation: None,
            reasoning_tokens: self
                .output_tokens_details
                .as_ref()
                .and_then(|d| d.reasoning_tokens),
        })
    }
}

/// Chat `usage` as sent, OpenAI's fields and DeepSeek's.
#[derive(Clone, Debug, Default, Deserialize)]
pub(super) struct ChatUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
    #[serde(default)]
    completion_tokens_details: Option<CompletionDetails>,
    #[serde(default)]
    prompt_cache_hit_tokens: Option<u64>,
    #[serde(default)]
    prompt_cache_miss_tokens: Option<u64>,
}

#[derive(Clone, Debug, Default, Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Clone, Debug, Default, Deserialize)]
struct CompletionDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

impl ChatUsage {
    pub(super) fn normalize(&self, context: &str) -> Result<Usage, ResponseError> {
        let deepseek = match (self.prompt_cache_hit_tokens, self.prompt_cache_miss_tokens) {
            (Some(hit), Some(miss)) => Some(hit.saturating_add(miss)),
            _ => None,
        };
        let prompt_tokens = self.prompt_tokens.or(deepseek).ok_or_else(|| {
            ResponseError::malformed(context, Malformation::UsageField("prompt_tokens"))
        })?;
        let cached = self
            .prompt_tokens_details
            .as_ref()
            .and_then(|d| d.cached_tokens);
        Ok(Usage {
            prompt_tokens,
            // DeepSeek's own figure first: it is the one its pricing names.
            cache_read_tokens: self.prompt_cache_hit_tokens.or(cached),
            cache_write_tokens: None,
            output_tokens: self.completion_tokens.ok_or_else(|| {
                ResponseError::malformed(context, Malformation::UsageField("completion_tokens"))
            })?,
            cache_creation: None,
            reasoning_tokens: self
                .completion_tokens_details
                .as_ref()
                .and_then(|d| d.reasoning_tokens),
        })
    }
}
