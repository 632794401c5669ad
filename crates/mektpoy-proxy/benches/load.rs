//! The proxy under load: N concurrent conversations × 20 requests through two proxies sharing
//! one store (Postgres when its binaries are found: a throwaway cluster, as the tests make;
//! else one SQLite file), each conversation's requests alternating between the two proxies,
//! against the in-process stand-in; then the same load sent to the stand-in directly. Then one
//! long conversation (1,000 requests) through one proxy and directly, to compare the cost of
//! a request early and late in a conversation. Tiny bodies, or with `--claude-code` Claude
//! Code-sized ones. Percentiles need every sample, so this bench has its own harness.
//!
//! `cargo bench -p mektpoy-proxy --bench load` (figures in `docs/benchmarks.md`);
//! `-- --conversations N` (default 1,000), `-- --quick` for N = 50, `-- --sqlite` to use
//! SQLite even where Postgres is found, `-- --no-long` to leave out the long conversation,
//! `-- --claude-code` for 300 tools and 12 KB turns (50 KB at request 1, about 300 KB at
//! request 20; the long conversation then has 300 tools and 100-byte turns).
//!
//! `-- --processes` runs each proxy as its own program (the release binary), so that each
//! proxy's peak memory is its own (`VmHWM`); `-- --max-sessions M` passes the bound on
//! conversations held in memory to each; `-- --rate R` paces the clients (a request every
//! N ÷ R seconds per conversation, conversations started 1 ÷ R apart: R requests a second in
//! all, every conversation open at once, so that latencies measure the work of a request
//! rather than a saturated machine's queue); `-- --sticky-only` leaves out the alternating
//! phase. The N = 1,000 Claude Code-sized run of `docs/benchmarks.md` is
//! `-- --claude-code --processes --rate 25 --sticky-only --no-long`.

#[path = "../tests/support/mod.rs"]
mod support;

mod common;

use common::{ms, own_time, percentile};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mektpoy_proxy::{Proxy, Settings, Store};
use serde_json::{Value, json};

const REQUESTS: usize = 20;
const LONG: usize = 1_000;

/// The size of a run's bodies.
#[derive(Clone, Copy, Debug)]
struct Bodies {
    tools: usize,
    /// Bytes of a tool's description.
    description: usize,
    /// Bytes of a user turn.
    turn: usize,
}

const TINY: Bodies = Bodies {
    tools: 1,
    description: 8,
    turn: 8,
};

fn body(bodies: Bodies, history: &[Value], step: usize) -> (String, Value) {
    let turn =
        json!({"role": "user", "content": format!("step {step} {}", "x".repeat(bodies.turn))});
    let mut messages = history.to_vec();
    messages.push(turn.clone());
    let tools: Vec<Value> = (0..bodies.tools)
        .map(|i| {
            json!({"name": format!("tool_{i}"), "description": "d".repeat(bodies.description),
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}})
        })
        .collect();
    let body = json!({"model": "claude-opus-5", "max_tokens": 64, "system": "You are a coding agent.",
        "tools": tools, "messages": messages});
    (body.to_string(), turn)
}

/// One request; its latency, or what went wrong.
async fn send(
    http: &reqwest::Client,
    base: &str,
    session: &str,
    body: String,
) -> Result<(Duration, Value), String> {
    let started = Instant::now();
    let response = http
        .post(format!("{base}/v1/messages"))
        .header("x-api-key", "sk-bench")
        .header("anthropic-version", "2023-06-01")
        .header("content-type", "application/json")
        .header("x-mektpoy-session", session)
        .header("x-mektpoy-test-session", session)
        .body(body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let text = response.text().await.map_err(|e| e.to_string())?;
    let elapsed = started.elapsed();
    if !status.is_success() {
        return Err(format!("{status}: {text}"));
    }
    let v: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    Ok((elapsed, v))
}

/// One conversation of `requests` requests, request `step` sent to
/// `bases[(first + step * stride) % bases.len()]`: each request's latency, or the first failure.
/// When a paced conversation sends its requests: the first at `start`, then one every
/// `every` (at once when the previous answer came later).
#[derive(Clone, Copy)]
struct Pace {
    start: tokio::time::Instant,
    every: Duration,
}

async fn conversation(
    http: reqwest::Client,
    bases: Arc<Vec<String>>,
    (session, bodies): (String, Bodies),
    (first, stride): (usize, usize),
    (requests, pace): (usize, Option<Pace>),
) -> Result<Vec<Duration>, String> {
    let mut history = Vec::new();
    let mut latencies = Vec::with_capacity(requests);
    for step in 0..requests {
        if let Some(p) = pace {
            let step = u32::try_from(step).unwrap_or(u32::MAX);
            tokio::time::sleep_until(p.start + p.every * step).await;
        }
        let (b, turn) = body(bodies, &history, step);
        let base = &bases[(first + step * stride) % bases.len()];
        let (elapsed, v) = send(&http, base, &session, b).await?;
        latencies.push(elapsed);
        history.push(turn);
        history.push(json!({"role": "assistant", "content": v["content"]}));
    }
    Ok(latencies)
}

/// `n` concurrent conversations, each alternating between `bases` or (`sticky`) staying on
/// one: every latency, the wall time, the failures.
async fn load(
    http: &reqwest::Client,
    bases: Vec<String>,
    (sticky, bodies): (bool, Bodies),
    (prefix, rate): (&str, Option<f64>),
    n: usize,
) -> (Vec<Duration>, Duration, Vec<String>) {
    let bases = Arc::new(bases);
    let started = Instant::now();
    let now = tokio::time::Instant::now();
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let pace = rate.map(|r| Pace {
                start: now + Duration::from_secs_f64(i as f64 / r),
                every: Duration::from_secs_f64(n as f64 / r),
            });
            tokio::spawn(conversation(
                http.clone(),
                Arc::clone(&bases),
                (format!("{prefix}-{i}"), bodies),
                (i, usize::from(!sticky)),
                (REQUESTS, pace),
            ))
        })
        .collect();
    let mut all = Vec::with_capacity(n * REQUESTS);
    let mut failures = Vec::new();
    for task in tasks {
        match task.await {
            Ok(Ok(latencies)) => all.extend(latencies),
            Ok(Err(e)) => failures.push(e),
            Err(e) => failures.push(e.to_string()),
        }
    }
    (all, started.elapsed(), failures)
}

/// One long conversation against `base`: the mean latency of requests 1–10 and of the last ten,
/// and (through a proxy) the proxy's own mean time over the same requests.
async fn long_conversation(
    http: &reqwest::Client,
    base: &str,
    (session, bodies): (&str, Bodies),
    proxy: bool,
) -> [(Duration, f64); 2] {
    let mut history = Vec::new();
    let windows = [0..10, LONG - 10..LONG];
    let mut out = [(Duration::ZERO, 0.0); 2];
    for step in 0..LONG {
        let window = windows.iter().position(|w| w.contains(&step));
        let before = match window {
            Some(_) if proxy && windows.iter().any(|w| w.start == step) => {
                Some(own_time(base).await)
            }
            _ => None,
        };
        let (b, turn) = body(bodies, &history, step);
        let (elapsed, v) = send(http, base, session, b).await.unwrap();
        history.push(turn);
        history.push(json!({"role": "assistant", "content": v["content"]}));
        if let Some(w) = window {
            out[w].0 += elapsed / 10;
            if let Some(before) = before {
                out[w].1 = -before.0;
            }
            if proxy && windows[w].end == step + 1 {
                let after = own_time(base).await;
                out[w].1 = (out[w].1 + after.0) / 10.0;
            }
        }
    }
    out
}

/// `VmHWM` (peak resident set) and `VmRSS` of this process, in MiB.
fn memory() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let read = |key: &str| {
        status
            .lines()
            .find_map(|l| {
                l.strip_prefix(key)?
                    .trim()
                    .strip_suffix("kB")?
                    .trim()
                    .parse::<f64>()
                    .ok()
            })
            .unwrap_or(0.0)
            / 1024.0
    };
    (read("VmHWM:"), read("VmRSS:"))
}

/// Two proxies' cumulative histograms, bucket by bucket.
fn sum_buckets(a: Vec<(f64, f64)>, b: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    a.into_iter()
        .zip(b)
        .map(|((bound, x), (_, y))| (bound, x + y))
        .collect()
}

/// `VmHWM` and `VmRSS` of process `pid`, in MiB.
fn memory_of(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let read = |key: &str| {
        status
            .lines()
            .find_map(|l| {
                l.strip_prefix(key)?
                    .trim()
                    .strip_suffix("kB")?
                    .trim()
                    .parse::<f64>()
                    .ok()
            })
            .unwrap_or(0.0)
            / 1024.0
    };
    (read("VmHWM:"), read("VmRSS:"))
}

/// A proxy of the run: in this process, or a program of its own.
enum Running {
    Here(Arc<Proxy>),
    Program(support::ProxyProcess),
}

impl Running {
    /// Conversations it holds in memory (a program's, from its `/metrics`).
    async fn sessions(&self, url: &str) -> usize {
        match self {
            Running::Here(p) => p.sessions_in_memory(),
            Running::Program(_) => {
                let text = reqwest::get(format!("{url}/metrics"))
                    .await
                    .unwrap()
                    .text()
                    .await
                    .unwrap();
                text.lines()
                    .find_map(|l| {
                        l.strip_prefix("mektpoy_proxy_sessions_in_memory ")?
                            .trim()
                            .parse()
                            .ok()
                    })
                    .unwrap_or(0)
            }
        }
    }

    /// Its own peak and resident memory (MiB), when it is a program.
    fn memory(&self) -> Option<(f64, f64)> {
        match self {
            Running::Here(_) => None,
            Running::Program(p) => Some(memory_of(p.child.id())),
        }
    }
}

async fn start_proxy(
    standin: &str,
    store: Store,
    max_sessions: Option<usize>,
) -> (String, Arc<Proxy>) {
    let mut settings = Settings::default();
    if let Some(m) = max_sessions {
        settings.max_sessions = m;
    }
    settings
        .upstreams
        .insert("anthropic".to_owned(), standin.to_owned());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let proxy = Proxy::new(settings, store);
    tokio::spawn(mektpoy_proxy::serve(
        listener,
        Arc::clone(&proxy),
        std::future::pending(),
    ));
    (url, proxy)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        return;
    }
    let mut n = 1_000;
    if args.iter().any(|a| a == "--quick") {
        n = 50;
    }
    if let Some(i) = args.iter().position(|a| a == "--conversations") {
        n = args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .expect("--conversations N");
    }
    let value = |flag: &str| {
        args.iter().position(|a| a == flag).map(|i| {
            args.get(i + 1)
                .unwrap_or_else(|| panic!("{flag} VALUE"))
                .clone()
        })
    };
    let rate: Option<f64> = value("--rate").map(|v| v.parse().expect("--rate R"));
    let max_sessions: Option<usize> =
        value("--max-sessions").map(|v| v.parse().expect("--max-sessions M"));
    let processes = args.iter().any(|a| a == "--processes");
    let sticky_only = args.iter().any(|a| a == "--sticky-only");
    let claude_code = args.iter().any(|a| a == "--claude-code");
    let (bodies, long_bodies, size) = if claude_code {
        (
            Bodies {
                tools: 300,
                description: 60,
                turn: 12_000,
            },
            Bodies {
                tools: 300,
                description: 60,
                turn: 100,
            },
            "Claude Code-sized bodies (300 tools, 12 KB turns)",
        )
    } else {
        (TINY, TINY, "tiny bodies")
    };
    let (start_hwm, _) = memory();
    let standin = format!("http://{}", mektpoy_standin::start("127.0.0.1:0").unwrap());
    let dir = tempfile::tempdir().unwrap();
    let cluster = if args.iter().any(|a| a == "--sqlite") {
        None
    } else {
        support::cluster()
    };
    let (kind, spec) = match &cluster {
        Some(pg) => ("Postgres (a throwaway cluster, fsync off)", pg.url()),
        None => (
            "SQLite (one file)",
            format!("sqlite:{}", dir.path().join("load.db").display()),
        ),
    };
    let (a, proxy_a, b, proxy_b) = if processes {
        let bound = max_sessions.map(|m| m.to_string());
        let extra: Vec<&str> = match &bound {
            Some(m) => vec!["--max-sessions", m],
            None => Vec::new(),
        };
        let pa = support::ProxyProcess::start_with(&spec, &standin, &extra);
        let pb = support::ProxyProcess::start_with(&spec, &standin, &extra);
        (
            pa.url.clone(),
            Running::Program(pa),
            pb.url.clone(),
            Running::Program(pb),
        )
    } else {
        let (a, pa) = start_proxy(&standin, Store::connect(&spec).unwrap(), max_sessions).await;
        let (b, pb) = start_proxy(&standin, Store::connect(&spec).unwrap(), max_sessions).await;
        (a, Running::Here(pa), b, Running::Here(pb))
    };
    let http = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(usize::MAX)
        .build()
        .unwrap();

    println!(
        "{n} concurrent conversations x {REQUESTS} requests, {size}; two proxies on one \
         store: {kind}; {}; {}; at most {} conversations in memory per proxy",
        if processes {
            "each proxy a program of its own"
        } else {
            "the proxies in this process"
        },
        rate.map_or_else(
            || "a closed loop".to_owned(),
            |r| format!("paced at {r} requests/s")
        ),
        max_sessions.unwrap_or(Settings::default().max_sessions),
    );
    let run_started = Instant::now();
    let (mut direct, direct_wall, direct_failed) = load(
        &http,
        vec![standin.clone()],
        (false, bodies),
        ("direct", rate),
        n,
    )
    .await;
    direct.sort();
    let (direct_hwm, direct_rss) = memory();
    println!(
        "| | requests | failed conversations | p50 / p99 / p99.9 (ms) | added p50 / p99 / p99.9 (ms) | throughput (req/s) | the proxies' own time, mean (ms) |"
    );
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| direct | {} | {} | {} / {} / {} | | {:.0} | |",
        direct.len(),
        direct_failed.len(),
        ms(percentile(&direct, 0.5)),
        ms(percentile(&direct, 0.99)),
        ms(percentile(&direct, 0.999)),
        direct.len() as f64 / direct_wall.as_secs_f64(),
    );
    println!("|  then: VmHWM {direct_hwm:.1} MiB, VmRSS {direct_rss:.1} MiB | | | | | | |");
    let mut failures = vec![("direct", direct_failed)];
    let phases: &[(&str, bool)] = if sticky_only {
        &[("two proxies, each conversation on one", true)]
    } else {
        &[
            ("two proxies, requests alternating", false),
            ("two proxies, each conversation on one", true),
        ]
    };
    for &(name, sticky) in phases {
        let before = (own_time(&a).await, own_time(&b).await);
        let buckets_before = sum_buckets(own_buckets(&a).await, own_buckets(&b).await);
        let (mut proxied, wall, failed) = load(
            &http,
            vec![a.clone(), b.clone()],
            (sticky, bodies),
            (name, rate),
            n,
        )
        .await;
        let after = (own_time(&a).await, own_time(&b).await);
        let buckets_after = sum_buckets(own_buckets(&a).await, own_buckets(&b).await);
        let own = ((after.0.0 - before.0.0) + (after.1.0 - before.1.0))
            / ((after.0.1 - before.0.1) + (after.1.1 - before.1.1)).max(1.0);
        proxied.sort();
        let added = |p| percentile(&proxied, p).saturating_sub(percentile(&direct, p));
        println!(
            "| {name} | {} | {} | {} / {} / {} | {} / {} / {} | {:.0} | {:.3} |",
            proxied.len(),
            failed.len(),
            ms(percentile(&proxied, 0.5)),
            ms(percentile(&proxied, 0.99)),
            ms(percentile(&proxied, 0.999)),
            ms(added(0.5)),
            ms(added(0.99)),
            ms(added(0.999)),
            proxied.len() as f64 / wall.as_secs_f64(),
            own * 1e3,
        );
        println!(
            "|  the proxies' own time (their `/metrics` histogram), p50 / p99 / p99.9: {} / {} / {} ms | | | | | | |",
            bucket_percentile(&buckets_before, &buckets_after, 0.5),
            bucket_percentile(&buckets_before, &buckets_after, 0.99),
            bucket_percentile(&buckets_before, &buckets_after, 0.999),
        );
        failures.push((name, failed));
        let (hwm, rss) = memory();
        println!(
            "|  then: VmHWM {hwm:.1} MiB, VmRSS {rss:.1} MiB, conversations in memory {} + {} | | | | | | |",
            proxy_a.sessions(&a).await,
            proxy_b.sessions(&b).await
        );
        for (label, p) in [("a", &proxy_a), ("b", &proxy_b)] {
            if let Some((hwm, rss)) = p.memory() {
                println!("|  proxy {label}: VmHWM {hwm:.1} MiB, VmRSS {rss:.1} MiB | | | | | | |");
            }
        }
    }
    println!("the run took {:.0} s", run_started.elapsed().as_secs_f64());
    println!("peak RSS of the process (VmHWM) at start: {start_hwm:.1} MiB");
    for (name, failed) in &failures {
        if let Some(first) = failed.first() {
            println!(
                "{name}: {} conversations failed, the first: {first}",
                failed.len()
            );
        }
    }

    if args.iter().any(|a| a == "--no-long") {
        return;
    }
    // One long conversation, alone, through one proxy (it stays in that proxy's memory).
    let direct_long = long_conversation(&http, &standin, ("long-direct", long_bodies), false).await;
    let proxied_long = long_conversation(&http, &a, ("long-proxied", long_bodies), true).await;
    println!("one conversation of {LONG} requests, through one proxy, no other load:");
    println!(
        "| requests | direct, mean (ms) | proxied, mean (ms) | added, mean (ms) | the proxy's own time, mean (ms) |"
    );
    println!("|---|---|---|---|---|");
    for (w, name) in ["1-10", &format!("{}-{LONG}", LONG - 9)].iter().enumerate() {
        println!(
            "| {name} | {} | {} | {} | {:.3} |",
            ms(direct_long[w].0),
            ms(proxied_long[w].0),
            ms(proxied_long[w].0.saturating_sub(direct_long[w].0)),
            proxied_long[w].1 * 1e3,
        );
    }
    drop(cluster);
}

/// The proxy's own-time histogram so far, from its `/metrics`: each bucket's upper bound (s)
/// and cumulative count, `+Inf` last.
pub async fn own_buckets(proxy: &str) -> Vec<(f64, f64)> {
    let text = reqwest::get(format!("{proxy}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("mektpoy_proxy_added_seconds_bucket{le=\"")?;
            let (bound, count) = rest.split_once("\"} ")?;
            let bound = if bound == "+Inf" {
                f64::INFINITY
            } else {
                bound.parse().ok()?
            };
            Some((bound, count.trim().parse().ok()?))
        })
        .collect()
}

/// The bucket bound (ms) under which fraction `p` of the requests counted between `before`
/// and `after` (cumulative histograms of one or more proxies, summed) fall: "at most".
pub fn bucket_percentile(before: &[(f64, f64)], after: &[(f64, f64)], p: f64) -> String {
    let counts: Vec<(f64, f64)> = after
        .iter()
        .zip(before)
        .map(|((bound, a), (_, b))| (*bound, a - b))
        .collect();
    let total = counts.last().map_or(0.0, |c| c.1);
    counts
        .iter()
        .find(|(_, c)| *c >= total * p && total > 0.0)
        .map_or_else(
            || "-".to_owned(),
            |(bound, _)| {
                if bound.is_finite() {
                    format!("≤ {}", bound * 1e3)
                } else {
                    "> 2500".to_owned()
                }
            },
        )
}
