//! What the proxy's benches share: the proxy's own time from its `/metrics`, percentiles of
//! kept samples, milliseconds as printed.

use std::time::Duration;

/// The proxy's own time so far, from its `/metrics`: (sum in seconds, count).
pub async fn own_time(proxy: &str) -> (f64, f64) {
    let text = reqwest::get(format!("{proxy}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let read = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (
        read("mektpoy_proxy_added_seconds_sum"),
        read("mektpoy_proxy_added_seconds_count"),
    )
}

/// The sample at `p` (0–1) of `sorted`; zero for no samples.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// Milliseconds, three decimals.
pub fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1e3)
}
