//! What decoding and loading allocate, measured with a counting allocator (reference §1 promises
//! O(size of the event); this binary checks the constant stays small).
//!
//! One test function so that no other test allocates while a figure is taken. The figures in
//! `docs/benchmarks.md` come from
//! `cargo test --release --test decode_memory -- --nocapture` (the sizes below are scaled
//! up there with `MEKTPOY_MEMORY_MIB=48`).

use std::sync::atomic::Ordering::Relaxed;

#[path = "support/counting.rs"]
mod counting;
use counting::{CURRENT, PEAK};

use mektpoy::{Event, Session};

/// Runs `f` and returns its result with the peak of bytes allocated above the starting point
/// while it ran, and the bytes still allocated (above the start) once it returned.
fn measure<T>(f: impl FnOnce() -> T) -> (T, usize, usize) {
    let start = CURRENT.load(Relaxed);
    PEAK.store(start, Relaxed);
    let out = f();
    let peak = PEAK.load(Relaxed) - start;
    let retained = CURRENT.load(Relaxed).saturating_sub(start);
    (out, peak, retained)
}

fn mib() -> usize {
    std::env::var("MEKTPOY_MEMORY_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
}

/// A user message of `n`-byte line made of small text blocks.
fn many_blocks_line(bytes: usize) -> String {
    let block = r#"{"type":"text","text":"abcdefgh"},"#;
    let mut line = String::with_capacity(bytes + 200);
    line.push_str(
        r#"{"type":"user/message","data":{"message":{"id":"u1","role":"user","content":["#,
    );
    while line.len() < bytes {
        line.push_str(block);
    }
    line.pop();
    line.push_str(r#"],"source":{"kind":"user"}}},"surfaceOp":"append"}"#);
    line
}

fn report(name: &str, input: usize, peak: usize, retained: usize) -> (f64, f64) {
    let (p, r) = (peak as f64 / input as f64, retained as f64 / input as f64);
    println!(
        "{name}: input {:.1} MiB, peak {:.1} MiB ({p:.1}x), retained {:.1} MiB ({r:.1}x)",
        input as f64 / 1048576.0,
        peak as f64 / 1048576.0,
        retained as f64 / 1048576.0,
    );
    (p, r)
}

#[test]
fn decode_and_load_allocate_a_small_multiple_of_the_input() {
    let size = mib() << 20;

    // One line of many small blocks, decoded.
    let line = many_blocks_line(size);
    let (event, peak, retained) = measure(|| Event::from_json(&line).unwrap());
    let (p, _) = report(
        "one line of small blocks, Event::from_json",
        line.len(),
        peak,
        retained,
    );
    // Decoding through a `Value` tree first peaked at 20x; typed, the peak is what is kept.
    assert!(p < 5.0, "decode peak {p:.1}x the line");
    // Above what is kept, only the growth slack of the block vector (it doubles while the
    // blocks stream in; the text gives no length).
    assert!(
        peak < 2 * retained,
        "a transient tree: {peak} vs {retained}"
    );
    drop(event);

    // The same line loaded from a file's bytes (the line's text is kept for exact bytes).
    let mut file = format!("{{\"type\":\"session\",\"version\":0,\"id\":\"s\"}}\n{line}\n");
    drop(line);
    let (loaded, peak, retained) = measure(|| Session::load_bytes(file.as_bytes()).unwrap());
    let (p, _) = report(
        "one line of small blocks, Session::load_bytes",
        file.len(),
        peak,
        retained,
    );
    assert!(p < 6.0, "load peak {p:.1}x the file");
    drop(loaded);

    // Many tiny opaque events.
    file.clear();
    file.push_str("{\"type\":\"session\",\"version\":0,\"id\":\"s\"}\n");
    let mut i = 0;
    while file.len() < size {
        file.push_str(&format!("{{\"type\":\"x/tick\",\"data\":{{\"n\":{i}}}}}\n"));
        i += 1;
    }
    let (loaded, peak, retained) = measure(|| Session::load_bytes(file.as_bytes()).unwrap());
    report(
        &format!("{i} tiny opaque events, Session::load_bytes"),
        file.len(),
        peak,
        retained,
    );
    // What an opaque event keeps is its public form (`IndexMap<String, Value>`, a `Value`
    // object being a B-tree node of ~600 bytes); decoding adds nothing transient on top.
    assert!(peak < retained + retained / 8, "{peak} vs {retained}");
    drop(loaded);
}
