//! End-to-end tests of the `fold` and `project` examples, run as processes.
//!
//! Plain `cargo test` builds the examples into `target/debug/examples` before it runs the
//! tests; when a binary there is missing or older than the sources (`cargo test --test
//! examples` does not rebuild examples), it is built into `target/example-tests` instead, a
//! separate target directory so the nested cargo never waits on the outer one's lock.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::SystemTime;

use mektpoy::{
    Config, ContentBlock, Event, Message, Session, ToolSchema,
    event::{Reason, RequestHeader},
    vocab::Seq,
};
use serde_json::{Value, json};

mod support;
use support::tool;

fn newest_source(dir: &Path) -> SystemTime {
    let mut newest = SystemTime::UNIX_EPOCH;
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let time = if path.is_dir() {
            newest_source(&path)
        } else {
            entry
                .metadata()
                .and_then(|m| m.modified())
                .unwrap_or(SystemTime::UNIX_EPOCH)
        };
        newest = newest.max(time);
    }
    newest
}

fn example(name: &str) -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let file = format!("{name}{}", std::env::consts::EXE_SUFFIX);
    // target/debug/deps/<test> → target/debug/examples/<name>
    let exe = std::env::current_exe().expect("test binary path");
    if let Some(profile) = exe.parent().and_then(Path::parent) {
        let sibling = profile.join("examples").join(&file);
        let sources = newest_source(&root.join("src")).max(newest_source(&root.join("examples")));
        let fresh = sibling
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t >= sources);
        if fresh {
            return sibling;
        }
    }
    let target = BUILT.get_or_init(|| {
        let target = root.join("target").join("example-tests");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let status = Command::new(cargo)
            .args(["build", "--quiet", "--examples"])
            .env("CARGO_TARGET_DIR", &target)
            .current_dir(root)
            .status()
            .expect("run cargo build --examples");
        assert!(status.success(), "cargo build --examples failed");
        target
    });
    target.join("debug").join("examples").join(file)
}

fn run(name: &str, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(example(name))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn example");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    child.wait_with_output().expect("example output")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A recorded session: H0 [a], u1, H2 [a, b] change, D3 (+b headerSeq 2), a4.
fn recorded_session() -> Session {
    let session = Session::new("s");
    let header = |tools: Vec<ToolSchema>, reason| {
        Event::header(
            RequestHeader::new(Config::new("deepseek", "deepseek-flash"), tools),
            reason,
        )
    };
    session
        .append(header(vec![tool("a")], Reason::Initial))
        .unwrap();
    session
        .append(Event::append(Message::user("u1", "hi")))
        .unwrap();
    session
        .append(header(vec![tool("a"), tool("b")], Reason::Change))
        .unwrap();
    session
        .append(Event::developer(
            Message::developer("d1", vec![ContentBlock::addition("b").unwrap()]),
            Some(Seq(2)),
        ))
        .unwrap();
    session
        .append(Event::append(Message::assistant(
            "a1",
            "ok",
            "deepseek",
            "deepseek-flash",
        )))
        .unwrap();
    session
}

fn write_log(dir: &tempfile::TempDir, name: &str, bytes: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn fold_prints_the_snapshot_as_one_json_line() {
    let session = recorded_session();
    let dir = tempfile::tempdir().unwrap();
    let path = write_log(&dir, "log.jsonl", &session.to_jsonl());
    let out = run("fold", &[path.to_str().unwrap()], "");
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "");
    let stdout = text(&out.stdout);
    assert_eq!(stdout.lines().count(), 1);
    assert_eq!(stdout.trim_end(), session.tool_history().to_json());
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        v,
        json!({
            "tools": [{"name": "a", "description": "a", "parameters": {"type": "object"}}],
            "updates": [{"messageId": "d1", "additions": [
                {"name": "b", "description": "b", "parameters": {"type": "object"}}
            ]}]
        })
    );
}

#[test]
fn fold_warns_on_a_torn_tail_and_exits_zero() {
    let session = recorded_session();
    let dir = tempfile::tempdir().unwrap();
    let full = session.to_jsonl();
    let torn = format!("{full}{{\"type\":\"user/message\",\"data\":{{\"mess");
    let path = write_log(&dir, "torn.jsonl", &torn);
    let out = run("fold", &[path.to_str().unwrap()], "");
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with("warning:") && stderr.contains("torn"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("at byte {}", full.len())),
        "{stderr}"
    );
    assert_eq!(
        text(&out.stdout).trim_end(),
        session.tool_history().to_json()
    );
}

#[test]
fn fold_warns_on_an_incomplete_final_batch_and_exits_zero() {
    let session = recorded_session();
    let dir = tempfile::tempdir().unwrap();
    let full = session.to_jsonl();
    let user = r#"{"type":"user/message","data":{"message":{"id":"u9","role":"user","content":[],"source":{"kind":"user"}}},"surfaceOp":"append"}"#;
    let torn = format!("{full}{{\"batch\":3}}\n{user}\n");
    let path = write_log(&dir, "torn-batch.jsonl", &torn);
    let out = run("fold", &[path.to_str().unwrap()], "");
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with("warning:") && stderr.contains("torn final batch framed on line 7"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("at byte {}, 1 whole event lines", full.len())),
        "{stderr}"
    );
    assert_eq!(
        text(&out.stdout).trim_end(),
        session.tool_history().to_json()
    );
}

#[test]
fn fold_refuses_an_invalid_log_with_the_error_chain() {
    let dir = tempfile::tempdir().unwrap();
    // Line 3 (event 1) adds `b` without a headerSeq.
    let log = concat!(
        r#"{"type":"session","version":0,"id":"s"}"#,
        "\n",
        r#"{"type":"request/header","data":{"header":{"config":{"provider":"p","model":"m"},"tools":[{"name":"a","description":"a","parameters":{}}]},"reason":"initial"}}"#,
        "\n",
        r#"{"type":"developer/message","data":{"message":{"id":"d1","role":"developer","content":[{"type":"tool-addition","toolName":"b"}],"source":{"kind":"tool-registry"}}},"surfaceOp":"append"}"#,
        "\n",
    );
    let path = write_log(&dir, "bad.jsonl", log);
    let out = run("fold", &[path.to_str().unwrap()], "");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stdout), "");
    let stderr = text(&out.stderr);
    // The typed error, then its source.
    assert!(stderr.contains("line 3 (event 1) is rejected"), "{stderr}");
    assert!(stderr.contains("adds `b` without a headerSeq"), "{stderr}");

    let missing = dir.path().join("missing.jsonl");
    let out = run("fold", &[missing.to_str().unwrap()], "");
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("cannot read") && stderr.contains(": "),
        "{stderr}"
    );

    let out = run("fold", &[], "");
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("usage"));
}

#[test]
fn project_reads_a_request_and_prints_the_projection() {
    // P5 of the reference.
    let tool = |n: &str| json!({"name": n, "description": n, "parameters": {}});
    let input = json!({
        "messages": [
            {"id": "u1", "role": "user", "content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}},
            {"id": "d1", "role": "developer", "content": [{"type": "tool-addition", "toolName": "B"}], "source": {"kind": "tool-registry"}},
            {"id": "u2", "role": "user", "content": [{"type": "text", "text": "go"}], "source": {"kind": "user"}}
        ],
        "tools": [tool("A"), tool("B")],
        "mode": "in-history",
        "history": {"tools": [tool("A")], "updates": [{"messageId": "d1", "additions": [tool("B")]}]}
    });
    let out = run("project", &[], &input.to_string());
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert_eq!(stdout.lines().count(), 1);
    assert!(!stdout.contains("\"deferLoading\":false"));
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["messages"], input["messages"]);
    let mut b = tool("B");
    b["deferLoading"] = json!(true);
    assert_eq!(v["tools"], json!([tool("A"), b]));

    // Absent keys read as null: no mode, no history, no tools.
    let only_messages = json!({"messages": input["messages"]});
    let out = run("project", &[], &only_messages.to_string());
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let v: Value = serde_json::from_str(&text(&out.stdout)).unwrap();
    assert_eq!(v["tools"], Value::Null);
    let ids: Vec<_> = v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].clone())
        .collect();
    assert_eq!(
        ids,
        [json!("u1"), json!("u2")],
        "no mode drops developer messages"
    );
}

#[test]
fn project_refuses_malformed_input_without_panicking() {
    for (name, input, needle) in [
        ("not JSON", "{", "malformed input"),
        ("empty input", "", "malformed input"),
        ("not an object", "[]", "malformed input"),
        ("no messages", r#"{"tools":null}"#, "messages"),
        ("unknown key", r#"{"messages":[],"tool":[]}"#, "tool"),
        (
            "unknown mode",
            r#"{"messages":[],"mode":"sometimes"}"#,
            "sometimes",
        ),
        (
            "malformed known block",
            r#"{"messages":[{"id":"a","role":"assistant","content":[{"type":"tool-call","name":"x","arguments":"{}"}],"source":{"kind":"user"}}]}"#,
            "tool-call",
        ),
        (
            "tool without parameters",
            r#"{"messages":[],"tools":[{"name":"a","description":"a"}]}"#,
            "parameters",
        ),
        (
            "history with an unknown key",
            r#"{"messages":[],"history":{"tools":[],"updates":[],"x":1}}"#,
            "x",
        ),
    ] {
        let out = run("project", &[], input);
        assert_eq!(out.status.code(), Some(1), "{name}: {}", text(&out.stderr));
        assert_eq!(text(&out.stdout), "", "{name}");
        let stderr = text(&out.stderr);
        assert!(stderr.starts_with("error: "), "{name}: {stderr}");
        assert!(stderr.contains(needle), "{name}: {stderr}");
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
    }
}
