//! `mektpoy-proxy [FLAGS]` serves; `mektpoy-proxy demo`, `report` and `purge` are the rest.

use std::process::ExitCode;
use std::time::Duration;

use mektpoy::Session;
use mektpoy::agent::replay::Replay;
use mektpoy_proxy::{Proxy, Settings, Store};

const USAGE: &str =
    "usage: mektpoy-proxy [--listen ADDR] [--upstream PROVIDER=URL]... [--store STORE]
                     [--idle SECS] [--max-sessions N] [--retention DAYS]
                     [--shutdown-grace SECS] [--log-format json|text] [--log-bodies]
                     [--config PATH]
       mektpoy-proxy demo       the stand-in as upstream, a scripted harness, direct against proxied
       mektpoy-proxy report [--store STORE] [--config PATH]
                                each stored conversation: its route and what the crate's meter
                                reads of its log there (replayed), with each miss
       mektpoy-proxy purge [--store STORE] [--config PATH] (--conversation KEY | --older-than DAYS | --all)
                                deletes stored conversations (run it while no proxy holds them)

  --listen ADDR            where to listen (default 127.0.0.1:8787)
  --upstream PROVIDER=URL  a provider's base URL (repeatable): anthropic and deepseek serve
                           POST /v1/messages (defaults https://api.anthropic.com,
                           https://api.deepseek.com/anthropic); openai-compatible serves
                           POST /v1/chat/completions (default https://api.openai.com/v1;
                           DeepSeek's is https://api.deepseek.com); openai serves
                           POST /v1/responses (default https://api.openai.com/v1)
  --store STORE            where conversations are kept: sqlite:PATH (default
                           sqlite:./mektpoy-proxy.db) or postgres://USER@HOST:PORT/DB (several
                           proxies on one database; the table is created on start)
  --idle SECS              a conversation idle this long leaves memory (default 600)
  --max-sessions N         at most N conversations in memory (default 10000)
  --retention DAYS         delete conversations not written for DAYS (default: keep)
  --shutdown-grace SECS    on SIGTERM or Ctrl-C, how long requests in flight (streams
                           included) may take to finish before the proxy exits (default 30)
  --log-format FORMAT      the log on stderr: text (default) or json (one object a line); one
                           line per request (conversation key, route, outcome, statuses, the
                           proxy's and the store's time), never an API key; RUST_LOG filters
  --log-bodies             the request's line also carries the client's body and the answer
                           (off by default: bodies hold the users' code and conversations)
  --config PATH            settings from a file: one `KEY = VALUE` a line, KEY a flag above
                           without its dashes (`upstream` repeatable; `log-bodies = true`),
                           `#` comments; the flags given win over the file";

#[tokio::main]
async fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let command = match args.first().map(String::as_str) {
        Some(c @ ("demo" | "report" | "purge")) => {
            let c = c.to_owned();
            args.remove(0);
            c
        }
        _ => "serve".to_owned(),
    };
    let options = match Options::parse(args) {
        Ok(o) => o,
        Err(problem) => return usage(&problem),
    };
    init_log(options.json_log);
    let result = match command.as_str() {
        "demo" => mektpoy_proxy::demo::run().await,
        "report" => report(&options),
        "purge" => purge(&options),
        _ => serve(options).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mektpoy-proxy: {e}");
            ExitCode::from(1)
        }
    }
}

type Outcome = Result<(), Box<dyn std::error::Error>>;

#[derive(Debug)]
struct Options {
    settings: Settings,
    /// `--log-format json`.
    json_log: bool,
    listen: String,
    store: String,
    conversation: Option<String>,
    older_than: Option<u64>,
    all: bool,
}

impl Options {
    /// The flags, over the `--config` file's settings when one is named (wherever it is
    /// named: a flag always wins).
    fn parse(args: Vec<String>) -> Result<Self, String> {
        let mut o = Options {
            settings: Settings::default(),
            json_log: false,
            listen: "127.0.0.1:8787".to_owned(),
            store: "sqlite:./mektpoy-proxy.db".to_owned(),
            conversation: None,
            older_than: None,
            all: false,
        };
        let mut flags = Vec::new();
        let mut config = None;
        let mut args = args.into_iter();
        while let Some(flag) = args.next() {
            if flag == "--all" {
                o.all = true;
                continue;
            }
            if flag == "--log-bodies" {
                flags.push((flag, "true".to_owned()));
                continue;
            }
            let Some(value) = args.next() else {
                return Err(format!("{flag} needs a value"));
            };
            if flag == "--config" {
                config = Some(value);
            } else {
                flags.push((flag, value));
            }
        }
        if let Some(path) = config {
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("--config {path}: cannot read it: {e}"))?;
            for (n, line) in text.lines().enumerate() {
                let Some((key, value)) =
                    config_line(line).map_err(|problem| format!("{path}:{}: {problem}", n + 1))?
                else {
                    continue;
                };
                o.apply(&format!("--{key}"), value.to_owned())
                    .map_err(|problem| format!("{path}:{}: {problem}", n + 1))?;
            }
        }
        for (flag, value) in flags {
            o.apply(&flag, value)?;
        }
        Ok(o)
    }

    /// One flag and its value.
    fn apply(&mut self, flag: &str, value: String) -> Result<(), String> {
        let o = self;
        let number = |v: &str| -> Result<u64, String> {
            v.parse()
                .map_err(|_| format!("{flag} {v}: a number expected"))
        };
        match flag {
            "--listen" => o.listen = value,
            "--upstream" => match value.split_once('=') {
                Some((provider, url)) => {
                    o.settings
                        .upstreams
                        .insert(provider.to_owned(), url.to_owned());
                }
                None => return Err(format!("--upstream {value}: PROVIDER=URL expected")),
            },
            "--store" => {
                let known = ["sqlite:", "postgres://", "postgresql://"];
                if !known.iter().any(|p| value.starts_with(p)) {
                    return Err(format!(
                        "--store {}: sqlite:PATH or postgres://USER@HOST:PORT/DB expected",
                        mektpoy_proxy::store::redacted(&value)
                    ));
                }
                o.store = value;
            }
            "--idle" => o.settings.idle = Duration::from_secs(number(&value)?),
            "--max-sessions" => {
                o.settings.max_sessions = usize::try_from(number(&value)?)
                    .map_err(|_| format!("{flag} {value}: too large"))?;
            }
            "--retention" => {
                let days = number(&value)?;
                let secs = days
                    .checked_mul(86_400)
                    .ok_or_else(|| format!("{flag} {value}: too large"))?;
                o.settings.retention = Some(Duration::from_secs(secs));
            }
            "--shutdown-grace" => {
                o.settings.shutdown_grace = Duration::from_secs(number(&value)?);
            }
            "--log-format" => {
                o.json_log = match value.as_str() {
                    "json" => true,
                    "text" => false,
                    _ => return Err(format!("{flag} {value}: json or text expected")),
                };
            }
            "--log-bodies" => {
                o.settings.log_bodies = match value.as_str() {
                    "true" => true,
                    "false" => false,
                    _ => return Err(format!("{flag} {value}: true or false expected")),
                };
            }
            "--conversation" => o.conversation = Some(value),
            "--older-than" => o.older_than = Some(number(&value)?),
            _ => return Err(format!("unexpected argument `{flag}`")),
        }
        Ok(())
    }

    fn open_store(&self) -> Result<Store, Box<dyn std::error::Error>> {
        // A Postgres store connects from a thread of its own: no runtime to block here.
        Store::connect(&self.store).map_err(|e| {
            format!(
                "cannot open the store {}: {e}",
                mektpoy_proxy::store::redacted(&self.store)
            )
            .into()
        })
    }
}

async fn serve(o: Options) -> Outcome {
    let store = o.open_store()?;
    // Listened for before the address is printed: a script may signal as soon as it reads it.
    let listener = tokio::net::TcpListener::bind(&o.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", o.listen))?;
    // Scripts read the address from this first line (a port of 0 picks one).
    println!(
        "mektpoy-proxy listening on http://{}",
        listener.local_addr()?
    );
    let shutdown = shutdown_signal()?;
    mektpoy_proxy::serve(listener, Proxy::new(o.settings, store), shutdown).await?;
    Ok(())
}

/// A line of a `--config` file: `KEY = VALUE` (a flag's name without its dashes, and its
/// value, optionally in double quotes), a blank line or a `#` comment (`None`).
fn config_line(line: &str) -> Result<Option<(&str, &str)>, String> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let Some((key, value)) = line.split_once('=') else {
        return Err(format!("`{line}`: KEY = VALUE expected"));
    };
    let (key, value) = (key.trim(), value.trim());
    let value = value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(value);
    match key {
        "listen" | "upstream" | "store" | "idle" | "max-sessions" | "retention"
        | "shutdown-grace" | "log-format" | "log-bodies" => Ok(Some((key, value))),
        _ => Err(format!(
            "unknown key `{key}` (listen, upstream, store, idle, max-sessions, retention, \
             shutdown-grace, log-format, log-bodies)"
        )),
    }
}

/// The log on stderr (stdout carries the address line scripts read, and `report`'s output):
/// `RUST_LOG` filters it, `mektpoy_proxy=info` by default.
fn init_log(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "mektpoy_proxy=info".into());
    // Colours only on a terminal: a file or a pipe gets plain text.
    let colours = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let log = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colours)
        .with_writer(std::io::stderr);
    if json {
        // Each event's fields at the top level of its object, as log shippers index them.
        log.json().flatten_event(true).init();
    } else {
        log.init();
    }
}

/// Ctrl-C, or SIGTERM on Unix (what `kill`, systemd and container runtimes send): the proxy
/// stops accepting, finishes the requests in flight (`--shutdown-grace`) and exits 0.
fn shutdown_signal() -> std::io::Result<impl std::future::Future<Output = ()> + Send + 'static> {
    #[cfg(unix)]
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    Ok(async move {
        #[cfg(unix)]
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
    })
}

/// Each stored conversation replayed on the route of its last request: the crate's meter
/// reading of its log (the provider's measured figures live in a running proxy's report).
/// The proxy recorded it there, so the log's signed thinking goes back (decision 108).
fn report(o: &Options) -> Outcome {
    let store = o.open_store()?;
    for summary in store.summaries()? {
        let Some(bytes) = store.load(&summary.conversation)? else {
            continue;
        };
        println!(
            "{}  ({} batches, {} bytes, last written {} s ago)",
            summary.conversation,
            summary.batches,
            summary.bytes,
            mektpoy_proxy::store::now().saturating_sub(summary.written_at)
        );
        let session = match Session::load_bytes(&bytes) {
            Ok(loaded) => loaded.session,
            Err(e) => {
                println!("  unreadable log: {e}");
                continue;
            }
        };
        let Some((_, header)) = session.request_header() else {
            println!("  no request yet");
            continue;
        };
        let config = &header.header.config;
        let route = mektpoy::route_for(&config.provider, &config.model);
        match Replay::new(route.clone()).recorded_on(route).run(&session) {
            Ok(replayed) => {
                let r = replayed.report();
                let pct = |n: u64| {
                    if r.total_tokens == 0 {
                        0.0
                    } else {
                        100.0 * n as f64 / r.total_tokens as f64
                    }
                };
                println!(
                    "  {}/{}: {} requests, {} input tokens, {:.1} % cached (best possible {:.1} %){}",
                    config.provider,
                    config.model,
                    r.requests,
                    r.total_tokens,
                    pct(r.cached_tokens),
                    pct(r.best_tokens),
                    r.cost.map_or(String::new(), |c| format!(", ${c:.4}")),
                );
                for line in replayed.miss_lines() {
                    println!("    {line}");
                }
            }
            Err(e) => println!("  replay: {e}"),
        }
    }
    Ok(())
}

fn purge(o: &Options) -> Outcome {
    let store = o.open_store()?;
    let deleted = match (&o.conversation, o.older_than, o.all) {
        (Some(c), None, false) => {
            store.delete(c)?;
            vec![c.clone()]
        }
        (None, Some(days), false) => store.delete_written_before(
            mektpoy_proxy::store::now().saturating_sub(days * 86_400),
            &|_| false,
        )?,
        (None, None, true) => {
            let all = store.conversations()?;
            for c in &all {
                store.delete(c)?;
            }
            all
        }
        _ => return Err("purge: one of --conversation KEY, --older-than DAYS, --all".into()),
    };
    println!("{} conversations deleted", deleted.len());
    Ok(())
}

fn usage(problem: &str) -> ExitCode {
    eprintln!("mektpoy-proxy: {problem}\n{USAGE}");
    ExitCode::from(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_lines() {
        assert_eq!(config_line("  # a comment"), Ok(None));
        assert_eq!(config_line("   "), Ok(None));
        assert_eq!(
            config_line("upstream = anthropic=http://127.0.0.1:1"),
            Ok(Some(("upstream", "anthropic=http://127.0.0.1:1")))
        );
        assert_eq!(
            config_line(r#"store = "sqlite:/tmp/a b.db""#),
            Ok(Some(("store", "sqlite:/tmp/a b.db")))
        );
        assert_eq!(config_line("idle=5"), Ok(Some(("idle", "5"))));
        assert!(config_line("listen").is_err());
        assert!(config_line("config = other.conf").is_err());
        assert!(config_line("all = true").is_err());
    }

    #[test]
    fn the_flags_win_over_the_file_and_numbers_do_not_overflow() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.conf");
        std::fs::write(&path, "idle = 5\nmax-sessions = 7\nretention = 2\n").unwrap();
        let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let path = path.display().to_string();
        let o = Options::parse(args(&["--idle", "9", "--config", &path])).unwrap();
        assert_eq!(o.settings.idle, Duration::from_secs(9));
        assert_eq!(o.settings.max_sessions, 7);
        assert_eq!(o.settings.retention, Some(Duration::from_secs(2 * 86_400)));
        let huge = u64::MAX.to_string();
        assert!(Options::parse(args(&["--retention", &huge])).is_err());
        assert!(Options::parse(args(&["--config"])).is_err());
    }

    #[test]
    fn the_log_flags_and_their_config_keys() {
        let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let o = Options::parse(Vec::new()).unwrap();
        assert!(
            !o.json_log && !o.settings.log_bodies,
            "text, no bodies by default"
        );
        let o = Options::parse(args(&[
            "--log-bodies",
            "--log-format",
            "json",
            "--idle",
            "3",
        ]))
        .unwrap();
        assert!(o.json_log && o.settings.log_bodies);
        assert_eq!(
            o.settings.idle,
            Duration::from_secs(3),
            "--log-bodies takes no value"
        );
        assert!(Options::parse(args(&["--log-format", "yaml"])).is_err());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.conf");
        std::fs::write(&path, "log-format = json\nlog-bodies = true\n").unwrap();
        let path = path.display().to_string();
        let o = Options::parse(args(&["--config", &path])).unwrap();
        assert!(o.json_log && o.settings.log_bodies);
        let o = Options::parse(args(&["--config", &path, "--log-format", "text"])).unwrap();
        assert!(!o.json_log, "the flag wins");
        std::fs::write(dir.path().join("p.conf"), "log-bodies = yes\n").unwrap();
        assert!(Options::parse(args(&["--config", &path])).is_err());
    }
}
