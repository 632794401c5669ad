//! Responses-API answers through the decoders (`mektpoy::response::decode_responses` and
//! `ResponsesStream`): the same text read as a JSON body and as SSE text.
//!
//! Input: the first byte picks how the SSE text is split (`1 + byte % 61` bytes a push, at char
//! boundaries); the rest, as UTF-8 (else nothing), is the answer. Neither decoder panics; the SSE
//! text decodes to the same answer whole and split (or fails both ways); and a body
//! `decode_responses` accepts decodes, sent as the one `response.completed` event a server that
//! streams only lifecycle events sends, to the same answer (decision 129: with no item event the
//! terminal response's `output` is used).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mektpoy::response::{ResponsesStream, decode_responses};

const ID: Option<&str> = Some("m");

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };

    // As a JSON body; the event carries the body's own bytes (a `Value` would reorder its
    // keys), one `data:` line per line of it (SSE joins them with `\n`; a CR would end a line).
    if let Ok(answer) = decode_responses(text, "openai", ID)
        && !text.contains('\r')
    {
        let event = format!(r#"{{"type":"response.completed","response":{text}}}"#);
        let mut sse = String::from("event: response.completed\n");
        for line in event.split('\n') {
            sse.push_str("data: ");
            sse.push_str(line);
            sse.push('\n');
        }
        sse.push('\n');
        let mut stream = ResponsesStream::new("openai", ID);
        let streamed = stream.push_text(&sse).and_then(|()| stream.finish());
        assert_eq!(
            streamed.as_ref().ok(),
            Some(&answer),
            "the body as its completed event: {streamed:?}"
        );
    }

    // As SSE text, whole and split.
    let mut whole = ResponsesStream::new("openai", ID);
    let whole = whole.push_text(text).and_then(|()| whole.finish());
    let size = 1 + usize::from(split % 61);
    let mut pieces = ResponsesStream::new("openai", ID);
    let mut rest = text;
    let mut failed = None;
    while !rest.is_empty() {
        let mut at = size.min(rest.len());
        while !rest.is_char_boundary(at) {
            at += 1;
        }
        if let Err(e) = pieces.push_text(&rest[..at]) {
            failed = Some(e);
            break;
        }
        rest = &rest[at..];
    }
    let split = match failed {
        Some(e) => Err(e),
        None => pieces.finish(),
    };
    assert_eq!(whole.is_ok(), split.is_ok(), "whole {whole:?}, split {split:?}");
    if let (Ok(a), Ok(b)) = (&whole, &split) {
        assert_eq!(a, b, "the split stream decodes to another answer");
    }
});
