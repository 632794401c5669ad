//! `mektpoy-proxy`: an HTTP proxy on the mektpoy crate that a harness (Claude Code, Codex,
//! OpenCode, the official SDKs) points its base URL at, so that its prompt cache survives tool
//! churn without the harness embedding a Rust crate.
//!
//! Each client request carries its whole state. The proxy reads it as a step of one
//! conversation ([`conversation`]), diffs it against that conversation's append-only log
//! ([`translate`]), logs what is new, and sends upstream the request the crate builds for the
//! route: tool changes as developer messages where the route takes them, its own cache
//! breakpoints, the sticky thinking policy. The answer goes back to the client byte for byte
//! and, decoded, into the log ([`server`]). Logs live in SQLite or Postgres ([`store`]).

pub mod conversation;
pub mod conversation_state;
pub mod demo;
pub mod metrics;
pub mod server;
pub mod store;
pub mod translate;

pub use server::{Proxy, Settings, router};
pub use store::Store;

/// Serves `proxy` on `listener` until `shutdown` resolves; requests in flight finish first.
/// Needs tokio's multi-threaded runtime: the crate's work (the log, the store) runs in
/// `block_in_place`.
///
/// # Errors
/// The listener's I/O fault.
pub async fn serve(
    listener: tokio::net::TcpListener,
    proxy: std::sync::Arc<Proxy>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    // Housekeeping: idle conversations leave memory, old ones leave the store.
    let every = (proxy.settings().idle / 4).clamp(
        std::time::Duration::from_secs(1),
        std::time::Duration::from_secs(60),
    );
    let keeper = std::sync::Arc::downgrade(&proxy);
    let housekeeping = tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            let Some(proxy) = keeper.upgrade() else {
                return;
            };
            let evicted = proxy.evict_idle();
            if evicted > 0 {
                tracing::debug!(evicted, "idle conversations left memory");
            }
            match tokio::task::block_in_place(|| proxy.apply_retention()) {
                Ok(deleted) if !deleted.is_empty() => {
                    tracing::info!(
                        deleted = deleted.len(),
                        "conversations past retention deleted"
                    );
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "retention"),
            }
        }
    });
    let served = axum::serve(listener, router(proxy))
        .with_graceful_shutdown(shutdown)
        .await;
    housekeeping.abort();
    served
}
