//! The loopback provider stand-in (the `mektpoy-standin` workspace member: what it refuses and
//! what it answers are in its crate docs), with its client taking the crate's [`WireRequest`].
//!
//! [`WireRequest`]: mektpoy::WireRequest

pub use mektpoy_standin::*;

/// Posts a serialized request to the stand-in through a real HTTP client (`ureq`), keyed by
/// `session`, announcing the route's deferred section size: the response as received. `Err`
/// only for a transport failure (status 0).
pub fn post(
    session: &str,
    section_bytes: u32,
    request: &mektpoy::WireRequest,
) -> Result<Response, Refused> {
    client::post(session, section_bytes, request.body(), request.headers())
}
