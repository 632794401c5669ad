//! A scripted harness-like client, and `mektpoy-proxy demo`: the same conversation sent to the
//! stand-in directly and through the proxy, side by side.
//!
//! The client behaves as the harnesses the proxy is for: it re-sends its whole tool list and
//! history on every request while an MCP server connects, a plugin is disabled and enabled
//! again, the tools come in another order, a schema changes and the history is compacted, and
//! it answers tool calls. Its figures are the stand-in's measured bytes (`x-standin-*`).

use std::sync::Arc;

use mektpoy_standin::{
    CACHED_BYTES_HEADER, CONTENT_HEADER, SESSION_HEADER, TOOL_USE_HEADER, TOTAL_BYTES_HEADER,
};
use serde_json::{Value, json};

use crate::{Proxy, Settings, Store};

/// A proxy in this process with the stand-in as every upstream.
#[derive(Debug)]
pub struct Rig {
    /// The proxy's base URL.
    pub url: String,
    /// The stand-in's base URL.
    pub standin: String,
    /// The proxy itself.
    pub proxy: Arc<Proxy>,
}

impl Rig {
    /// Starts the stand-in and a proxy over the store at `store`.
    ///
    /// # Errors
    /// A port that cannot be bound, a store that cannot be opened.
    pub async fn start(store: &std::path::Path) -> Result<Self, Box<dyn std::error::Error>> {
        Self::start_with(store, Settings::default()).await
    }

    /// [`start`](Self::start) with `settings` (their upstreams replaced by the stand-in).
    ///
    /// # Errors
    /// As [`start`](Self::start).
    pub async fn start_with(
        store: &std::path::Path,
        settings: Settings,
    ) -> Result<Self, Box<dyn std::error::Error>> {
        Self::start_on(Store::open(store)?, settings).await
    }

    /// [`start_with`](Self::start_with) on a store already open (a Postgres one, say).
    ///
    /// # Errors
    /// A port that cannot be bound.
    pub async fn start_on(
        store: Store,
        mut settings: Settings,
    ) -> Result<Self, Box<dyn std::error::Error>> {
        let standin = mektpoy_standin::start("127.0.0.1:0")?;
        for provider in ["anthropic", "deepseek", mektpoy::route::OPENAI_COMPATIBLE] {
            settings
                .upstreams
                .insert(provider.to_owned(), format!("http://{standin}"));
        }
        // The Responses API's base ends in `/v1`, like OpenAI's.
        settings
            .upstreams
            .insert("openai".to_owned(), format!("http://{standin}/v1"));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let proxy = Proxy::new(settings, store);
        tokio::spawn(crate::serve(
            listener,
            Arc::clone(&proxy),
            std::future::pending(),
        ));
        Ok(Rig {
            url: format!("http://{addr}"),
            standin: format!("http://{standin}"),
            proxy,
        })
    }
}

fn tool(name: &str, description: &str) -> Value {
    json!({"name": name, "description": description,
        "input_schema": {"type": "object", "properties": {"arg": {"type": "string"}}}})
}

/// The harness's tool list at step `i`: the churn of a real session.
pub fn tools_at(i: usize) -> Vec<Value> {
    let mut tools = vec![tool("read", "Read a file"), tool("shell", "Run a command")];
    let plugin = tool("lint", "Lint the tree");
    let mcp = [
        tool("mcp__gh__search", "Search issues"),
        tool("mcp__gh__issue", "Open an issue"),
    ];
    if !(5..7).contains(&i) {
        tools.push(plugin); // disabled at steps 5 and 6, enabled again at 7
    }
    if i >= 3 {
        tools.extend(mcp.iter().cloned()); // an MCP server connects at step 3
    }
    if i >= 9 {
        tools.reverse(); // reconnects with its tools in another order
    }
    if i >= 11 {
        tools[0]["description"] = json!("Read a file (v2)"); // a schema change
    }
    tools
}

/// What a scripted conversation met: the stand-in's figures over its accepted requests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Requests sent.
    pub requests: usize,
    /// Of those, refused (any status other than 2xx).
    pub refused: usize,
    /// The first refusal's status and body.
    pub first_refusal: Option<String>,
    /// Bytes of the accepted requests' prefixes (`x-standin-total-bytes`).
    pub total_bytes: u64,
    /// Of those, read from the cache (`x-standin-cached-bytes`).
    pub cached_bytes: u64,
}

impl Outcome {
    /// Cached bytes over total bytes.
    pub fn hit_ratio(&self) -> f64 {
        if self.total_bytes == 0 {
            0.0
        } else {
            self.cached_bytes as f64 / self.total_bytes as f64
        }
    }
}

/// Which API the scripted client speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Speaks {
    /// `/v1/messages`, as JSON or server-sent events.
    Messages {
        /// `stream: true`.
        stream: bool,
    },
    /// `/v1/chat/completions`, as JSON.
    Chat,
}

/// One conversation of `steps` steps against `base`, keyed `session` (the proxy's and the
/// stand-in's session headers both carry it).
///
/// # Errors
/// A transport failure or an accepted answer the client cannot read (a refusal is counted,
/// not an error: the client drops its turn and goes on, as a harness would after a 400).
pub async fn conversation(
    base: &str,
    session: &str,
    model: &str,
    steps: usize,
    speaks: Speaks,
) -> Result<Outcome, String> {
    conversation_over(&[base], session, model, steps, speaks).await
}

/// [`conversation`] with step `i` sent to `bases[i % bases.len()]`: proxies behind a load
/// balancer that does not keep a conversation on one of them.
///
/// # Errors
/// As [`conversation`].
pub async fn conversation_over(
    bases: &[&str],
    session: &str,
    model: &str,
    steps: usize,
    speaks: Speaks,
) -> Result<Outcome, String> {
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .map_err(|e| e.to_string())?;
    let system = format!("You are a coding agent. {}", "rules ".repeat(300));
    let mut history: Vec<Value> = match speaks {
        Speaks::Chat => vec![json!({"role": "system", "content": system})],
        Speaks::Messages { .. } => Vec::new(),
    };
    let mut results: Vec<Value> = Vec::new();
    let mut out = Outcome::default();
    for i in 0..steps {
        if i == 13 {
            // A compaction: the client replaces its history with a summary.
            history.truncate(usize::from(speaks == Speaks::Chat));
            history.push(json!({"role": "user", "content": "Summary of the work so far."}));
            history.push(json!({"role": "assistant", "content": "Understood."}));
        }
        let words = format!("step {i}: go on. {}", "context ".repeat(40));
        let (path, body) = match speaks {
            Speaks::Messages { stream } => {
                // The results of the previous answer's calls, then the user's words.
                let mut user = std::mem::take(&mut results);
                user.push(json!({"type": "text", "text": words}));
                history.push(json!({"role": "user", "content": user}));
                let body = json!({"model": model, "max_tokens": 256,
                    "system": [{"type": "text", "text": system}],
                    "tools": tools_at(i), "messages": history, "stream": stream});
                ("/v1/messages", body)
            }
            Speaks::Chat => {
                history.append(&mut results);
                history.push(json!({"role": "user", "content": words}));
                let tools: Vec<Value> = tools_at(i)
                    .into_iter()
                    .map(|t| {
                        json!({"type": "function", "function": {"name": t["name"],
                        "description": t["description"], "parameters": t["input_schema"]}})
                    })
                    .collect();
                (
                    "/v1/chat/completions",
                    json!({"model": model, "tools": tools, "messages": history}),
                )
            }
        };
        let base = bases[i % bases.len().max(1)];
        let mut request = http
            .post(format!("{base}{path}"))
            .header("x-api-key", "sk-demo")
            .header("authorization", "Bearer sk-demo")
            .header("anthropic-version", "2023-06-01")
            .header("x-mektpoy-session", session)
            .header(SESSION_HEADER, session)
            .header("content-type", "application/json")
            .body(body.to_string());
        if i % 4 == 2 {
            request = request.header(TOOL_USE_HEADER, "read");
        }
        let response = request.send().await.map_err(|e| e.to_string())?;
        out.requests += 1;
        let status = response.status();
        let figure = |name: &str| -> u64 {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok()?.parse().ok())
                .unwrap_or(0)
        };
        let (total, cached) = (figure(TOTAL_BYTES_HEADER), figure(CACHED_BYTES_HEADER));
        let content: Option<Value> = response
            .headers()
            .get(CONTENT_HEADER)
            .and_then(|v| serde_json::from_str(v.to_str().ok()?).ok());
        let text = response.text().await.map_err(|e| e.to_string())?;
        if !status.is_success() {
            out.refused += 1;
            out.first_refusal
                .get_or_insert_with(|| format!("step {i}: {status} {text}"));
            history.pop();
            continue;
        }
        out.total_bytes += total;
        out.cached_bytes += cached;
        let content = content.ok_or_else(|| format!("step {i}: no {CONTENT_HEADER}"))?;
        match speaks {
            Speaks::Messages { .. } => {
                results = content
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|b| b["type"] == "tool_use")
                    .map(|c| json!({"type": "tool_result", "tool_use_id": c["id"], "content": "file contents"}))
                    .collect();
                history.push(json!({"role": "assistant", "content": content}));
            }
            Speaks::Chat => {
                // The stand-in's content header is the assistant message.
                let message = content
                    .as_array()
                    .and_then(|c| c.first())
                    .cloned()
                    .unwrap_or(content);
                results = message["tool_calls"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| json!({"role": "tool", "tool_call_id": c["id"], "content": "file contents"}))
                    .collect();
                history.push(message);
            }
        }
    }
    Ok(out)
}

/// `mektpoy-proxy demo`: each scripted conversation sent directly and through the proxy; a
/// table of what each met.
///
/// # Errors
/// As [`Rig::start`] and [`conversation`].
pub async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("mektpoy-proxy-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let rig = Rig::start(&dir.join("demo.db")).await?;
    println!(
        "mektpoy-proxy demo: a harness that re-sends its whole tool list for 16 steps (an MCP"
    );
    println!("server connects, a plugin goes and comes back, another order, a schema change, a");
    println!(
        "compaction, tool calls), sent to the provider stand-in directly and through the proxy.\n"
    );
    println!(
        "| route | speaks | refused direct | refused proxied | hit direct | hit proxied | input cost direct | input cost proxied |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let rows = [
        ("claude-opus-5", Speaks::Messages { stream: false }),
        ("claude-fable-5-1", Speaks::Messages { stream: true }),
        ("deepseek-flash", Speaks::Messages { stream: false }),
        ("deepseek-v4-pro", Speaks::Messages { stream: false }),
        ("deepseek-v4-pro", Speaks::Chat),
    ];
    for (n, (model, speaks)) in rows.into_iter().enumerate() {
        let direct =
            conversation(&rig.standin, &format!("demo-direct-{n}"), model, 16, speaks).await?;
        let proxied =
            conversation(&rig.url, &format!("demo-proxied-{n}"), model, 16, speaks).await?;
        let api = match speaks {
            Speaks::Messages { stream: true } => "messages, SSE",
            Speaks::Messages { stream: false } => "messages",
            Speaks::Chat => "chat",
        };
        let provider = match speaks {
            Speaks::Chat => mektpoy::route::OPENAI_COMPATIBLE,
            Speaks::Messages { .. } if model.starts_with("deepseek") => "deepseek",
            Speaks::Messages { .. } => "anthropic",
        };
        let price = mektpoy::route_for(provider, model).price().cloned();
        let cost = |o: &Outcome| match &price {
            // Tokens as the stand-in counts them, ⌈bytes / 4⌉.
            Some(p) => format!(
                "${:.4}",
                ((o.total_bytes - o.cached_bytes).div_ceil(4) as f64 * p.input_per_mtok
                    + o.cached_bytes.div_ceil(4) as f64 * p.cache_read_per_mtok)
                    / 1e6
            ),
            None => "no price in the catalog".to_owned(),
        };
        println!(
            "| {model} | {api} | {} of {} | {} of {} | {:.1} % | {:.1} % | {} | {} |",
            direct.refused,
            direct.requests,
            proxied.refused,
            proxied.requests,
            100.0 * direct.hit_ratio(),
            100.0 * proxied.hit_ratio(),
            cost(&direct),
            cost(&proxied),
        );
    }
    println!("\nHit: bytes read from the cache over the accepted requests' bytes, as the stand-in");
    println!("measured them. A client that sets no cache breakpoints of its own caches nothing on");
    println!(
        "Claude models; on models that bind thinking, a changed tool list after signed thinking"
    );
    println!("is refused (the direct cost is then that of the accepted requests only). Per");
    println!("conversation: GET /mektpoy/sessions/{{id}} on a running proxy.");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
