//! Arbitrary bytes as a session file: `Session::load_bytes` returns a session or a typed
//! `LoadError`, never panics. Whatever loads saves (`to_jsonl`) to the bytes it kept (the
//! input up to its torn tail, byte for byte), and those load again to the same events with no
//! torn tail. Loading with limits is a session or a typed error too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mektpoy::{Session, session::FileOptions};

fuzz_target!(|data: &[u8]| {
    match Session::load_bytes(data) {
        Ok(loaded) => {
            let session = &loaded.session;
            let kept = loaded
                .torn_tail
                .map_or(data.len(), |t| usize::try_from(t.offset).unwrap());
            let saved = session.to_jsonl();
            assert_eq!(
                saved.as_bytes(),
                &data[..kept],
                "to_jsonl is the kept bytes"
            );
            let again = Session::load_bytes(saved.as_bytes()).expect("saved bytes load again");
            assert_eq!(again.torn_tail, None);
            assert_eq!(again.unterminated, loaded.unterminated);
            assert_eq!(again.session.events(), session.events());
            assert_eq!(again.session.to_jsonl(), saved);
            // Folds and views of whatever loaded never panic either, and a reload folds alike.
            assert_eq!(again.session.tool_history(), session.tool_history());
            assert_eq!(
                again.session.tool_history_by_value(),
                session.tool_history_by_value()
            );
            let _ = session.view();
            let _ = session.thinking_policy();
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
    // Limits refuse with a typed error, never a panic.
    let limited = FileOptions::new()
        .max_line_bytes(data.len() / 2)
        .max_events(data.len() % 7)
        .load_bytes(data);
    if let Err(e) = limited {
        let _ = e.to_string();
    }
});
