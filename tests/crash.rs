//! Kill trials: a child process (this test binary, re-run as `crash_child`) records batches
//! into a persisting session and reports each acknowledged one on stdout; the parent kills it
//! with SIGKILL at a random point, then checks that every acknowledged event is in the file
//! and that no part of an unacknowledged batch is (that batch is absent, or there whole), that
//! the file round-trips byte for byte, and that `open` repairs it and takes the next batch.
//!
//! The short run (`kill_trials_short`, 20 trials) is part of `cargo test`. The long run:
//!
//! ```sh
//! cargo test --release --test crash -- --ignored --nocapture kill_trials_long
//! ```
//!
//! (`MEKTPOY_CRASH_TRIALS` sets the number of trials, 200 by default, half of them with
//! batches of 2–8 MiB; `MEKTPOY_CRASH_SEED` replays a run.) Results are in
//! `docs/reliability.md`.

#![cfg(unix)]

use std::io::{BufRead, BufReader, Write};

mod support;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;
use support::tool;

use mektpoy::{
    Config, Event, Message, Route, Session,
    agent::{Recorder, Step},
    route::{ToolUpdateMode, WireApi},
    session::{FileOptions, LoadError},
    store::{JsonlSink, TornTail},
};

const CHILD: &str = "MEKTPOY_CRASH_CHILD";
const SEED: &str = "MEKTPOY_CRASH_SEED";
const SIZES: &str = "MEKTPOY_CRASH_SIZES";
const BATCHES: &str = "MEKTPOY_CRASH_BATCHES";

/// splitmix64: enough randomness, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// What a trial's child records: batch `i` is a function of `seed` and `i` only, so that the
/// parent can replay it in memory.
#[derive(Clone, Copy, Debug)]
struct Plan {
    seed: u64,
    /// Payload bytes per batch: small (a few KiB, now and then tens of KiB, so that batches
    /// straddle pages), or between these many MiB.
    mib: Option<(u64, u64)>,
    batches: usize,
}

impl Plan {
    fn from_env() -> Plan {
        let var = |k: &str| std::env::var(k).unwrap_or_default();
        let mib = var(SIZES)
            .split_once('-')
            .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)));
        Plan {
            seed: var(SEED).parse().unwrap_or(0),
            mib,
            batches: var(BATCHES).parse().unwrap_or(8),
        }
    }

    fn payload(&self, rng: &mut Rng) -> usize {
        match self.mib {
            Some((lo, hi)) => ((lo << 20) + rng.below((hi - lo) << 20)) as usize,
            None if rng.below(8) == 0 => 8_000 + rng.below(72_000) as usize,
            None => 16 + rng.below(3_000) as usize,
        }
    }
}

/// `n` bytes (about) of text with escapes and non-ASCII, tagged with the batch.
fn text(i: usize, k: usize, n: usize) -> String {
    const CHUNK: &str =
        "line \"quoted\" \\ back\nslash\tnext é 😀 abcdefghijklmnopqrstuvwxyz 0123456789. ";
    let mut s = format!("batch {i} part {k}: ");
    while s.len() < n {
        s.push_str(CHUNK);
    }
    let mut end = n.max(1).min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    s
}

fn route() -> Route {
    Route::builder("openai", "gpt", WireApi::OpenAiChat)
        .tool_update(Some(ToolUpdateMode::AdditionOnly))
        .build()
        .unwrap()
}

/// Batch `i`: every fourth one a single append (a plain line), the others one recorder
/// call of one to three user messages, a header and, when the tools change, a developer
/// message (a framed batch).
fn run_batch(session: &Session, recorder: &mut Recorder, plan: &Plan, i: usize) {
    let mut rng = Rng(plan.seed ^ (i as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93));
    let size = plan.payload(&mut rng);
    if i % 4 == 3 {
        session
            .append(Event::append(Message::assistant(
                format!("t{i}"),
                text(i, 0, size),
                "openai",
                "gpt",
            )))
            .unwrap();
        return;
    }
    let parts = 1 + rng.below(3) as usize;
    let users: Vec<Message> = (0..parts)
        .map(|k| Message::user(format!("u{i}.{k}"), text(i, k, size / parts)))
        .collect();
    let tools = if (i / 2).is_multiple_of(2) {
        vec![tool("A")]
    } else {
        vec![tool("A"), tool("B")]
    };
    let config = Config::new("openai", "gpt");
    recorder
        .record(
            session,
            Step::new(&config, "You are careful.", &tools, &route())
                .at(i as u64, 0, 0)
                .user_messages(&users),
        )
        .unwrap();
}

/// The file, as the crate's own sink writes it (one `write_all`, then flush), after telling
/// the parent on stdout that a batch of so many bytes is about to be written: the parent
/// then kills within the write's expected time.
struct Announcing(std::fs::File);

impl JsonlSink for Announcing {
    fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let mut out = std::io::stdout().lock();
        writeln!(out, "write {}", bytes.len())?;
        out.flush()?;
        let start = std::time::Instant::now();
        let result = JsonlSink::append(&mut self.0, bytes);
        writeln!(out, "wrote {}", start.elapsed().as_nanos())?;
        out.flush()?;
        result
    }
    fn truncate(&mut self, len: u64) -> std::io::Result<()> {
        JsonlSink::truncate(&mut self.0, len)
    }
    fn sync(&mut self) -> std::io::Result<()> {
        JsonlSink::sync(&mut self.0)
    }
    fn current_len(&mut self) -> std::io::Result<Option<u64>> {
        JsonlSink::current_len(&mut self.0)
    }
}

/// The child's entry point: does nothing unless the parent set `MEKTPOY_CRASH_CHILD`.
#[test]
fn crash_child() {
    let Ok(path) = std::env::var(CHILD) else {
        return;
    };
    let plan = Plan::from_env();
    let session = FileOptions::new()
        .sink(Announcing)
        .create(&path, "crash")
        .unwrap();
    let mut recorder = Recorder::attach(&session);
    let mut out = std::io::stdout().lock();
    // After libtest's `test crash_child ... `, which ends in no newline.
    writeln!(out, "\nready").unwrap();
    out.flush().unwrap();
    drop(out);
    // The parent checks the lock, then says go.
    let mut go = String::new();
    std::io::stdin().read_line(&mut go).unwrap();
    let mut out = std::io::stdout().lock();
    for i in 0..plan.batches {
        run_batch(&session, &mut recorder, &plan, i);
        // Only now is batch `i` acknowledged.
        writeln!(out, "ack {i}").unwrap();
        out.flush().unwrap();
        // A loop does other work between requests; the pause also keeps a child of small
        // batches from finishing before the parent's kill arrives.
        std::thread::sleep(Duration::from_micros(300));
    }
    writeln!(out, "done").unwrap();
    out.flush().unwrap();
}

#[derive(Debug, Default)]
struct Tally {
    trials: usize,
    /// The child was killed before it finished its batches.
    killed: usize,
    /// Acknowledged batches, over all trials.
    acked: usize,
    /// The file held the first unacknowledged batch whole (written, not yet acknowledged).
    unacked_whole: usize,
    /// A torn single line was dropped.
    torn_lines: usize,
    /// An incomplete framed batch was dropped, and how many of its event lines were whole.
    torn_batches: usize,
    torn_batch_events: usize,
    /// Torn batches with at least one whole event line: without the frame, loading would have
    /// kept those lines, a part of an unacknowledged batch.
    torn_batches_with_whole_lines: usize,
    /// The failures the test exists for.
    lost: usize,
    partial: usize,
}

/// One trial; `Err` describes a broken promise.
fn trial(dir: &Path, n: usize, plan: Plan, rng: &mut Rng, tally: &mut Tally) -> Result<(), String> {
    let path = dir.join(format!("trial-{n}.jsonl"));
    let stderr_path = dir.join(format!("trial-{n}.stderr"));
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["crash_child", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, &path)
        .env(SEED, plan.seed.to_string())
        .env(
            SIZES,
            plan.mib.map_or(String::new(), |(a, b)| format!("{a}-{b}")),
        )
        .env(BATCHES, plan.batches.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    let recv = |timeout: Duration, lines: &mut Vec<String>| -> Option<String> {
        let line = rx.recv_timeout(timeout).ok()?;
        lines.push(line.clone());
        Some(line)
    };
    let wait = Duration::from_secs(120);
    loop {
        match recv(wait, &mut lines).as_deref() {
            Some("ready") => break,
            Some(_) => {}
            None => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("the child never got ready".to_owned());
            }
        }
    }
    // A second writer, in another process, is refused while the child holds the file.
    match Session::open(&path) {
        Err(LoadError::Locked { .. }) => {}
        other => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("open beside the child: {other:?}"));
        }
    }
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"go\n").unwrap();
    stdin.flush().unwrap();
    // Kill while batch `k` is being written: its `write` line is printed right before the
    // write, and the kill follows within 1.5 times the write's expected time (from the
    // child's earlier writes), plus 50 µs, so that most kills land inside the write, some
    // between the write and its acknowledgement. One trial in eight, a random moment after
    // `go` instead.
    let target = (rng.below(8) != 0).then(|| rng.below(plan.batches as u64 - 1) as usize);
    let mut finished = false;
    let (mut writes, mut last_bytes) = (0, 0u64);
    // Nanoseconds per byte, in thousandths; 1 ns/byte until measured.
    let mut pace = 1000u64;
    let delay = match target {
        None => Duration::from_micros(rng.below(20_000)),
        Some(k) => loop {
            match recv(wait, &mut lines).as_deref() {
                Some(l) if l.starts_with("write ") => {
                    writes += 1;
                    last_bytes = l["write ".len()..].parse().unwrap_or(0);
                    if writes == k + 1 {
                        let expected = last_bytes * pace / 1000;
                        break Duration::from_nanos(rng.below(expected * 3 / 2 + 50_000));
                    }
                }
                Some(l) if l.starts_with("wrote ") => {
                    let ns: u64 = l["wrote ".len()..].parse().unwrap_or(0);
                    if last_bytes > 4096 {
                        pace = ns * 1000 / last_bytes;
                    }
                }
                Some("done") | None => {
                    finished = true;
                    break Duration::ZERO;
                }
                Some(_) => {}
            }
        },
    };
    std::thread::sleep(delay);
    child.kill().unwrap();
    child.wait().unwrap();
    reader.join().unwrap();
    lines.extend(rx.try_iter());
    finished |= lines.iter().any(|l| l == "done");
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    if stderr.contains("panicked") {
        return Err(format!("the child failed: {stderr}"));
    }
    tally.trials += 1;
    tally.killed += usize::from(!finished);
    let acked: Vec<usize> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("ack ")?.parse().ok())
        .collect();
    if acked.iter().enumerate().any(|(i, a)| i != *a) {
        return Err(format!("acknowledgements out of order: {acked:?}"));
    }
    let acked = acked.len();
    tally.acked += acked;

    // The same batches in memory: event counts at each batch boundary.
    let reference = Session::new("crash");
    let mut recorder = Recorder::attach(&reference);
    let mut bounds = vec![0];
    for i in 0..(acked + 1).min(plan.batches) {
        run_batch(&reference, &mut recorder, &plan, i);
        bounds.push(reference.len());
    }
    let bytes = std::fs::read(&path).unwrap();
    let loaded = Session::load(&path).map_err(|e| format!("load: {e}"))?;
    let len = loaded.session.len();
    let at_ack = bounds[acked];
    let whole_next = bounds.get(acked + 1).copied();
    if len < at_ack {
        tally.lost += 1;
        return Err(format!(
            "lost acknowledged events: {len} in the file, {at_ack} acknowledged"
        ));
    }
    if len != at_ack && Some(len) != whole_next {
        tally.partial += 1;
        return Err(format!(
            "part of an unacknowledged batch: {len} events, batches end at {at_ack} and {whole_next:?}"
        ));
    }
    if loaded.session.events().to_vec() != reference.events().to_vec()[..len] {
        tally.partial += 1;
        return Err("the events differ from the ones recorded".to_owned());
    }
    tally.unacked_whole += usize::from(len > at_ack);
    match loaded.torn_tail {
        Some(TornTail { batch: Some(b), .. }) => {
            tally.torn_batches += 1;
            tally.torn_batch_events += b.dropped_events;
            tally.torn_batches_with_whole_lines += usize::from(b.dropped_events > 0);
        }
        Some(_) => tally.torn_lines += 1,
        None => {}
    }
    let kept = loaded.torn_tail.map_or(bytes.len(), |t| t.offset as usize);
    if loaded.session.to_jsonl().as_bytes() != &bytes[..kept] {
        return Err("the kept part does not round-trip byte for byte".to_owned());
    }
    drop(loaded);

    // The process is gone, and its lock with it: `open` repairs and goes on.
    let opened = Session::open(&path).map_err(|e| format!("open: {e}"))?;
    let s = opened.session;
    let repaired = std::fs::read(&path).unwrap();
    if repaired.len() < kept || repaired[..kept] != bytes[..kept] {
        return Err("open changed the kept bytes".to_owned());
    }
    s.append(Event::append(Message::user("after", "after the kill")))
        .map_err(|e| format!("append after open: {e}"))?;
    drop(s);
    let again = Session::load(&path).map_err(|e| format!("reload: {e}"))?;
    if again.session.len() != len + 1 || again.torn_tail.is_some() || again.unterminated {
        return Err(format!(
            "after open and one append: {} events, torn {:?}",
            again.session.len(),
            again.torn_tail
        ));
    }
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&stderr_path);
    Ok(())
}

/// Runs `trials` kill trials, every `big_every`-th with batches of `big` MiB; returns the
/// number of trials run.
fn run(trials: usize, big: (u64, u64), big_every: usize) -> usize {
    let seed = std::env::var(SEED)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    // Small batches, then multi-MiB ones.
    let mut tallies = [Tally::default(), Tally::default()];
    let mut failures = Vec::new();
    for n in 0..trials {
        let is_big = n % big_every == big_every - 1;
        let plan = Plan {
            seed: rng.next(),
            mib: is_big.then_some(big),
            batches: if is_big { 10 } else { 24 },
        };
        let tally = &mut tallies[usize::from(is_big)];
        if let Err(e) = trial(dir.path(), n, plan, &mut rng, tally) {
            failures.push(format!("trial {n} ({plan:?}): {e}"));
        }
    }
    eprintln!("seed {seed}");
    eprintln!("small batches: {:?}", tallies[0]);
    eprintln!("{}-{} MiB batches: {:?}", big.0, big.1, tallies[1]);
    assert!(
        failures.is_empty(),
        "seed {seed}, {} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    for t in &tallies {
        assert_eq!((t.lost, t.partial), (0, 0));
    }
    let [small, big] = tallies;
    small.trials + big.trials
}

#[test]
fn kill_trials_short() {
    // One trial in four with 1–2 MiB batches.
    assert_eq!(run(20, (1, 2), 4), 20);
}

#[test]
#[ignore = "about 200 kill trials, half with multi-MiB batches; run with --release (docs/reliability.md)"]
fn kill_trials_long() {
    let trials = std::env::var("MEKTPOY_CRASH_TRIALS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    assert_eq!(run(trials, (2, 8), 2), trials);
}
