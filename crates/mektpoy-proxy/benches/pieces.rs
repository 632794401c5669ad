//! Where the proxy's own time goes along one conversation: each piece of a request's work
//! (reading the body, naming the conversation, reading its messages, logging and
//! serializing, metering the client's own body, metering and logging the answer) timed in
//! process, without HTTP or the upstream, at requests 1–10 and 991–1,000 of one conversation
//! of tiny bodies and of Claude Code-sized ones. Every request is timed once (a request
//! cannot be repeated without changing the conversation), so this bench has its own harness.
//!
//! Beside each piece's time, the bytes it allocates (a counting allocator): a count, not a
//! clock, so that what grows with the conversation shows on a busy machine too.
//!
//! `cargo bench -p mektpoy-proxy --bench pieces` (figures in `docs/benchmarks.md`);
//! `-- --quick` for 100 requests; `-- --memory` instead holds 20 conversations of 20 requests
//! in memory for each of three body shapes and counts the bytes they hold (the counting
//! allocator's live bytes, and the process's resident set beside it), with and without the
//! counterfactual meter, to tell what a conversation's memory is made of.

#[path = "../../../tests/support/counting.rs"]
mod counting;
#[path = "../tests/support/drive.rs"]
mod drive;

use std::sync::atomic::Ordering::Relaxed;

use std::time::Instant;

use mektpoy_proxy::Store;
use mektpoy_proxy::conversation_state::Conversation;

const PIECES: [&str; 6] = [
    "read the body",
    "name the conversation",
    "read the messages",
    "log and serialize",
    "meter the client's body",
    "meter and log the answer",
];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        return;
    }
    if args.iter().any(|a| a == "--memory") {
        memory();
        return;
    }
    let requests = if args.iter().any(|a| a == "--quick") {
        100
    } else {
        1_000
    };
    println!(
        "| bodies | piece | requests 1–10, median (ms) | {}–{requests}, median (ms) | allocated, 1–10 (KB) | {}–{requests} (KB) |",
        requests - 9,
        requests - 9
    );
    println!("|---|---|---|---|---|---|");
    for (name, tools, turn) in [("tiny", 1, 8), ("Claude Code-sized", 300, 100)] {
        let pieces = conversation(requests, tools, turn);
        // Medians: on a shared machine a mean is one preempted request away from another
        // figure.
        let median = |w: &[Piece], f: &dyn Fn(&Piece) -> f64| {
            let mut xs: Vec<f64> = w.iter().map(f).collect();
            xs.sort_by(f64::total_cmp);
            xs[xs.len() / 2]
        };
        let (first, last) = (&pieces[..10], &pieces[requests - 10..]);
        for (k, piece) in PIECES.iter().enumerate() {
            let time = |p: &Piece| p.ms[k];
            let bytes = |p: &Piece| p.bytes[k] as f64 / 1024.0;
            println!(
                "| {name} | {piece} | {:.3} | {:.3} | {:.1} | {:.1} |",
                median(first, &time),
                median(last, &time),
                median(first, &bytes),
                median(last, &bytes)
            );
        }
        let time = |p: &Piece| p.ms.iter().sum();
        let bytes = |p: &Piece| p.bytes.iter().sum::<usize>() as f64 / 1024.0;
        println!(
            "| {name} | **all** | {:.3} | {:.3} | {:.1} | {:.1} |",
            median(first, &time),
            median(last, &time),
            median(first, &bytes),
            median(last, &bytes)
        );
    }
}

/// One request's pieces: each one's time (ms) and the bytes it allocated.
#[derive(Clone, Copy, Default)]
struct Piece {
    ms: [f64; 6],
    bytes: [usize; 6],
}

/// `VmRSS` of this process, in MiB.
fn rss() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| {
            l.strip_prefix("VmRSS:")?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse::<f64>()
                .ok()
        })
        .unwrap_or(0.0)
        / 1024.0
}

/// The bytes held by 20 conversations of 20 requests, per body shape: counted (the live bytes
/// of the counting allocator), with and without the counterfactual meter, and the resident
/// set grown beside it.
fn memory() {
    println!(
        "| tools | turn (bytes) | last body (KB) | held per conversation (KB) | without the counterfactual meter (KB) | resident set grown, per conversation (KB) |"
    );
    println!("|---|---|---|---|---|---|");
    for (tools, turn) in [(1, 12_000), (300, 100), (300, 12_000)] {
        let mut figures = [0.0; 2];
        let mut grown = 0.0;
        let mut last = 0;
        for (k, direct) in [true, false].into_iter().enumerate() {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(dir.path().join("memory.db")).unwrap();
            let (before, resident) = (counting::CURRENT.load(Relaxed), rss());
            let mut held = Vec::new();
            for n in 0..20 {
                let (c, len) = run(
                    &store,
                    &format!("memory-{n}"),
                    (20, tools, turn, direct),
                    &mut Vec::new(),
                );
                held.push(c);
                last = len;
            }
            let live = counting::CURRENT.load(Relaxed).saturating_sub(before);
            figures[k] = live as f64 / 1024.0 / 20.0;
            if direct {
                grown = (rss() - resident) * 1024.0 / 20.0;
            }
            drop(held);
        }
        println!(
            "| {tools} | {turn} | {} | {:.0} | {:.0} | {grown:.0} |",
            last / 1024,
            figures[0],
            figures[1]
        );
    }
}

/// One conversation of `requests` requests: each request's pieces.
fn conversation(requests: usize, tools: usize, turn: usize) -> Vec<Piece> {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("pieces.db")).unwrap();
    let mut out = Vec::with_capacity(requests);
    run(&store, "pieces", (requests, tools, turn, true), &mut out);
    out
}

/// One conversation `session` of `requests` requests on `store` (the client's bodies metered
/// when `direct`), each request's pieces pushed to `out`: the conversation, held, and the
/// last body's length.
fn run(
    store: &Store,
    session: &str,
    shape: (usize, usize, usize, bool),
    out: &mut Vec<Piece>,
) -> (Conversation, usize) {
    let mut t = Piece::default();
    let mut clock = Instant::now();
    let mut counted = counting::ALLOCATED.load(Relaxed);
    drive::run(store, session, shape, &mut |lap| {
        if let Some(k) = lap {
            t.ms[k] = clock.elapsed().as_secs_f64() * 1e3;
            let now = counting::ALLOCATED.load(Relaxed);
            t.bytes[k] = now - counted;
            counted = now;
            if k == 5 {
                out.push(t);
            }
        } else {
            t = Piece::default();
            counted = counting::ALLOCATED.load(Relaxed);
        }
        clock = Instant::now();
    })
}
