//! End-to-end tests of the whole path — record → fold → project → serialize → send — against a
//! loopback stand-in that behaves like the provider (issue 6).
//!
//! - `standin`: the stand-in provider (`std::net`, 127.0.0.1) and the HTTP client side (`ureq`).
//! - `agent`: a minimal agent loop over one session and one route.
//! - `headless`: the design note's scenario, a prompt append and a deferred addition in one step.
//! - `churn`: a 40-step session with tool churn on four routes, every cache loss derived from the
//!   spec and asserted exactly.
//! - `continuation`: a tool change right after an assistant message waits for the next user turn.
//! - `random_churn`: seeded random churn on every route: always accepted, losses only where the
//!   spec allows them.
//!
//! The live test against the real DeepSeek API is `tests/live_deepseek.rs` (ignored by default;
//! see `docs/live-test.md`).

mod agent;
mod churn;
mod continuation;
mod headless;
mod random_churn;
mod standin;
