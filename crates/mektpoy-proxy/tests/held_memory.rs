//! What a held conversation keeps, counted (decision 150): the bytes live after Claude
//! Code-sized conversations (300 tools, 12 KB turns, 20 requests each) are held, measured
//! with the counting allocator the crate's memory tests use. Before decision 150 a
//! conversation held two sets of decoded tools and the recorder's copy of every turn's
//! text: 3,262 KB each in release; now about 2,270 (2,265, and since decision 158 a handle
//! per tool to take the next request's tools by their bytes).

#[path = "../../../tests/support/counting.rs"]
mod counting;

#[path = "support/drive.rs"]
mod drive;

use std::sync::atomic::Ordering::Relaxed;

use mektpoy_proxy::Store;
use mektpoy_proxy::conversation_state::Conversation;

/// One conversation of `requests` Claude Code-sized requests (300 tools, 12 KB turns),
/// answered, held.
fn conversation(store: &Store, session: &str, requests: usize) -> Conversation {
    drive::run(store, session, (requests, 300, 12_000, true), &mut |_| {}).0
}

#[test]
fn a_held_claude_code_sized_conversation_keeps_its_turns_about_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("held.db")).unwrap();
    // The store's own caches and the process's one-time allocations first.
    let warm = conversation(&store, "warm", 20);
    let before = counting::CURRENT.load(Relaxed);
    let held: Vec<Conversation> = (0..4)
        .map(|n| conversation(&store, &format!("held-{n}"), 20))
        .collect();
    let per = counting::CURRENT.load(Relaxed).saturating_sub(before) / held.len() / 1024;
    eprintln!("held per conversation: {per} KB");
    // The last body is 286 KB; the turns' text, once in the log, once in the serializer's
    // resume point, once in each meter's cut, and one set of tools. A second set of tools
    // (about 640 KB) or a copy of the turns kept to tell a rewrite (about 350 KB) fails this.
    assert!(per < 2_450, "{per} KB held per conversation");
    drop((warm, held));
}
