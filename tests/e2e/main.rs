//! End-to-end tests of the whole path — record → fold → project → serialize → send — against a
//! loopback stand-in that behaves like the provider (issue 6).
//!
//! - `standin`: the stand-in provider (the `mektpoy-standin` workspace member: `std::net`,
//!   127.0.0.1) and the HTTP client side (`ureq`).
//!   It answers exactly as the vendor does, a JSON body or (`"stream": true`) server-sent
//!   events; what only the tests need comes in `x-standin-*` response headers.
//! - `agent`: a minimal agent loop over one session and one route: it sends what
//!   `Request::to_wire` prepared, decodes the response with the crate (`mektpoy::response`),
//!   appends the answer as it came (signed thinking included), runs the tool calls it holds,
//!   and checks the crate's `Meter` against the stand-in on every request.
//! - `headless`: the design note's scenario, a prompt append and a deferred addition in one step,
//!   by reference, by value and without a mode.
//! - `churn`: a 40-step session with tool churn on six routes (addition-only, in-history by
//!   reference with and without the placeholder, no mode, inline definitions, no mode with bound
//!   thinking), every cache loss derived from the crate's reference and asserted exactly.
//! - `continuation`: a tool change right after an assistant message waits for the next user
//!   turn; on Claude models that continuation is refused before any I/O (assistant prefill).
//! - `diagnostics`: the loop asks for Anthropic's cache diagnostics; for a tool change on a
//!   route without a mode, a system prompt change and a compaction, the stand-in's measured
//!   first divergence agrees with the attribution's prediction (`Attribution::check`), and a
//!   request that extends the previous one has no miss; under random churn on every Claude
//!   route the report agrees with the prediction at every request.
//! - `random_churn`: seeded random churn on every route: always accepted (the crate refuses the
//!   prefill steps on Claude models), losses only where the spec allows them.
//! - `random_loop`: random loops on every Messages route, on unknown and dated ids and on
//!   OpenAI-compatible chat routes (OpenAI's, DeepSeek's chat endpoint) and on OpenAI's
//!   Responses routes (churn, refused tools, compactions, calls, thinking-only answers, cut-off
//!   answers and retries, 529/500 provider errors and retries, kills and reopens of the session
//!   file, a second loop on another model over the same log): nothing refused, retries
//!   byte-identical, meter exact.
//! - `replay_routes`: a log with churn, calls, a compaction and a thinking-only answer replayed
//!   on every Messages route of the catalog and on unknown and dated ids: every body accepted.
//! - `replay_meter`: a demo-like log and `replay_routes`' log replayed on every Messages route
//!   (by-reference variants, unknown and dated ids too): each metered request's row equals
//!   the stand-in's measured figures, and each route's printed totals its usage.
//! - `responses`: the churn script and the headless scenario on OpenAI's Responses API
//!   (`gpt-5.4` addition-only, `gpt-5.5` under `openai/*`), JSON and streamed: every request
//!   accepted, the meter exact, each answer's `function_call` arguments and reasoning items
//!   sent back byte for byte, additions kept on `gpt-5.4`, every change a rewrite on `gpt-5.5`.
//! - `resume`: kill and resume over server-sent events, with a request in flight (the stream
//!   cut off) and between a tool call and its result.
//! - `thinking_only`: an answer of thinking alone, then a rewrite that leaves its thinking out:
//!   the loop goes on, and the stand-in accepts every request.
//!
//! `churn` runs every route twice, as JSON and as server-sent events, and asserts the crate
//! decodes the same answers from both.
//!
//! The live test against the real DeepSeek API is `tests/live_deepseek.rs` (ignored by default;
//! see `docs/live-test.md`).

mod agent;
mod churn;
mod continuation;
mod diagnostics;
mod headless;
mod random_churn;
mod random_loop;
mod replay_meter;
mod replay_routes;
mod responses;
mod resume;
mod standin;
#[path = "../support/mod.rs"]
mod support;
mod thinking_only;
