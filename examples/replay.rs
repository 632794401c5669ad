//! Replays recorded session logs on every built-in route and prints what each route would have
//! cost: input and cached tokens, the hit ratio beside the best possible, the estimated cost,
//! each request that lost the cached prefix with its attribution (what changed, in the caller's
//! terms, and whether the caller or a rule of the crate made the rewrite), and per route the
//! attribution report: the estimated tokens lost, by cause.
//!
//! Run:
//!
//! ```sh
//! cargo run --release --example replay -- [--route NAME]... LOG.jsonl...
//! cargo run --release --example replay -- --check SAVED.meter.json [--route NAME] LOG.jsonl
//! ```
//!
//! `NAME` is `provider/model` of a catalog entry, or `provider/model:by-reference` for its
//! by-reference variant (the demo's claude-opus-5 row); `--route` adds such a route to the
//! catalog's. `--check` replays the log on one route (`--route`, else the name in the log's
//! sibling `.route` file, which the demo writes) and exits 1 unless the replayed meter equals
//! the saved one (`Meter::save`), row for row.
//!
//! A log's sibling `.route` file also says which route recorded it (`Replay::recorded_on`):
//! on a route that binds thinking, only that route sends the log's signed thinking back; any
//! other leaves it out, since it was bound to bytes that route does not send (decision 108).
//! A log without one is taken as recorded on no route the replay knows.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use mektpoy::agent::replay::{Replay, route_by_name, route_name};
use mektpoy::route::{ToolUpdateMode, catalog};
use mektpoy::{Meter, Route, Session};

fn usage() -> ExitCode {
    eprintln!(
        "usage: replay [--route NAME]... LOG.jsonl...\n       replay --check SAVED.meter.json \
         [--route NAME] LOG.jsonl\nNAME: provider/model or provider/model:by-reference"
    );
    ExitCode::from(2)
}

fn mode(route: &Route) -> &'static str {
    match route.tool_update() {
        None => "no mode",
        Some(ToolUpdateMode::AdditionOnly) => "addition-only",
        Some(_) if route.inline_definitions() => "in-history, inline",
        Some(_) => "in-history, by reference",
    }
}

fn label(route: &Route) -> String {
    let name = route_name(route).unwrap_or_else(|| format!("{}/{}", route.provider, route.model));
    format!("{name} ({})", mode(route))
}

/// The route that recorded `log`, named in its sibling `.route` file (the demo writes one);
/// `None` without that file.
fn recorded_on(log: &Path) -> Result<Option<Route>, String> {
    let file = log.with_extension("route");
    let Ok(name) = std::fs::read_to_string(&file) else {
        return Ok(None);
    };
    route_by_name(name.trim()).map(Some).ok_or(format!(
        "{}: unknown route `{}`",
        file.display(),
        name.trim()
    ))
}

/// A replay on `route` of `log`, told the route that recorded it when its `.route` file
/// names one.
fn replay_of(route: &Route, log: &Path) -> Result<Replay, String> {
    let replay = Replay::new(route.clone());
    Ok(match recorded_on(log)? {
        Some(recording) => replay.recorded_on(recording),
        None => replay,
    })
}

fn load(path: &Path) -> Result<Session, String> {
    let loaded = Session::load(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if let Some(torn) = &loaded.torn_tail {
        eprintln!("{}: torn tail dropped: {torn:?}", path.display());
    }
    Ok(loaded.session)
}

struct Args {
    routes: Vec<Route>,
    check: Option<PathBuf>,
    logs: Vec<PathBuf>,
}

fn parse() -> Result<Args, String> {
    let mut args = Args {
        routes: Vec::new(),
        check: None,
        logs: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--route" => {
                let name = it.next().ok_or("--route needs a name")?;
                let route = route_by_name(&name).ok_or(format!("unknown route `{name}`"))?;
                args.routes.push(route);
            }
            "--check" => args.check = Some(it.next().ok_or("--check needs a saved meter")?.into()),
            "-h" | "--help" => return Err(String::new()),
            _ => args.logs.push(arg.into()),
        }
    }
    if args.logs.is_empty() {
        return Err("no log given".into());
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(args) => args,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("{e}");
            }
            return usage();
        }
    };
    let result = match &args.check {
        Some(saved) => check(&args, saved),
        None => table(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// The table: one row per route, then each route's requests that lost the cached prefix.
fn table(args: &Args) -> Result<ExitCode, String> {
    let mut routes: Vec<Route> = catalog().to_vec();
    routes.extend(args.routes.iter().cloned());
    let width = routes.iter().map(|r| label(r).len()).max().unwrap_or(0);
    // Written at once, so that a closed pipe (`| head`) ends the output, not the process.
    let mut out = String::new();
    for path in &args.logs {
        let log = load(path)?;
        let _ = writeln!(out, "{} ({} events)", path.display(), log.len());
        let _ = writeln!(
            out,
            "{:<width$} {:>8} {:>8} {:>7} {:>9} {:>8} {:>10}",
            "route (mode)", "input", "cached", "hit", "best hit", "missed", "est. cost"
        );
        let mut rewrites = Vec::new();
        for route in &routes {
            match replay_of(route, path)?.run(&log) {
                Ok(replayed) => {
                    let rep = replayed.report();
                    let cost = rep.cost.map_or("-".to_owned(), |c| format!("${c:.4}"));
                    let _ = writeln!(
                        out,
                        "{:<width$} {:>8} {:>8} {:>6.1}% {:>8.1}% {:>8} {:>10}",
                        label(route),
                        rep.total_tokens,
                        rep.cached_tokens,
                        100.0 * rep.hit_ratio(),
                        100.0 * rep.best_ratio(),
                        rep.best_tokens.saturating_sub(rep.cached_tokens),
                        cost
                    );
                    rewrites.push((route, replayed));
                }
                Err(e) => {
                    let _ = writeln!(out, "{:<width$} cannot replay: {e}", label(route));
                }
            }
        }
        let _ = writeln!(
            out,
            "\nRequests that did not find the previous request in the cache, and why:"
        );
        for (route, replayed) in &rewrites {
            let lines = replayed.miss_lines();
            if lines.is_empty() {
                let _ = writeln!(out, "  {}: none", label(route));
                continue;
            }
            let _ = writeln!(out, "  {}:", label(route));
            for line in lines {
                let _ = writeln!(out, "    {line}");
            }
        }
        let _ = writeln!(out, "\nEstimated tokens lost, by cause:");
        for (route, replayed) in &rewrites {
            let report = replayed.attribution_report().to_string();
            let _ = writeln!(out, "  {}: {}", label(route), report.replace('\n', "\n  "));
        }
        out.push('\n');
    }
    let _ = std::io::stdout().lock().write_all(out.as_bytes());
    Ok(ExitCode::SUCCESS)
}

/// The check: the replay on one route equals the saved meter, row for row.
fn check(args: &Args, saved: &Path) -> Result<ExitCode, String> {
    let [log] = args.logs.as_slice() else {
        return Err("--check takes one log".into());
    };
    let route = match args.routes.as_slice() {
        [route] => route.clone(),
        [] => {
            let file = log.with_extension("route");
            let name = std::fs::read_to_string(&file)
                .map_err(|e| format!("no --route and no {}: {e}", file.display()))?;
            route_by_name(name.trim()).ok_or(format!(
                "{}: unknown route `{}`",
                file.display(),
                name.trim()
            ))?
        }
        _ => return Err("--check takes one --route".into()),
    };
    let text = std::fs::read_to_string(saved).map_err(|e| format!("{}: {e}", saved.display()))?;
    let (replay, session) = (replay_of(&route, log)?, load(log)?);
    // A generic entry meters by the logged model's cache facts (decision 105).
    let expected = Meter::restore(&replay.metered_route(&session), text.trim_end())
        .map_err(|e| format!("{}: {e}", saved.display()))?;
    let replayed = replay
        .run(&session)
        .map_err(|e| format!("{}: {e}", log.display()))?;
    let rows = replayed.meter.rows();
    if rows == expected.rows() && replayed.meter.save() == text.trim_end() {
        let rep = replayed.report();
        println!(
            "ok: {} on {}: {} requests, {} of {} input tokens cached, as the saved meter says",
            log.display(),
            label(&route),
            rep.requests,
            rep.cached_tokens,
            rep.total_tokens
        );
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!("MISMATCH: {} on {}", log.display(), label(&route));
    let n = rows.len().max(expected.rows().len());
    for i in 0..n {
        let (got, want) = (rows.get(i), expected.rows().get(i));
        if got != want {
            eprintln!("  row {i}: replayed {got:?}\n         saved    {want:?}");
        }
    }
    Ok(ExitCode::FAILURE)
}
