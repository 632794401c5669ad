//! `/metrics` in the Prometheus text format (version 0.0.4): a handful of counters and
//! histograms kept with atomics and one small map, no client library.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// A latency histogram.
#[derive(Debug, Default)]
pub struct Histogram {
    counts: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    sum_micros: AtomicU64,
}

impl Histogram {
    /// Records one observation.
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        for (bound, count) in BUCKETS.iter().zip(&self.counts) {
            if secs <= *bound {
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_micros
            .fetch_add(d.as_micros() as u64, Ordering::Relaxed);
    }

    fn render(&self, name: &str, help: &str, out: &mut String) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (bound, count) in BUCKETS.iter().zip(&self.counts) {
            let _ = writeln!(
                out,
                "{name}_bucket{{le=\"{bound}\"}} {}",
                count.load(Ordering::Relaxed)
            );
        }
        let count = self.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum {sum}\n{name}_count {count}");
    }
}

/// What the proxy counts.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Client requests by (API, status answered).
    requests: Mutex<BTreeMap<(String, u16), u64>>,
    /// Upstream answers by status.
    upstream: Mutex<BTreeMap<u16, u64>>,
    /// Input and cached tokens by route, from the providers' usage.
    tokens: Mutex<BTreeMap<String, (u64, u64)>>,
    /// The proxy's own time per request: reading, logging and serializing before the upstream
    /// request, logging after the answer.
    pub added: Histogram,
    /// Time per batch written to the store.
    pub store_write: Histogram,
}

fn bump<K: Ord>(map: &Mutex<BTreeMap<K, u64>>, key: K) {
    *map.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .entry(key)
        .or_default() += 1;
}

impl Metrics {
    /// A client request answered with `status`.
    pub fn request(&self, api: &str, status: u16) {
        bump(&self.requests, (api.to_owned(), status));
    }

    /// An upstream answer with `status`.
    pub fn upstream(&self, status: u16) {
        bump(&self.upstream, status);
    }

    /// A provider's usage on `route`: input tokens (cached ones included) and cached ones.
    pub fn tokens(&self, route: &str, input: u64, cached: u64) {
        let mut map = self
            .tokens
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let entry = map.entry(route.to_owned()).or_default();
        entry.0 += input;
        entry.1 += cached;
    }

    /// The text format, with `sessions` conversations in memory.
    pub fn render(&self, sessions: usize) -> String {
        let mut out = String::new();
        out.push_str("# HELP mektpoy_proxy_requests_total Client requests by API and status answered.\n# TYPE mektpoy_proxy_requests_total counter\n");
        for ((api, status), n) in self.requests.lock().iter().flat_map(|m| m.iter()) {
            let _ = writeln!(
                out,
                "mektpoy_proxy_requests_total{{api=\"{api}\",status=\"{status}\"}} {n}"
            );
        }
        out.push_str("# HELP mektpoy_proxy_upstream_responses_total Upstream answers by status.\n# TYPE mektpoy_proxy_upstream_responses_total counter\n");
        for (status, n) in self.upstream.lock().iter().flat_map(|m| m.iter()) {
            let _ = writeln!(
                out,
                "mektpoy_proxy_upstream_responses_total{{status=\"{status}\"}} {n}"
            );
        }
        out.push_str("# HELP mektpoy_proxy_input_tokens_total Input tokens the providers measured, cached ones included, by route.\n# TYPE mektpoy_proxy_input_tokens_total counter\n");
        let tokens = self.tokens.lock().map(|m| m.clone()).unwrap_or_default();
        for (route, (input, _)) in &tokens {
            let _ = writeln!(
                out,
                "mektpoy_proxy_input_tokens_total{{route=\"{route}\"}} {input}"
            );
        }
        out.push_str("# HELP mektpoy_proxy_cached_tokens_total Input tokens the providers read from their cache, by route.\n# TYPE mektpoy_proxy_cached_tokens_total counter\n");
        for (route, (_, cached)) in &tokens {
            let _ = writeln!(
                out,
                "mektpoy_proxy_cached_tokens_total{{route=\"{route}\"}} {cached}"
            );
        }
        let _ = writeln!(
            out,
            "# HELP mektpoy_proxy_sessions_in_memory Conversations held in memory.\n# TYPE mektpoy_proxy_sessions_in_memory gauge\nmektpoy_proxy_sessions_in_memory {sessions}"
        );
        self.added.render(
            "mektpoy_proxy_added_seconds",
            "The proxy's own time per request, upstream excluded.",
            &mut out,
        );
        self.store_write.render(
            "mektpoy_proxy_store_write_seconds",
            "Time per batch written to the store.",
            &mut out,
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_format_holds_every_family() {
        let m = Metrics::default();
        m.request("messages", 200);
        m.request("messages", 200);
        m.upstream(529);
        m.tokens("anthropic/claude-opus-5", 100, 80);
        m.added.observe(Duration::from_micros(700));
        let text = m.render(3);
        for line in [
            "mektpoy_proxy_requests_total{api=\"messages\",status=\"200\"} 2",
            "mektpoy_proxy_upstream_responses_total{status=\"529\"} 1",
            "mektpoy_proxy_input_tokens_total{route=\"anthropic/claude-opus-5\"} 100",
            "mektpoy_proxy_cached_tokens_total{route=\"anthropic/claude-opus-5\"} 80",
            "mektpoy_proxy_sessions_in_memory 3",
            "mektpoy_proxy_added_seconds_bucket{le=\"0.0005\"} 0",
            "mektpoy_proxy_added_seconds_bucket{le=\"0.001\"} 1",
            "mektpoy_proxy_added_seconds_count 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
    }
}
