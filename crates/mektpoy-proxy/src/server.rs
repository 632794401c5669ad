//! The HTTP side: a client's request in, the crate's request upstream, the answer back to the
//! client as it came and into the log.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use futures_util::StreamExt;
use mektpoy::WireRequest;
use mektpoy::response::{
    ChatStream, MessagesStream, ResponsesStream, decode_chat, decode_messages, decode_responses,
};
use serde_json::{Value, json};
use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

use crate::conversation::conversation_key;
use crate::conversation_state::{Conversation, Refusal};
use crate::store::Store;
use crate::translate;

/// What a proxy serves with.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Upstream base URLs by provider: `anthropic` and `deepseek` take `POST {url}/v1/messages`,
    /// `openai-compatible` takes `POST {url}/chat/completions`, `openai` (the Responses API)
    /// `POST {url}/responses`.
    pub upstreams: BTreeMap<String, String>,
    /// The largest request body taken (bytes); larger ones get a 413.
    pub body_limit: usize,
    /// A conversation without a request for this long leaves memory; its next request loads
    /// it back from the store.
    pub idle: Duration,
    /// At most this many conversations in memory: past it, the least recently used idle ones
    /// leave first.
    pub max_sessions: usize,
    /// Conversations not written for this long are deleted from the store (`None`: kept).
    pub retention: Option<Duration>,
    /// On shutdown, how long requests in flight (streams included) may take to finish before
    /// the proxy exits anyway.
    pub shutdown_grace: Duration,
    /// Each request's log line carries the client's body and the answer's (`--log-bodies`):
    /// off by default, since bodies hold the users' code and conversations.
    pub log_bodies: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            upstreams: BTreeMap::from([
                (
                    "anthropic".to_owned(),
                    "https://api.anthropic.com".to_owned(),
                ),
                (
                    "deepseek".to_owned(),
                    "https://api.deepseek.com/anthropic".to_owned(),
                ),
                (
                    mektpoy::route::OPENAI_COMPATIBLE.to_owned(),
                    "https://api.openai.com/v1".to_owned(),
                ),
                ("openai".to_owned(), "https://api.openai.com/v1".to_owned()),
            ]),
            body_limit: 32 << 20,
            idle: Duration::from_secs(600),
            max_sessions: 10_000,
            retention: None,
            shutdown_grace: Duration::from_secs(30),
            log_bodies: false,
        }
    }
}

type Slot = Arc<AsyncMutex<Option<Conversation>>>;

/// The proxy's shared state.
#[derive(Debug)]
pub struct Proxy {
    settings: Settings,
    store: Store,
    http: reqwest::Client,
    /// One slot per conversation: a request holds it until its answer is logged, so two
    /// requests of one conversation queue (each is a step of one loop; answering the second
    /// with a 409 would make a harness that retries on its own fail instead).
    conversations: Mutex<HashMap<String, (Slot, Instant)>>,
    metrics: Arc<crate::metrics::Metrics>,
    /// The tasks streaming answers back (and logging them): a shutdown waits for them.
    streams: tokio_util::task::TaskTracker,
}

impl Proxy {
    /// A proxy over `store`.
    pub fn new(settings: Settings, store: Store) -> Arc<Self> {
        let metrics = Arc::new(crate::metrics::Metrics::default());
        Arc::new(Proxy {
            settings,
            store: store.with_metrics(Arc::clone(&metrics)),
            metrics,
            http: reqwest::Client::builder()
                .no_proxy()
                .build()
                .expect("a TLS client with the built-in roots"),
            conversations: Mutex::new(HashMap::new()),
            streams: tokio_util::task::TaskTracker::new(),
        })
    }

    /// Waits until every answer being streamed back has been sent and logged; no new stream
    /// starts once this is called.
    pub async fn streams_finished(&self) {
        self.streams.close();
        self.streams.wait().await;
    }

    /// The slot of conversation `key`. A conversation new to memory first makes room: past
    /// [`Settings::max_sessions`], the least recently used ones nobody holds leave now, not at
    /// the next housekeeping, so that a burst of new conversations (a thousand harnesses
    /// starting at once) cannot hold more than the bound between two housekeeping runs
    /// (decision 148). Those evicted are dropped after the map's lock is released.
    fn slot(&self, key: &str) -> Slot {
        let now = Instant::now();
        let mut evicted = Vec::new();
        let slot = {
            let mut map = self.map();
            if let Some(entry) = map.get_mut(key) {
                entry.1 = now;
                entry.0.clone()
            } else {
                if map.len() >= self.settings.max_sessions {
                    evicted = self.evict_least_recent(&mut map, 1);
                }
                let slot = Slot::default();
                map.insert(key.to_owned(), (slot.clone(), now));
                slot
            }
        };
        drop(evicted);
        slot
    }

    /// Takes out of `map` the least recently used conversations nobody holds, so that `room`
    /// more fit under [`Settings::max_sessions`] (fewer when too many are held): what left, to
    /// be dropped by the caller. A batch of a sixteenth of the bound leaves at once, so that
    /// the sort is paid once per that many new conversations, not for each.
    fn evict_least_recent(
        &self,
        map: &mut HashMap<String, (Slot, Instant)>,
        room: usize,
    ) -> Vec<(Slot, Instant)> {
        let bound = self.settings.max_sessions;
        let target = bound.saturating_sub(room);
        if map.len() <= target {
            return Vec::new();
        }
        let batch = if room > 0 { bound / 16 } else { 0 };
        let excess = (map.len() - target + batch).min(map.len());
        let mut free: Vec<(Instant, String)> = map
            .iter()
            .filter(|(_, (slot, _))| Arc::strong_count(slot) == 1)
            .map(|(k, (_, used))| (*used, k.clone()))
            .collect();
        free.sort_unstable();
        free.into_iter()
            .take(excess)
            .filter_map(|(_, key)| map.remove(&key))
            .collect()
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Slot, Instant)>> {
        self.conversations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// What the proxy serves with.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Conversations in memory.
    pub fn sessions_in_memory(&self) -> usize {
        self.map().len()
    }

    /// Lets idle conversations leave memory: those unused for [`Settings::idle`], then the
    /// least recently used ones past [`Settings::max_sessions`]. Only a conversation nobody
    /// holds leaves (the map's is the only handle, checked under the map's lock, which every
    /// request takes to get one), so no request ever works on a copy the store has moved past.
    pub fn evict_idle(&self) -> usize {
        let now = Instant::now();
        let mut map = self.map();
        let before = map.len();
        map.retain(|_, (slot, used)| {
            Arc::strong_count(slot) > 1 || now.duration_since(*used) < self.settings.idle
        });
        let evicted = self.evict_least_recent(&mut map, 0);
        let left = before - map.len();
        drop(map);
        drop(evicted);
        left
    }

    /// Deletes from the store the conversations past [`Settings::retention`] that are not in
    /// memory.
    ///
    /// # Errors
    /// A store fault.
    pub fn apply_retention(&self) -> Result<Vec<String>, crate::store::StoreError> {
        let Some(retention) = self.settings.retention else {
            return Ok(Vec::new());
        };
        let cutoff = crate::store::now().saturating_sub(retention.as_secs());
        let held: std::collections::HashSet<String> = self.map().keys().cloned().collect();
        self.store
            .delete_written_before(cutoff, &|c| held.contains(c))
    }
}

/// The proxy's routes.
pub fn router(proxy: Arc<Proxy>) -> Router {
    let limit = proxy.settings.body_limit;
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/metrics",
            get(|State(proxy): State<Arc<Proxy>>| async move {
                (
                    [("content-type", "text/plain; version=0.0.4")],
                    proxy.metrics.render(proxy.sessions_in_memory()),
                )
            }),
        )
        .route(
            "/v1/messages",
            post(|s, h, b| handle(Api::Messages, s, h, b)),
        )
        .route(
            "/v1/chat/completions",
            post(|s, h, b| handle(Api::Chat, s, h, b)),
        )
        .route(
            "/chat/completions",
            post(|s, h, b| handle(Api::Chat, s, h, b)),
        )
        .route(
            "/v1/responses",
            post(|s, h, b| handle(Api::Responses, s, h, b)),
        )
        .route(
            "/responses",
            post(|s, h, b| handle(Api::Responses, s, h, b)),
        )
        .route("/mektpoy/sessions/{id}/log.jsonl", get(export))
        .route("/mektpoy/sessions/{id}", get(report))
        .fallback(any(forward))
        .layer(axum::extract::DefaultBodyLimit::max(limit))
        .with_state(proxy)
}

/// The client-side API a request speaks: it picks the reader, the upstream path, the answer's
/// decoder and the error shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Api {
    /// `POST /v1/messages`.
    Messages,
    /// `POST /v1/chat/completions` (OpenAI-compatible).
    Chat,
    /// `POST /v1/responses` (OpenAI's Responses API).
    Responses,
}

impl Api {
    /// The provider a model belongs to on this API: the name of its `--upstream`.
    pub(crate) fn provider(self, model: &str) -> &'static str {
        match self {
            Api::Messages if model.starts_with("deepseek") => "deepseek",
            Api::Messages => "anthropic",
            Api::Chat => mektpoy::route::OPENAI_COMPATIBLE,
            Api::Responses => "openai",
        }
    }

    /// A body's head decoded, its list of messages (or input items) left raw.
    pub(crate) fn parse(self, text: &str) -> Result<crate::client_body::Body<'_>, String> {
        match self {
            Api::Responses => crate::client_body::parse_input(text),
            Api::Messages | Api::Chat => crate::client_body::parse(text),
        }
        .map_err(|e| e.to_string())
    }

    pub(crate) fn read(
        self,
        body: &crate::client_body::Body<'_>,
        provider: &str,
        known: Option<&crate::client_body::Known>,
    ) -> Result<translate::ClientRequest, Refusal> {
        match self {
            Api::Messages => translate::read(body, provider, known),
            Api::Chat => translate::read_chat(body, provider, known),
            Api::Responses => translate::read_responses(body, provider, known),
        }
        .map_err(Refusal::from)
    }

    /// Where the API lives under an upstream's base URL (`https://api.anthropic.com`;
    /// `https://api.openai.com/v1`, `https://api.deepseek.com`; the Responses API, like chat,
    /// under a base that ends in `/v1`).
    fn path(self) -> &'static str {
        match self {
            Api::Messages => "/v1/messages",
            Api::Chat => "/chat/completions",
            Api::Responses => "/responses",
        }
    }

    fn decode(
        self,
        body: &str,
        provider: &str,
    ) -> Result<mektpoy::response::Answer, mektpoy::response::ResponseError> {
        match self {
            Api::Messages => decode_messages(body, provider, None),
            Api::Chat => decode_chat(body, provider, None),
            Api::Responses => decode_responses(body, provider, None),
        }
    }

    /// The provider's error shape: Anthropic's `{"type":"error","error":{..}}`, OpenAI's
    /// `{"error":{..}}`.
    fn error(self, status: StatusCode, kind: &str, message: &str) -> Response {
        let body = match self {
            Api::Messages => json!({"type": "error", "error": {"type": kind, "message": message}}),
            Api::Chat | Api::Responses => {
                json!({"error": {"message": message, "type": kind, "param": null, "code": null}})
            }
        };
        (
            status,
            [("content-type", "application/json")],
            body.to_string(),
        )
            .into_response()
    }

    /// A body not read: over [`Settings::body_limit`] (a 413, Anthropic's `request_too_large`,
    /// <https://docs.claude.com/en/api/errors>, read 2026-12-06; OpenAI's error page names no
    /// type for it: `invalid_request_error`), or cut off.
    fn rejected(
        self,
        rejection: &axum::extract::rejection::BytesRejection,
        limit: usize,
    ) -> Response {
        let status = rejection.status();
        let kind = match self {
            Api::Messages if status == StatusCode::PAYLOAD_TOO_LARGE => "request_too_large",
            _ => "invalid_request_error",
        };
        let message = if status == StatusCode::PAYLOAD_TOO_LARGE {
            format!("mektpoy-proxy: the body is over the limit of {limit} bytes")
        } else {
            format!(
                "mektpoy-proxy: the body could not be read: {}",
                rejection.body_text()
            )
        };
        tracing::warn!(api = ?self, status = status.as_u16(), "request body not read");
        self.error(status, kind, &message)
    }

    fn refused(self, r: &Refusal) -> Response {
        match r {
            Refusal::Invalid(m) => self.error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                &format!("mektpoy-proxy: {m}"),
            ),
            Refusal::Store(m) => self.error(
                StatusCode::SERVICE_UNAVAILABLE,
                "api_error",
                &format!("mektpoy-proxy: {m}"),
            ),
        }
    }
}

/// The Messages API's error shape, for the proxy's own paths.
fn error(status: StatusCode, kind: &str, message: &str) -> Response {
    Api::Messages.error(status, kind, message)
}

/// An answer's server-sent events, decoded as they arrive.
enum StreamDecoder {
    Messages(MessagesStream),
    Chat(ChatStream),
    /// Boxed: it holds the items being built, twice the others' size.
    Responses(Box<ResponsesStream>),
}

impl StreamDecoder {
    fn new(api: Api, provider: &str) -> Self {
        match api {
            Api::Messages => StreamDecoder::Messages(MessagesStream::new(provider, None)),
            Api::Chat => StreamDecoder::Chat(ChatStream::new(provider, None)),
            Api::Responses => {
                StreamDecoder::Responses(Box::new(ResponsesStream::new(provider, None)))
            }
        }
    }

    fn push_text(&mut self, text: &str) -> Result<(), mektpoy::response::ResponseError> {
        match self {
            StreamDecoder::Messages(d) => d.push_text(text),
            StreamDecoder::Chat(d) => d.push_text(text),
            StreamDecoder::Responses(d) => d.push_text(text),
        }
    }

    fn finish(self) -> Result<mektpoy::response::Answer, mektpoy::response::ResponseError> {
        match self {
            StreamDecoder::Messages(d) => d.finish(),
            StreamDecoder::Chat(d) => d.finish(),
            StreamDecoder::Responses(d) => d.finish(),
        }
    }
}

/// A client request of `api`: logged, sent upstream as the crate builds it for the route, and
/// answered as the upstream answered.
async fn handle(
    api: Api,
    State(proxy): State<Arc<Proxy>>,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    let metrics = Arc::clone(&proxy.metrics);
    let name = match api {
        Api::Messages => "messages",
        Api::Chat => "chat",
        Api::Responses => "responses",
    };
    let body = match body {
        Ok(body) => body,
        Err(rejection) => {
            let response = api.rejected(&rejection, proxy.settings.body_limit);
            metrics.request(name, response.status().as_u16());
            return response;
        }
    };
    // Written when dropped: after the answer, when its stream ends, or when the client leaves
    // first (this future dropped).
    let mut trace = Trace::default();
    trace.api = name;
    trace.bodies = proxy.settings.log_bodies;
    if trace.bodies {
        trace.body = Some(String::from_utf8_lossy(&body).into_owned());
    }
    let response = answer(api, proxy, headers, body, &mut trace).await;
    trace.status = Some(response.status().as_u16());
    metrics.request(name, response.status().as_u16());
    response
}

async fn answer(
    api: Api,
    proxy: Arc<Proxy>,
    headers: HeaderMap,
    body: Bytes,
    trace: &mut Trace,
) -> Response {
    let started = Instant::now();
    // Refused before it names a conversation, unless it gets further.
    trace.outcome = "refused";
    // The messages stay raw: only those the conversation's last request did not send are
    // decoded (decision 118).
    let (text, parsed) = match std::str::from_utf8(&body)
        .map_err(|e| e.to_string())
        .and_then(|text| Ok((text, api.parse(text)?)))
    {
        Ok(v) => v,
        Err(e) => {
            let r = Refusal::Invalid(format!("the body is not JSON: {e}"));
            trace.refusal(&r);
            return api.refused(&r);
        }
    };
    // What every body needs before it names a conversation; the rest is read under the
    // conversation's lock, where earlier answers are remembered.
    let model = match parsed.head.get("model").and_then(Value::as_str) {
        Some(m) if !m.is_empty() => m.to_owned(),
        _ => {
            let r = Refusal::Invalid("model: a non-empty string is required".into());
            trace.refusal(&r);
            return api.refused(&r);
        }
    };
    if parsed.messages().is_empty() {
        let r = Refusal::Invalid(match api {
            Api::Responses => "input: at least one item is required".into(),
            Api::Messages | Api::Chat => "messages: at least one message is required".into(),
        });
        trace.refusal(&r);
        return api.refused(&r);
    }
    let provider = api.provider(&model);
    trace.route = format!("{provider}/{model}");
    let Some(base) = proxy.settings.upstreams.get(provider).cloned() else {
        return api.error(
            StatusCode::BAD_GATEWAY,
            "api_error",
            &format!(
                "mektpoy-proxy: no upstream for provider `{provider}` (--upstream {provider}=URL)"
            ),
        );
    };
    let key = conversation_key(&headers, &parsed);
    trace.conversation.clone_from(&key);
    trace.outcome = "";
    let mut slot = proxy.slot(&key).lock_owned().await;
    let store = proxy.store.clone();
    let (prepared, spent) = blocking(|| {
        // Twice at most: a conversation another proxy wrote to since this one loaded it is
        // refused by the store before anything is written; it is loaded again, and the
        // request goes on from what the store holds.
        let mut attempt = 0;
        loop {
            if slot.is_none() {
                *slot = Some(Conversation::load(&store, &key, provider, &model)?);
            }
            let conversation = slot.as_mut().expect("loaded above");
            let client = api.read(&parsed, provider, conversation.known())?;
            match conversation.prepare(provider, client) {
                Ok(wire) => return Ok(wire),
                Err(Refusal::Store(_)) if attempt == 0 => {
                    attempt += 1;
                    *slot = None;
                }
                Err(r) => return Err(r),
            }
        }
    });
    trace.store += spent;
    let wire = match prepared.map(Arc::new) {
        Ok(wire) => {
            trace.outcome = slot.as_ref().map_or("", Conversation::outcome);
            wire
        }
        Err(r) => {
            trace.refusal(&r);
            let empty = slot.as_ref().is_some_and(Conversation::is_empty);
            if empty {
                // A conversation this request would have opened: left as it was, absent.
                let ((), spent) = blocking(|| {
                    let _ = store.delete(&key);
                });
                trace.store += spent;
                *slot = None;
            } else if matches!(r, Refusal::Store(_))
                || slot.as_ref().is_some_and(Conversation::is_stale)
            {
                // Reloaded from the store next time: what is in memory may be ahead of it.
                *slot = None;
            }
            return api.refused(&r);
        }
    };
    let mut added = started.elapsed();
    // The request goes out first; the counterfactual (the client's own body metered as the
    // provider would have cached it) is computed while the provider works.
    let mut in_flight = AbortOnDrop(tokio::spawn(
        upstream_request(&proxy, api, &base, &headers, &wire).send(),
    ));
    let metering = Instant::now();
    tokio::task::block_in_place(|| {
        if let Some(conversation) = slot.as_mut() {
            conversation.observe_direct(&parsed, text);
        }
    });
    added += metering.elapsed();
    trace.added = added;
    let sent = match (&mut in_flight.0).await {
        Ok(sent) => sent,
        Err(e) => {
            trace.answer = "upstream_error";
            return api.error(
                StatusCode::BAD_GATEWAY,
                "api_error",
                &format!("mektpoy-proxy: the upstream request failed: {e}"),
            );
        }
    };
    let upstream = match sent {
        Ok(r) => r,
        Err(e) => {
            trace.answer = "upstream_error";
            return api.error(
                StatusCode::BAD_GATEWAY,
                "api_error",
                &format!("mektpoy-proxy: upstream unreachable: {e}"),
            );
        }
    };
    let status = upstream.status();
    trace.upstream = Some(status.as_u16());
    proxy.metrics.upstream(status.as_u16());
    let mut out_headers = HeaderMap::new();
    for (k, v) in upstream.headers() {
        if !is_hop_by_hop(k.as_str()) && k != "content-length" {
            out_headers.append(k.clone(), v.clone());
        }
    }
    let streamed = upstream
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("text/event-stream"));
    if !status.is_success() {
        // Upstream errors go back unchanged; the attempt stays logged, and the client's retry
        // is the loop's retry.
        let bytes = upstream.bytes().await.unwrap_or_default();
        proxy.metrics.added.observe(added);
        trace.answer = "upstream_error";
        if trace.bodies {
            trace.answer_body = Some(String::from_utf8_lossy(&bytes).into_owned());
        }
        return (status, out_headers, bytes).into_response();
    }
    if streamed {
        // The stream's task writes the line when the stream is over.
        let mut streaming = std::mem::take(trace);
        streaming.status = Some(status.as_u16());
        let body = stream_back(
            slot,
            wire,
            StreamDecoder::new(api, provider),
            upstream,
            (Arc::clone(&proxy.metrics), streaming),
            &proxy.streams,
        );
        return (status, out_headers, body).into_response();
    }
    let bytes = match upstream.bytes().await {
        Ok(b) => b,
        Err(e) => {
            trace.answer = "cut_off";
            return api.error(
                StatusCode::BAD_GATEWAY,
                "api_error",
                &format!("mektpoy-proxy: upstream answer cut off: {e}"),
            );
        }
    };
    let text = String::from_utf8_lossy(&bytes);
    let logging = Instant::now();
    let ((), spent) = blocking(|| {
        let answer = api.decode(&text, provider);
        log_answer(&mut slot, &wire, answer, &proxy.metrics, trace);
    });
    trace.store += spent;
    trace.added = added + logging.elapsed();
    if trace.bodies {
        trace.answer_body = Some(text.into_owned());
    }
    proxy.metrics.added.observe(trace.added);
    (status, out_headers, bytes).into_response()
}

/// A spawned upstream request that a client gone takes with it: the handler's future is
/// dropped when the client disconnects, and so is the request it was waiting on.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// `f` in `block_in_place` (the crate's work and the store's calls block), with the store's
/// part of its time.
fn blocking<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    tokio::task::block_in_place(|| {
        let before = crate::store::time_spent_here();
        let out = f();
        (out, crate::store::time_spent_here().saturating_sub(before))
    })
}

/// One request's log line, written when the request is over: when dropped (after the answer,
/// at the end of its stream, or when the client left first and its handler was dropped). It
/// names the conversation by its scoped key (`<key hash>:<source>:<id>`), never the API key;
/// the bodies only with [`Settings::log_bodies`]. Refusals and store faults at `warn`, the rest
/// at `info`.
#[derive(Debug, Default)]
struct Trace {
    /// `messages` or `chat`; empty: a line already handed to a stream's task.
    api: &'static str,
    conversation: String,
    /// `provider/model`.
    route: String,
    /// What the request did to the log: `retry`, `extend`, `replace`, `refused`,
    /// `store_error`; empty when it never reached its conversation.
    outcome: &'static str,
    /// What became of the answer: `logged`, `not_decoded`, `not_logged`, `upstream_error`,
    /// `cut_off`, `client_gone`; empty when none was asked for.
    answer: &'static str,
    /// Why it was refused or not logged (quoted client values left out without bodies).
    reason: Option<String>,
    upstream: Option<u16>,
    /// The status answered; `None`: the client left before it.
    status: Option<u16>,
    /// The proxy's own time, upstream excluded, and the store's part of the request.
    added: Duration,
    store: Duration,
    bodies: bool,
    body: Option<String>,
    answer_body: Option<String>,
}

impl Trace {
    /// What became of the answer, written when the line is (dropped).
    fn ended(&mut self, answer: &'static str) {
        self.answer = answer;
    }

    fn refusal(&mut self, r: &Refusal) {
        self.outcome = match r {
            Refusal::Invalid(_) => "refused",
            Refusal::Store(_) => "store_error",
        };
        self.reason = Some(self.quote(&r.to_string()));
    }

    /// `message` as a log line may hold it: without bodies, what it quotes between backticks
    /// (a client's role, tool type, ...) left out, and at most 300 characters.
    fn quote(&self, message: &str) -> String {
        if self.bodies {
            return message.to_owned();
        }
        let mut out = String::new();
        for (i, part) in message.split('`').enumerate() {
            out.push_str(if i % 2 == 1 { "…" } else { part });
        }
        match out.char_indices().nth(300) {
            Some((cut, _)) => format!("{}…", &out[..cut]),
            None => out,
        }
    }
}

impl Drop for Trace {
    fn drop(&mut self) {
        if self.api.is_empty() {
            return;
        }
        if self.status.is_none() && self.answer.is_empty() {
            self.answer = "client_gone";
        }
        let warn = matches!(self.outcome, "refused" | "store_error")
            || matches!(self.answer, "not_logged" | "upstream_error");
        macro_rules! line {
            ($level:ident) => {
                tracing::$level!(
                    api = self.api,
                    conversation = self.conversation.as_str(),
                    route = self.route.as_str(),
                    outcome = self.outcome,
                    answer = self.answer,
                    status = self.status,
                    upstream_status = self.upstream,
                    proxy_us = self.added.as_micros() as u64,
                    store_us = self.store.as_micros() as u64,
                    reason = self.reason.as_deref(),
                    body = self.body.as_deref(),
                    answer_body = self.answer_body.as_deref(),
                    "request"
                )
            };
        }
        if warn {
            line!(warn);
        } else {
            line!(info);
        }
    }
}

/// Logs an accepted request's answer: metered, then appended. An answer the crate cannot
/// decode is not logged; the client echoes it back next time, and it is logged then.
fn log_answer(
    slot: &mut OwnedMutexGuard<Option<Conversation>>,
    wire: &WireRequest,
    answer: Result<mektpoy::response::Answer, mektpoy::response::ResponseError>,
    metrics: &crate::metrics::Metrics,
    trace: &mut Trace,
) {
    let Some(conversation) = slot.as_mut() else {
        trace.answer = "not_logged";
        return;
    };
    let agent = conversation.agent();
    if let Err(e) = agent.observe(wire) {
        tracing::warn!(error = %e, "meter");
    }
    match answer {
        Ok(answer) => {
            if let Some(usage) = &answer.usage {
                let route = format!("{}/{}", agent.route().provider, agent.route().model);
                metrics.tokens(
                    &route,
                    usage.prompt_tokens,
                    usage.cache_read_tokens.unwrap_or(0),
                );
                if let Err(e) = agent.observe_usage(usage) {
                    tracing::warn!(error = %e, "meter usage");
                }
            }
            match agent.append(answer.message) {
                Ok(_) => trace.answer = "logged",
                Err(e) => {
                    trace.answer = "not_logged";
                    trace.reason = Some(trace.quote(&e.to_string()));
                    if std::error::Error::source(&e).is_some() {
                        **slot = None;
                    }
                }
            }
        }
        Err(e) => {
            trace.answer = "not_decoded";
            trace.reason = Some(trace.quote(&e.to_string()));
        }
    }
}

/// Server-sent events back to the client as they arrive, decoded on the way; the answer is
/// logged when the stream is whole. A client gone stops the upstream read.
fn stream_back(
    mut slot: OwnedMutexGuard<Option<Conversation>>,
    wire: Arc<WireRequest>,
    mut decoder: StreamDecoder,
    upstream: reqwest::Response,
    (metrics, mut trace): (Arc<crate::metrics::Metrics>, Trace),
    streams: &tokio_util::task::TaskTracker,
) -> Body {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(16);
    // Tracked: a shutdown waits for the answer to reach the client and the log.
    streams.spawn(async move {
        let mut pending: Vec<u8> = Vec::new();
        let mut fault = None;
        trace.answer_body = trace.bodies.then(String::new);
        let mut chunks = upstream.bytes_stream();
        loop {
            // A client gone is noticed at once, not at the next chunk a slow upstream sends:
            // the upstream request goes (dropped with this task), and so does the conversation's
            // lock.
            let chunk = tokio::select! {
                chunk = chunks.next() => chunk,
                () = tx.closed() => {
                    gone(decoder, &mut slot, &wire, &metrics, &mut trace);
                    return;
                }
            };
            let Some(chunk) = chunk else { break };
            match chunk {
                Ok(chunk) => {
                    pending.extend_from_slice(&chunk);
                    // Whole lines only: a chunk may end inside a UTF-8 character.
                    if let Some(end) = pending.iter().rposition(|&b| b == b'\n') {
                        let text = String::from_utf8_lossy(&pending[..=end]).into_owned();
                        pending.drain(..=end);
                        if let Err(e) = decoder.push_text(&text) {
                            fault.get_or_insert(e.to_string());
                        }
                        if let Some(b) = trace.answer_body.as_mut() {
                            b.push_str(&text);
                        }
                    }
                    if tx.send(Ok(chunk)).await.is_err() {
                        // The client is gone: so is the upstream request with this task, and
                        // the answer unless it was whole.
                        gone(decoder, &mut slot, &wire, &metrics, &mut trace);
                        return;
                    }
                }
                Err(e) => {
                    trace.ended("cut_off");
                    let _ = tx.send(Err(std::io::Error::other(e))).await;
                    return; // Cut off: no half answer in the log.
                }
            }
        }
        if !pending.is_empty() {
            let _ = decoder.push_text(&String::from_utf8_lossy(&pending));
        }
        let answer = decoder.finish();
        let logging = Instant::now();
        let ((), spent) = blocking(|| log_answer(&mut slot, &wire, answer, &metrics, &mut trace));
        trace.store += spent;
        trace.added += logging.elapsed();
        metrics.added.observe(trace.added);
        drop(tx);
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    Body::from_stream(stream)
}

/// A client gone before the stream's end: its answer is logged when the events it was sent
/// already make it whole (Codex 0.171 closes the stream once it reads `response.completed`,
/// before the upstream's end of stream), else nothing is (no half answer in the log).
fn gone(
    decoder: StreamDecoder,
    slot: &mut OwnedMutexGuard<Option<Conversation>>,
    wire: &WireRequest,
    metrics: &crate::metrics::Metrics,
    trace: &mut Trace,
) {
    match decoder.finish() {
        Ok(answer) => {
            let ((), spent) = blocking(|| log_answer(slot, wire, Ok(answer), metrics, trace));
            trace.store += spent;
        }
        Err(_) => trace.ended("client_gone"),
    }
}

/// Headers a proxy does not forward (RFC 9110 §7.6.1), and the ones it sets itself.
fn is_hop_by_hop(name: &str) -> bool {
    matches!(
        name,
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "transfer-encoding"
            | "te"
            | "trailer"
            | "upgrade"
            | "host"
    )
}

/// The crate's body as a POST upstream with the client's headers (credentials, version, betas)
/// and the crate's own (its betas joined to the client's).
fn upstream_request(
    proxy: &Proxy,
    api: Api,
    base: &str,
    client: &HeaderMap,
    wire: &Arc<WireRequest>,
) -> reqwest::RequestBuilder {
    let mut headers = reqwest::header::HeaderMap::new();
    for (k, v) in client {
        let name = k.as_str();
        if is_hop_by_hop(name)
            || matches!(
                name,
                "content-length" | "content-type" | "accept-encoding" | "x-mektpoy-session"
            )
        {
            continue;
        }
        headers.append(k.clone(), v.clone());
    }
    for (name, value) in wire.headers() {
        let Ok(header) = HeaderName::from_bytes(name.as_bytes()) else {
            continue;
        };
        let value = match (name.as_str(), headers.get(&header)) {
            // The client's own version wins: it is the API it speaks.
            ("anthropic-version", Some(_)) => continue,
            ("anthropic-beta", Some(theirs)) => {
                let mut betas: Vec<String> = theirs
                    .to_str()
                    .unwrap_or_default()
                    .split(',')
                    .map(|b| b.trim().to_owned())
                    .filter(|b| !b.is_empty())
                    .collect();
                for b in value.split(',') {
                    if !betas.iter().any(|x| x == b.trim()) {
                        betas.push(b.trim().to_owned());
                    }
                }
                betas.join(",")
            }
            _ => value.clone(),
        };
        if let Ok(v) = HeaderValue::from_str(&value) {
            headers.insert(header, v);
        }
    }
    proxy
        .http
        .post(format!("{}{}", base.trim_end_matches('/'), api.path()))
        .headers(headers)
        .body(Bytes::from_owner(WireBody(Arc::clone(wire))))
}

/// The upstream body: the prepared request's own bytes, shared with the handler that meters
/// and logs it once the answer is in, not copied (decision 147: a copy is a pass over the
/// whole conversation, and as many bytes more held per request in flight).
struct WireBody(Arc<WireRequest>);

impl AsRef<[u8]> for WireBody {
    fn as_ref(&self) -> &[u8] {
        self.0.body().as_bytes()
    }
}

/// `GET /mektpoy/sessions/{id}/log.jsonl`: the conversation's log, byte for byte the crate's
/// JSONL. `id` is the conversation key the proxy logs under (`<key hash>:<source>:<id>`); the
/// caller's API key must hash to its first part.
async fn export(
    State(proxy): State<Arc<Proxy>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let scope = crate::conversation::key_hash(&headers);
    if !id.starts_with(&format!("{scope}:")) {
        return error(StatusCode::NOT_FOUND, "not_found_error", "no such session");
    }
    match tokio::task::block_in_place(|| proxy.store.load(&id)) {
        Ok(Some(bytes)) => (
            StatusCode::OK,
            [("content-type", "application/jsonl")],
            bytes,
        )
            .into_response(),
        Ok(None) => error(StatusCode::NOT_FOUND, "not_found_error", "no such session"),
        Err(e) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "api_error",
            &format!("mektpoy-proxy: {e}"),
        ),
    }
}

/// `GET /mektpoy/sessions/{id}`: what the proxy kept cached for the conversation beside what
/// the client's own bodies would have kept, with each miss's attribution line. Figures cover
/// the requests since this process loaded the conversation.
async fn report(
    State(proxy): State<Arc<Proxy>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let scope = crate::conversation::key_hash(&headers);
    let slot = { proxy.map().get(&id).map(|(slot, _)| slot.clone()) };
    let Some(slot) = slot.filter(|_| id.starts_with(&format!("{scope}:"))) else {
        return error(StatusCode::NOT_FOUND, "not_found_error", "no such session");
    };
    let guard = slot.lock().await;
    let Some(conversation) = guard.as_ref() else {
        return error(StatusCode::NOT_FOUND, "not_found_error", "no such session");
    };
    let r = conversation.report();
    let figures = |m: &mektpoy::meter::MeterReport| {
        json!({
            "requests": m.requests,
            "input_tokens": m.total_tokens,
            "cached_tokens": m.cached_tokens,
            "best_tokens": m.best_tokens,
            "hit_ratio": ratio(m.cached_tokens, m.total_tokens),
            "cost": m.cost,
        })
    };
    let mut proxied = figures(&r.proxied);
    proxied["measured"] = json!({
        "requests": r.proxied.measured.requests,
        "input_tokens": r.proxied.measured.prompt_tokens,
        "cached_tokens": r.proxied.measured.cache_read_tokens,
        "hit_ratio": ratio(r.proxied.measured.cache_read_tokens, r.proxied.measured.prompt_tokens),
    });
    let body = json!({
        "conversation": id,
        "route": r.route,
        "proxied": proxied,
        "direct": figures(&r.direct),
        "saved_tokens": r.proxied.cached_tokens.saturating_sub(r.direct.cached_tokens),
        "saved_cost": r.direct.cost.zip(r.proxied.cost).map(|(d, p)| d - p),
        "misses": r.misses,
    });
    (StatusCode::OK, axum::Json(body)).into_response()
}

fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// Any other path (`/v1/models`, token counting) goes to the Anthropic upstream untouched.
async fn forward(
    State(proxy): State<Arc<Proxy>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(base) = proxy.settings.upstreams.get("anthropic") else {
        return error(StatusCode::NOT_FOUND, "not_found_error", "no upstream");
    };
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let mut out = reqwest::header::HeaderMap::new();
    for (k, v) in &headers {
        if !is_hop_by_hop(k.as_str()) && k != "content-length" {
            out.append(k.clone(), v.clone());
        }
    }
    let sent = proxy
        .http
        .request(method, format!("{}{path}", base.trim_end_matches('/')))
        .headers(out)
        .body(body)
        .send()
        .await;
    match sent {
        Ok(r) => {
            let status = r.status();
            let mut h = HeaderMap::new();
            for (k, v) in r.headers() {
                if !is_hop_by_hop(k.as_str()) && k != "content-length" {
                    h.append(k.clone(), v.clone());
                }
            }
            (status, h, Body::from_stream(r.bytes_stream())).into_response()
        }
        Err(e) => error(
            StatusCode::BAD_GATEWAY,
            "api_error",
            &format!("mektpoy-proxy: upstream unreachable: {e}"),
        ),
    }
}
