//! reference §2: `Session` is `Send + Sync`, and `view()` is one consistent read: its messages,
//! header, generation and snapshot all belong to the first `view.len` events, even while
//! another thread appends.

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use mektpoy::{
    Config, ContentBlock, Event, Message, Session,
    event::{Reason, RequestHeader},
    history::ToolHistory,
    session::SessionView,
    vocab::Seq,
};
use support::*;

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Session>();
    send_sync::<SessionView>();
    send_sync::<ToolHistory>();
    send_sync::<Event>();
    send_sync::<Message>();
};

/// A log mixing every kind of event the view depends on: messages, headers whose tools
/// change, developer messages with additions and removals, opaque nodes, and replaces.
fn script(n: usize) -> Vec<Event> {
    let names = ["A", "B", "C", "Dd"];
    let mut events = Vec::new();
    let mut surface = 0usize;
    let mut header_seq = None;
    let mut tools: Vec<&str> = vec!["A"];
    for i in 0..n {
        let id = format!("m{i}");
        let event = match i % 9 {
            0 | 4 => Event::append(Message::user(id, "hi")),
            1 => {
                // Add the next name, or drop back to the first one.
                if tools.len() == names.len() {
                    tools.truncate(1);
                } else {
                    tools.push(names[tools.len()]);
                }
                header_seq = Some(Seq(events.len() as u64));
                let reason = if i == 1 {
                    Reason::Initial
                } else {
                    Reason::Change
                };
                Event::header(
                    RequestHeader::new(
                        Config::new("p", "m"),
                        tools.iter().map(|t| tool(t)).collect::<Vec<_>>(),
                    ),
                    reason,
                )
            }
            2 => {
                let last = *tools.last().unwrap();
                let name = last.trim_end_matches('d');
                let blocks = if tools.len() > 1 {
                    vec![ContentBlock::addition(name).unwrap()]
                } else {
                    names[1..]
                        .iter()
                        .map(|n| ContentBlock::removal(n.trim_end_matches('d')).unwrap())
                        .collect()
                };
                Event::developer(Message::developer(id, blocks), header_seq)
            }
            3 => Event::append(Message::assistant(id, "ok", "p", "m")),
            5 => Event::from_json(&opaque("note/x", APPEND)).unwrap(),
            6 if surface > 3 => Event::replace(Message::user(id, "summary"), 1, surface - 2),
            7 => Event::append(Message::system(id, "prompt")),
            _ => Event::developer(Message::developer(id, vec![ContentBlock::text("n")]), None),
        };
        match event.surface_op() {
            Some(mektpoy::event::SurfaceOp::Append) => surface += 1,
            Some(mektpoy::event::SurfaceOp::Replace { start, end }) => surface -= end - start,
            None => {}
        }
        events.push(event);
    }
    events
}

struct Expected {
    messages: Vec<Message>,
    header: Option<Seq>,
    generation: u64,
    tool_history: ToolHistory,
}

fn expected(events: &[Event]) -> Expected {
    let (surface, generation) = replay_surface(events);
    Expected {
        messages: surface_messages(&surface),
        header: events
            .iter()
            .rposition(|e| matches!(e, Event::Header(_)))
            .map(|i| Seq(i as u64)),
        generation,
        tool_history: support::refold(events),
    }
}

#[test]
fn views_are_consistent_while_another_thread_appends() {
    const READERS: usize = 3;
    const MAX_VIEWS: usize = 3000;
    let events = script(270);
    let session = Arc::new(Session::new("s"));
    let done = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(READERS + 1));

    let readers: Vec<_> = (0..READERS)
        .map(|r| {
            let (session, done, start) = (session.clone(), done.clone(), start.clone());
            thread::spawn(move || {
                let mut views = Vec::new();
                let mut seen = 0usize;
                start.wait();
                while !done.load(Ordering::Acquire) {
                    let v = session.view();
                    // Keep every view at a new length and a sample of the others.
                    seen += 1;
                    let new_len = views.last().is_none_or(|l: &SessionView| l.len != v.len);
                    if views.len() < MAX_VIEWS && (new_len || seen.is_multiple_of(16)) {
                        views.push(v);
                    }
                    // Other readers also warm the caches between views.
                    if r == 0 {
                        let _ = session.tool_history();
                    } else if r == 1 {
                        let _ = session.messages();
                    }
                }
                views.push(session.view());
                views
            })
        })
        .collect();

    start.wait();
    for (i, e) in events.iter().enumerate() {
        session
            .append(e.clone())
            .unwrap_or_else(|err| panic!("{err}"));
        if i % 9 == 8 {
            thread::sleep(Duration::from_micros(300));
        }
    }
    done.store(true, Ordering::Release);
    let views: Vec<SessionView> = readers
        .into_iter()
        .flat_map(|r| r.join().unwrap())
        .collect();

    let log = session.events();
    assert_eq!(log.len(), events.len());
    let mut memo: HashMap<usize, Expected> = HashMap::new();
    for v in &views {
        let prefix: Vec<Event> = log.iter().take(v.len).cloned().collect();
        let want = memo.entry(v.len).or_insert_with(|| expected(&prefix));
        assert_eq!(v.messages, want.messages, "messages at len {}", v.len);
        assert_eq!(
            v.header.as_ref().map(|(s, _)| *s),
            want.header,
            "len {}",
            v.len
        );
        if let Some((s, h)) = &v.header {
            assert!(matches!(&log[s.0 as usize], Event::Header(x) if Arc::ptr_eq(x, h)));
        }
        assert_eq!(v.surface_generation, want.generation, "len {}", v.len);
        assert_eq!(
            v.tool_history, want.tool_history,
            "snapshot at len {}",
            v.len
        );
    }
    // The readers saw the log grow, not only its ends.
    assert!(memo.len() > 2, "views at {} distinct lengths", memo.len());
    assert!(memo.contains_key(&events.len()));
}

#[test]
fn the_script_exercises_every_kind_of_change() {
    let events = script(270);
    let s = Session::new("s");
    for e in &events {
        s.append(e.clone()).unwrap();
    }
    assert!(s.surface_generation() >= 10, "replaces happen");
    let h = s.tool_history();
    let updates_with_additions = events
        .iter()
        .filter(|e| {
            matches!(e, Event::Message(m)
                if m.message.content().iter().any(|b| matches!(b, ContentBlock::ToolAddition(_))))
        })
        .count();
    assert!(updates_with_additions >= 10);
    assert!(
        s.surface()
            .iter()
            .any(|n| matches!(n, mektpoy::session::SurfaceNode::Opaque(_)))
    );
    assert_eq!(h, support::refold(events.iter()));
}
