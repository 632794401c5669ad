//! `mektpoy-proxy [--listen ADDR] [--upstream PROVIDER=URL]... [--store sqlite:PATH]`, and
//! `mektpoy-proxy demo`.

use std::process::ExitCode;

use mektpoy_proxy::{Proxy, Settings, Store};

const USAGE: &str =
    "usage: mektpoy-proxy [--listen ADDR] [--upstream PROVIDER=URL]... [--store sqlite:PATH]
  --listen ADDR            where to listen (default 127.0.0.1:8787)
  --upstream PROVIDER=URL  a provider's base URL (repeatable): anthropic and deepseek serve
                           POST /v1/messages (defaults https://api.anthropic.com,
                           https://api.deepseek.com/anthropic); openai-compatible serves
                           POST /v1/chat/completions (default https://api.openai.com/v1;
                           DeepSeek's is https://api.deepseek.com)
  --store sqlite:PATH      where conversations are kept (default sqlite:./mektpoy-proxy.db)";

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "mektpoy_proxy=info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    if std::env::args().nth(1).as_deref() == Some("demo") {
        return match mektpoy_proxy::demo::run().await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("mektpoy-proxy demo: {e}");
                ExitCode::from(1)
            }
        };
    }
    let mut settings = Settings::default();
    let mut listen = "127.0.0.1:8787".to_owned();
    let mut store = "./mektpoy-proxy.db".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next();
        match (flag.as_str(), value) {
            ("--listen", Some(v)) => listen = v,
            ("--upstream", Some(v)) => match v.split_once('=') {
                Some((provider, url)) => {
                    settings
                        .upstreams
                        .insert(provider.to_owned(), url.to_owned());
                }
                None => return usage(&format!("--upstream {v}: PROVIDER=URL expected")),
            },
            ("--store", Some(v)) => match v.strip_prefix("sqlite:") {
                Some(path) => store = path.to_owned(),
                None => return usage(&format!("--store {v}: sqlite:PATH expected")),
            },
            _ => return usage(&format!("unexpected argument `{flag}`")),
        }
    }
    let store = match Store::open(&store) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("mektpoy-proxy: cannot open the store {store}: {e}");
            return ExitCode::from(1);
        }
    };
    let listener = match tokio::net::TcpListener::bind(&listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("mektpoy-proxy: cannot listen on {listen}: {e}");
            return ExitCode::from(1);
        }
    };
    if let Ok(addr) = listener.local_addr() {
        // Scripts read the address from this first line (a port of 0 picks one).
        println!("mektpoy-proxy listening on http://{addr}");
    }
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    match mektpoy_proxy::serve(listener, Proxy::new(settings, store), shutdown).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mektpoy-proxy: {e}");
            ExitCode::from(1)
        }
    }
}

fn usage(problem: &str) -> ExitCode {
    eprintln!("mektpoy-proxy: {problem}\n{USAGE}");
    ExitCode::from(2)
}
