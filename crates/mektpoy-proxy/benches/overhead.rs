//! The proxy's added latency: the same conversations sent to the stand-in directly and through
//! the proxy, in one run, on loopback. Latency percentiles need every sample, not criterion's
//! mean per iteration, so this bench has its own harness.
//!
//! Then one long conversation per body size (1,000 requests), with the proxy's own time of
//! each request read from its `/metrics`: the cost of request 10 beside that of request
//! 1,000 in one run.
//!
//! `cargo bench -p mektpoy-proxy --bench overhead` (figures in `docs/benchmarks.md`);
//! `-- --quick` for a short run, `-- --long-only` for the long conversations alone.

mod common;

use common::{ms, own_time, percentile};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mektpoy_proxy::{Proxy, Settings, Store};
use serde_json::{Value, json};

struct Shape {
    name: &'static str,
    tools: usize,
    /// Bytes of each tool's description (the schemas of a real harness are long).
    description: usize,
    /// Bytes of each user turn.
    turn: usize,
    requests: usize,
}

fn body(shape: &Shape, history: &[Value], step: usize) -> Value {
    let tools: Vec<Value> = (0..shape.tools)
        .map(|i| {
            json!({"name": format!("tool_{i}"), "description": "d".repeat(shape.description),
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}})
        })
        .collect();
    let mut messages = history.to_vec();
    messages.push(
        json!({"role": "user", "content": format!("step {step} {}", "x".repeat(shape.turn))}),
    );
    json!({"model": "claude-opus-5", "max_tokens": 64, "system": "You are a coding agent.",
        "tools": tools, "messages": messages})
}

/// One conversation of `shape.requests` requests against `base`: each request's latency, the
/// largest body, and (with `proxy`, read from its `/metrics` around each request) each
/// request's own time in the proxy.
async fn conversation(
    base: &str,
    session: &str,
    shape: &Shape,
    proxy: Option<&str>,
) -> (Vec<Duration>, usize, Vec<f64>) {
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let mut history = Vec::new();
    let mut latencies = Vec::with_capacity(shape.requests);
    let mut largest = 0;
    let mut own = Vec::new();
    for step in 0..shape.requests {
        let b = body(shape, &history, step).to_string();
        largest = largest.max(b.len());
        let before = match proxy {
            Some(p) => own_time(p).await.0,
            None => 0.0,
        };
        let started = Instant::now();
        let response = http
            .post(format!("{base}/v1/messages"))
            .header("x-api-key", "sk-bench")
            .header("anthropic-version", "2023-06-01")
            .header("content-type", "application/json")
            .header("x-mektpoy-session", session)
            .header("x-mektpoy-test-session", session)
            .body(b)
            .send()
            .await
            .unwrap();
        assert!(
            response.status().is_success(),
            "{}",
            response.text().await.unwrap()
        );
        let v: Value = response.json().await.unwrap();
        latencies.push(started.elapsed());
        if let Some(p) = proxy {
            own.push(own_time(p).await.0 - before);
        }
        let last = body(shape, &[], step)["messages"][0].clone();
        history.push(last);
        history.push(json!({"role": "assistant", "content": v["content"]}));
    }
    (latencies, largest, own)
}

/// The median of `xs[at - 10 .. at]` (requests `at - 9` to `at`, counted from 1), in ms: on
/// a shared machine a mean is one preempted request away from another figure.
fn window(xs: &[f64], at: usize) -> f64 {
    let mut w = xs[at.saturating_sub(10)..at.min(xs.len())].to_vec();
    w.sort_by(f64::total_cmp);
    w.get(w.len() / 2).copied().unwrap_or(0.0) * 1e3
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let long_only = std::env::args().any(|a| a == "--long-only");
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let standin = format!("http://{}", mektpoy_standin::start("127.0.0.1:0").unwrap());
    let dir = tempfile::tempdir().unwrap();
    let mut settings = Settings::default();
    settings
        .upstreams
        .insert("anthropic".to_owned(), standin.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy_url = format!("http://{}", listener.local_addr().unwrap());
    let proxy = Proxy::new(settings, Store::open(dir.path().join("bench.db")).unwrap());
    tokio::spawn(mektpoy_proxy::serve(
        listener,
        Arc::clone(&proxy),
        std::future::pending(),
    ));

    let scale = if quick { 10 } else { 1 };
    if !long_only {
        percentiles(&standin, &proxy_url, scale).await;
    }
    along_one_conversation(&standin, &proxy_url, scale).await;
}

/// Percentiles of whole conversations, direct and proxied.
async fn percentiles(standin: &str, proxy_url: &str, scale: usize) {
    let shapes = [
        Shape {
            name: "tiny (1 tool, ~0.2 KB first body)",
            tools: 1,
            description: 8,
            turn: 8,
            requests: 400 / scale,
        },
        Shape {
            name: "Claude Code-sized (300 tools, 50 KB first body)",
            tools: 300,
            description: 60,
            turn: 2_000,
            requests: 120 / scale,
        },
    ];
    println!(
        "| bodies | requests | largest body | direct p50 / p99 / p99.9 (ms) | proxied p50 / p99 / p99.9 (ms) | added p50 / p99 (ms) | the proxy's own time, mean (ms) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (n, shape) in shapes.iter().enumerate() {
        let (mut direct, _, _) = conversation(standin, &format!("direct-{n}"), shape, None).await;
        let before = own_time(proxy_url).await;
        let (mut proxied, largest, _) =
            conversation(proxy_url, &format!("proxied-{n}"), shape, None).await;
        let after = own_time(proxy_url).await;
        let own = (after.0 - before.0) / (after.1 - before.1).max(1.0);
        let first_ten: Duration = proxied[..10.min(proxied.len())].iter().sum();
        let last_ten: Duration = proxied[proxied.len().saturating_sub(10)..].iter().sum();
        let direct_first: Duration = direct[..10.min(direct.len())].iter().sum();
        let direct_last: Duration = direct[direct.len().saturating_sub(10)..].iter().sum();
        direct.sort();
        proxied.sort();
        let added = |p| percentile(&proxied, p).saturating_sub(percentile(&direct, p));
        println!(
            "| {} | {} | {} KB | {} / {} / {} | {} / {} / {} | {} / {} | {:.3} |",
            shape.name,
            shape.requests,
            largest / 1024,
            ms(percentile(&direct, 0.5)),
            ms(percentile(&direct, 0.99)),
            ms(percentile(&direct, 0.999)),
            ms(percentile(&proxied, 0.5)),
            ms(percentile(&proxied, 0.99)),
            ms(percentile(&proxied, 0.999)),
            ms(added(0.5)),
            ms(added(0.99)),
            own * 1e3,
        );
        println!(
            "|  added, mean of the first 10 requests / the last 10 | | | | | {} / {} | |",
            ms(first_ten.saturating_sub(direct_first) / 10),
            ms(last_ten.saturating_sub(direct_last) / 10),
        );
    }
}

/// One conversation of 1,000 requests per body size, directly and through the proxy: the
/// proxy's own time (the upstream excluded) at requests 1–10, 91–100, 491–500 and 991–1,000
/// (the median of each ten).
async fn along_one_conversation(standin: &str, proxy_url: &str, scale: usize) {
    let requests = 1_000 / scale;
    let shapes = [
        Shape {
            name: "tiny (1 tool)",
            tools: 1,
            description: 8,
            turn: 8,
            requests,
        },
        // 300 tools (about 48 KB) and turns of 100 bytes: 50 KB at request 1, about 290 KB
        // (some 75K tokens) at request 1,000.
        Shape {
            name: "Claude Code-sized (300 tools)",
            tools: 300,
            description: 60,
            turn: 100,
            requests,
        },
    ];
    let at: Vec<usize> = [10, 100, 500, 1_000]
        .into_iter()
        .map(|a| a / scale)
        .filter(|&a| a >= 10)
        .collect();
    let names: Vec<String> = at.iter().map(|a| format!("{}–{a}", a - 9)).collect();
    println!();
    println!(
        "One conversation of {requests} requests: the proxy's own time, median of each window (ms)"
    );
    println!(
        "| bodies | body at the last request | {} | direct p50 / proxied p50 of the last ten (ms) |",
        names.join(" | ")
    );
    println!("|---|---|{}---|", "---|".repeat(at.len()));
    for (n, shape) in shapes.iter().enumerate() {
        let (direct, _, _) = conversation(standin, &format!("long-direct-{n}"), shape, None).await;
        let (proxied, largest, own) = conversation(
            proxy_url,
            &format!("long-proxied-{n}"),
            shape,
            Some(proxy_url),
        )
        .await;
        let cells: Vec<String> = at
            .iter()
            .map(|&a| format!("{:.3}", window(&own, a)))
            .collect();
        let last = |xs: &[Duration]| {
            let mut w = xs[xs.len().saturating_sub(10)..].to_vec();
            w.sort();
            percentile(&w, 0.5)
        };
        println!(
            "| {} | {} KB | {} | {} / {} |",
            shape.name,
            largest / 1024,
            cells.join(" | "),
            ms(last(&direct)),
            ms(last(&proxied)),
        );
    }
}
