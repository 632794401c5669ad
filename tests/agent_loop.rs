//! The loop object: it counts turn, step and attempt itself, moves only when a batch
//! committed, keeps an asked-for series for the next attempt 0, stamps what it appends, and
//! picks up a reopened session where the log ends.

use std::sync::Arc;

use mektpoy::event::{Event, SeriesStart};
use mektpoy::session::{PendingCall, Position};
use mektpoy::vocab::{MessageSource, Role};
use mektpoy::{AgentLoop, Config, ContentBlock, Message, Session, ToolSchema, route_for};

fn config() -> Config {
    Config::new("deepseek", "deepseek-flash")
        .with("max_tokens", 256.into())
        .unwrap()
}

fn agent<S: std::borrow::Borrow<Session>>(session: S) -> AgentLoop<S> {
    builder(session).build().unwrap()
}

fn builder<S: std::borrow::Borrow<Session>>(session: S) -> mektpoy::agent::AgentLoopBuilder<S> {
    AgentLoop::builder(session, route_for("deepseek", "deepseek-flash"))
        .config(config())
        .system_prompt("Be brief.")
        .tools([ToolSchema::no_input("read", "Read a file")])
}

fn position(a: &AgentLoop<impl std::borrow::Borrow<Session>>) -> (u64, u64, u32) {
    (a.turn(), a.step(), a.attempt())
}

/// `(turn, step)` stamped on each message event, in log order.
fn stamps(session: &Session) -> Vec<(String, Option<u64>, Option<u64>)> {
    session
        .events()
        .iter()
        .filter_map(|e| match e {
            Event::Message(m) => Some((m.message.id().to_owned(), m.turn, m.step)),
            _ => None,
        })
        .collect()
}

fn calling(id: &str, call: &str) -> Message {
    Message::new(
        id,
        Role::Assistant,
        vec![ContentBlock::tool_call(call, "read", r#"{"path":"a.rs"}"#).unwrap()],
        MessageSource::Model {
            provider: "deepseek".into(),
            model: "deepseek-flash".into(),
        },
    )
}

#[test]
fn the_loop_counts_turn_step_and_attempt() {
    let mut a = agent(Session::new("s"));
    assert_eq!(position(&a), (0, 0, 0));
    a.user_turn([Message::user("u1", "hi")]).unwrap();
    assert_eq!(position(&a), (1, 1, 0));
    a.append(calling("a1", "c1")).unwrap();
    a.append(Message::tool_result("t1", "c1", "fn main() {}"))
        .unwrap();
    a.next_step().unwrap();
    assert_eq!(position(&a), (1, 2, 0));
    a.retry().unwrap();
    assert_eq!(position(&a), (1, 2, 1), "a retry is the same step");
    a.append(Message::assistant(
        "a2",
        "done",
        "deepseek",
        "deepseek-flash",
    ))
    .unwrap();
    a.user_turn([Message::user("u2", "and now?")]).unwrap();
    assert_eq!(position(&a), (2, 1, 0));
    let messages: Vec<_> = stamps(a.session())
        .into_iter()
        .filter(|(id, _, _)| !id.starts_with("s:"))
        .collect();
    assert_eq!(
        messages,
        [
            ("u1".to_owned(), Some(1), None),
            ("a1".to_owned(), Some(1), Some(1)),
            ("t1".to_owned(), Some(1), Some(1)),
            ("a2".to_owned(), Some(1), Some(2)),
            ("u2".to_owned(), Some(2), None),
        ],
        "answers and tool results carry the turn and step they answer"
    );
}

#[test]
fn a_refused_attempt_moves_nothing_and_can_be_made_again() {
    let mut a = agent(Session::new("s"));
    a.user_turn([Message::user("u1", "hi")]).unwrap();
    let len = a.session().len();
    let err = a.user_turn([Message::user("u1", "again")]).unwrap_err();
    assert!(err.to_string().contains("u1"), "{err}");
    assert_eq!((position(&a), a.session().len()), ((1, 1, 0), len));
    a.user_turn([Message::user("u2", "again")]).unwrap();
    assert_eq!(position(&a), (2, 1, 0));
}

#[test]
fn an_asked_series_waits_for_the_next_first_attempt() {
    let mut a = agent(Session::new("s"));
    a.user_turn([Message::user("u1", "hi")]).unwrap();
    a.new_series();
    let retried = a.retry().unwrap();
    assert_eq!(
        retried.series_start, None,
        "a retry keeps the request it retries"
    );
    let next = a.user_turn([Message::user("u2", "go")]).unwrap();
    assert_eq!(next.series_start, Some(SeriesStart::Asked));
    let after = a.user_turn([Message::user("u3", "go")]).unwrap();
    assert_eq!(after.series_start, None, "asked once, opened once");
}

#[test]
fn the_session_may_be_owned_borrowed_or_shared() {
    let owned = agent(Session::new("owned"));
    let session = Session::new("borrowed");
    let mut borrowed = agent(&session);
    borrowed.user_turn([Message::user("u1", "hi")]).unwrap();
    let shared = Arc::new(Session::new("shared"));
    let mut in_arc = agent(Arc::clone(&shared));
    in_arc.user_turn([Message::user("u1", "hi")]).unwrap();
    assert_eq!(
        (owned.session().len(), session.len(), shared.len()),
        (0, 3, 3)
    );
}

#[test]
fn a_reopened_loop_resends_the_request_in_flight_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let sent = {
        let mut a = agent(Session::create(&path, "s").unwrap());
        a.user_turn([Message::user("u1", "hi")]).unwrap();
        a.append(Message::assistant("a1", "ok", "deepseek", "deepseek-flash"))
            .unwrap();
        let request = a.user_turn([Message::user("u2", "go on")]).unwrap();
        request.to_wire().unwrap()
        // The process dies here, with the request sent and no answer.
    };
    let mut b = agent(Session::open(&path).unwrap().session);
    assert_eq!(b.position(), Position::Resend);
    assert_eq!(
        position(&b),
        (2, 1, 0),
        "the loop continues where the log ends"
    );
    let again = b.retry().unwrap().to_wire().unwrap();
    assert_eq!(again.body(), sent.body());
    assert_eq!(position(&b), (2, 1, 1));
}

#[test]
fn a_reopened_loop_runs_the_calls_left_without_results() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    {
        let mut a = agent(Session::create(&path, "s").unwrap());
        a.user_turn([Message::user("u1", "read a.rs")]).unwrap();
        a.append(calling("a1", "c1")).unwrap();
        // The process dies while the tool runs.
    }
    let mut b = agent(Session::open(&path).unwrap().session);
    let Position::RunTools { pending } = b.position() else {
        panic!("{:?}", b.position())
    };
    let [PendingCall { id, name, .. }] = &pending[..] else {
        panic!("{pending:?}")
    };
    assert_eq!((id.as_str(), name.as_str()), ("c1", "read"));
    b.append(Message::tool_result("t1", id.clone(), "fn main() {}"))
        .unwrap();
    assert_eq!(b.position(), Position::Continue);
    let request = b.next_step().unwrap();
    assert_eq!(position(&b), (1, 2, 0));
    assert_eq!(request.messages.last().unwrap().id(), "t1");
}

#[test]
fn a_restored_meter_counts_on_as_if_the_process_had_not_died() {
    let turns = ["hi", "go on", "and then?"];
    // One process, three turns.
    let mut whole = agent(Session::new("s"));
    for (i, text) in turns.iter().enumerate() {
        let request = whole
            .user_turn([Message::user(format!("u{i}"), *text)])
            .unwrap();
        whole.observe(&request.to_wire().unwrap()).unwrap();
        whole
            .append(Message::assistant(
                format!("a{i}"),
                "ok",
                "deepseek",
                "deepseek-flash",
            ))
            .unwrap();
    }
    // Two processes: the first saves its meter after two turns and dies.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let saved = {
        let mut a = agent(Session::create(&path, "s").unwrap());
        for (i, text) in turns[..2].iter().enumerate() {
            let request = a
                .user_turn([Message::user(format!("u{i}"), *text)])
                .unwrap();
            a.observe(&request.to_wire().unwrap()).unwrap();
            a.append(Message::assistant(
                format!("a{i}"),
                "ok",
                "deepseek",
                "deepseek-flash",
            ))
            .unwrap();
        }
        a.meter().save()
    };
    let route = route_for("deepseek", "deepseek-flash");
    let meter = mektpoy::meter::Meter::restore(&route, &saved).unwrap();
    let mut b = builder(Session::open(&path).unwrap().session)
        .meter(meter)
        .build()
        .unwrap();
    let request = b.user_turn([Message::user("u2", turns[2])]).unwrap();
    b.observe(&request.to_wire().unwrap()).unwrap();
    assert_eq!(b.meter().rows(), whole.meter().rows());
    assert_eq!(b.meter().report(), whole.meter().report());
}
