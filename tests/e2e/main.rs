//! End-to-end tests of the whole path — record → fold → project → serialize → send — against a
//! loopback stand-in that behaves like the provider (issue 6).
//!
//! - `standin`: the stand-in provider (`std::net`, 127.0.0.1) and the HTTP client side (`ureq`).

mod standin;
