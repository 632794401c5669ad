//! What a request allocates does not grow with the conversation past what is inherent
//! (decision 147): reading its messages allocates for the new ones only (decisions 157 and
//! 158), and the counterfactual meter takes the messages the previous body held from its cut
//! (decision 159). Counted with the counting allocator the crate's memory tests use, along one
//! conversation of tiny bodies: a count, the same on a busy machine.

#[path = "../../../tests/support/counting.rs"]
mod counting;

#[path = "support/drive.rs"]
mod drive;

use std::sync::atomic::Ordering::Relaxed;

use mektpoy_proxy::Store;

/// Bytes allocated by each piece of each request (the pieces `drive::run` names) of one
/// conversation of `requests` requests with `tools` tools.
fn pieces(requests: usize, tools: usize) -> Vec<[usize; 6]> {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("per-request.db")).unwrap();
    let mut out = Vec::with_capacity(requests);
    let mut row = [0; 6];
    let mut counted = 0;
    drive::run(
        &store,
        "per-request",
        (requests, tools, 8, true),
        &mut |lap| {
            let now = counting::ALLOCATED.load(Relaxed);
            if let Some(k) = lap {
                row[k] = now - counted;
                if k == 5 {
                    out.push(row);
                }
            }
            counted = now;
        },
    );
    out
}

/// The median of piece `k` over `rows`.
fn median(rows: &[[usize; 6]], k: usize) -> usize {
    let mut xs: Vec<usize> = rows.iter().map(|r| r[k]).collect();
    xs.sort_unstable();
    xs[xs.len() / 2]
}

#[test]
fn a_requests_reading_and_metering_allocate_the_same_at_request_300_as_at_request_20() {
    // Tools are read once, so 20 of them cost nothing after the first request.
    let rows = pieces(300, 20);
    let (early, late) = (&rows[10..20], &rows[290..300]);
    // Reading the messages: keying each, listing and decoding the new ones. Before decision
    // 157 every request listed every message's key, entry and handle (some 60 bytes a
    // message: 560 messages more at request 300, about 33 KB more). The counterfactual meter
    // (piece 4) is counted in release builds only: a debug build checks each of its results
    // against a whole parse of the body, which allocates in proportion to it.
    let checked: &[(usize, &str)] = if cfg!(debug_assertions) {
        &[(1, "naming the conversation"), (2, "reading the messages")]
    } else {
        &[
            (1, "naming the conversation"),
            (2, "reading the messages"),
            (4, "metering the client's body"),
        ]
    };
    for &(k, piece) in checked {
        let (a, z) = (median(early, k), median(late, k));
        eprintln!("{piece}: {a} bytes at requests 11-20, {z} at 291-300");
        assert!(
            z <= a + a / 5 + 512,
            "{piece}: {a} bytes a request at requests 11-20, {z} at 291-300"
        );
    }
}
