//! The debug builds' check that a resumed pass equals a fresh one, for every serializer that
//! resumes ([decision 81](crate::manual::decisions#decision-81)).
//!
//! A pass given a resume point writes only the new wire messages and takes the rest from the
//! previous request of the route; a slip there would send other bytes than a pass from the
//! first message, silently. Every debug build (the tests) therefore runs the pass again from
//! the first message and compares: the bytes (or the refusal), how the body groups the
//! projected messages, and the point left for the next request. Release builds skip it.

use std::fmt::Debug;

use super::{WireError, WireRequest};

/// Panics (debug builds) when the resumed pass's `request` and `next` resume point depart
/// from those of `fresh`, the same pass from the first message; `api` names the serializer
/// in the message.
pub(super) fn check_resumed<R: PartialEq + Debug>(
    api: &str,
    request: Result<&WireRequest, &WireError>,
    next: Option<&R>,
    fresh: impl FnOnce() -> (Result<WireRequest, WireError>, Option<R>),
) {
    let (fresh, fresh_next) = fresh();
    match (fresh.as_ref(), request) {
        (Ok(f), Ok(r)) => {
            assert_eq!(f, r, "resumed {api} body departs");
            assert_eq!(
                f.segments.as_deref().map(|s| &s.carried),
                r.segments.as_deref().map(|s| &s.carried),
                "resumed {api} grouping departs"
            );
        }
        (f, r) => assert_eq!(
            format!("{:?}", f.err()),
            format!("{:?}", r.err()),
            "resumed {api} refusal departs"
        ),
    }
    assert_eq!(fresh_next.as_ref(), next, "resumed {api} state departs");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(body: &str) -> WireRequest {
        WireRequest::new(body, vec![])
    }

    #[test]
    fn equal_passes_pass() {
        let r = request("{}");
        check_resumed("chat", Ok(&r), Some(&1), || (Ok(request("{}")), Some(1)));
        let refused = WireError::MissingMaxTokens;
        check_resumed::<u8>("chat", Err(&refused), None, || {
            (Err(WireError::MissingMaxTokens), None)
        });
    }

    #[test]
    #[should_panic(expected = "resumed chat body departs")]
    fn another_body_panics() {
        let r = request(r#"{"a":1}"#);
        check_resumed("chat", Ok(&r), Some(&1), || (Ok(request("{}")), Some(1)));
    }

    #[test]
    #[should_panic(expected = "resumed Responses refusal departs")]
    fn a_refusal_the_fresh_pass_does_not_make_panics() {
        let refused = WireError::MissingMaxTokens;
        check_resumed::<u8>("Responses", Err(&refused), None, || {
            (Ok(request("{}")), None)
        });
    }

    #[test]
    #[should_panic(expected = "resumed Messages state departs")]
    fn another_resume_point_panics() {
        let r = request("{}");
        check_resumed("Messages", Ok(&r), Some(&1), || {
            (Ok(request("{}")), Some(2))
        });
    }
}
