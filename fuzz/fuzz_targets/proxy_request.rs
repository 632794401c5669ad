//! Client bodies through the proxy's request-to-log path (`mektpoy_proxy::fuzzing::take`: the
//! server's steps under a conversation's lock, in process, on an in-memory SQLite store): up
//! to eight bodies, one conversation. Each is refused with a typed `Refusal` that changes
//! nothing (the stored bytes as they were; the session in memory the stored log, or dropped
//! to be loaded again), or accepted: the body for upstream is JSON, and the stored log loads back,
//! whole, to the session in memory.
//!
//! Input: the first two bytes' bits pick each body's API (bit i of the second byte set: the
//! Responses API, `mektpoy_proxy::fuzzing::take_responses`; else bit i of the first set: the
//! OpenAI-compatible chat API; else Messages); the rest is split on NUL bytes (JSON text holds
//! none) into the bodies.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mektpoy::Session;
use mektpoy_proxy::Store;
use mektpoy_proxy::conversation_state::Refusal;
use mektpoy_proxy::fuzzing::{take, take_responses};

const KEY: &str = "0123:session:fuzz";

fuzz_target!(|data: &[u8]| {
    let [apis, responses, rest @ ..] = data else {
        return;
    };
    let store = Store::open(":memory:").expect("an in-memory store");
    let mut slot = None;
    for (i, body) in rest.split(|&b| b == 0).take(8).enumerate() {
        let chat = apis >> i & 1 == 1;
        let stored = store.load(KEY).expect("the store reads");
        let taken = if responses >> i & 1 == 1 {
            take_responses(&store, &mut slot, KEY, body)
        } else {
            take(&store, &mut slot, KEY, chat, body)
        };
        match taken {
            Err(refusal) => {
                assert!(
                    matches!(refusal, Refusal::Invalid(_)),
                    "an in-memory store does not fail: {refusal}"
                );
                assert_eq!(
                    store.load(KEY).expect("the store reads"),
                    stored,
                    "a refused request changes nothing stored: {refusal}"
                );
                // The copy in memory is the stored log, or dropped (loaded again next time).
                if let Some(c) = slot.as_mut() {
                    let held = c.agent().session().to_jsonl().into_bytes();
                    assert_eq!(Some(held), stored, "{refusal}");
                }
            }
            Ok(wire) => {
                let _: serde_json::Value =
                    serde_json::from_str(wire.body()).expect("the upstream body is JSON");
                let bytes = store
                    .load(KEY)
                    .expect("the store reads")
                    .expect("an accepted request is stored");
                let loaded = Session::load_bytes(&bytes).expect("the stored log loads");
                assert!(loaded.torn_tail.is_none(), "whole batches only");
                let session = slot.as_mut().expect("held").agent().session();
                assert_eq!(loaded.session.to_jsonl(), session.to_jsonl());
                assert_eq!(loaded.session.to_jsonl().as_bytes(), &bytes[..]);
            }
        }
    }
});
