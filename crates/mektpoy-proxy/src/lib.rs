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

pub mod client_body;
pub mod conversation;
pub mod conversation_state;
pub mod demo;
#[doc(hidden)]
pub mod fuzzing;
pub mod metrics;
pub mod server;
pub mod store;
pub mod translate;

pub use server::{Proxy, Settings, router};
pub use store::Store;

/// Serves `proxy` on `listener` until `shutdown` resolves; then it stops accepting and lets
/// the requests in flight finish, answers being streamed back included (sent whole and
/// logged), for at most [`Settings::shutdown_grace`]. Needs tokio's multi-threaded runtime:
/// the crate's work (the log, the store) runs in `block_in_place`.
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
    // The grace period runs from the signal.
    let grace = proxy.settings().shutdown_grace;
    let (fired, deadline) = tokio::sync::watch::channel(None);
    let signal = async move {
        shutdown.await;
        tracing::info!("shutting down: no new connections, finishing the requests in flight");
        let _ = fired.send(Some(tokio::time::Instant::now() + grace));
    };
    let expired = |mut deadline: tokio::sync::watch::Receiver<Option<tokio::time::Instant>>| async move {
        let at = match deadline.wait_for(Option::is_some).await {
            Ok(at) => *at,
            Err(_) => None,
        };
        match at {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    };
    use std::future::IntoFuture as _;
    let server = axum::serve(listener, router(std::sync::Arc::clone(&proxy)))
        .with_graceful_shutdown(signal)
        .into_future();
    let served = tokio::select! {
        served = server => served,
        () = expired(deadline.clone()) => {
            tracing::warn!(?grace, "shutdown grace period over: connections still open are cut");
            Ok(())
        }
    };
    // The connections are closed; a stream's task may still be logging its answer.
    tokio::select! {
        () = proxy.streams_finished() => {}
        () = expired(deadline) => {
            tracing::warn!(?grace, "shutdown grace period over: answers not yet logged are lost");
        }
    }
    housekeeping.abort();
    served
}
