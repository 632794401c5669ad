//! Test support: a throwaway PostgreSQL cluster (`initdb` in a temporary folder, a server on a
//! free loopback port and a private socket folder), stopped when dropped, panics included.
//!
//! The binaries are looked for on `PATH`, then in `/usr/lib/postgresql/*/bin/` (Debian's
//! layout, newest version first). Without them a test prints what it needs and passes, so a
//! plain `cargo test` works anywhere; with `MEKTPOY_REQUIRE_POSTGRES=1` (as `.ci/run` sets it)
//! it fails instead. As root (CI), the cluster runs as the `postgres` user the Debian package
//! creates: PostgreSQL refuses to run as root.

#![allow(dead_code)]

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// What a test says when it finds no PostgreSQL.
pub const NEEDED: &str = "these tests need a PostgreSQL server's binaries (initdb, pg_ctl): \
    on Debian or Ubuntu `apt-get install postgresql` (they land in /usr/lib/postgresql/*/bin/); \
    set MEKTPOY_REQUIRE_POSTGRES=1 to make their absence a failure (as .ci/run does)";

/// A running throwaway cluster.
pub struct Cluster {
    bin: PathBuf,
    base: PathBuf,
    data: PathBuf,
    port: u16,
    /// The user the server runs as when this process is root.
    run_as: Option<String>,
    running: bool,
}

/// A throwaway cluster, started; `None` (with the reason printed) when PostgreSQL is missing
/// and not required.
///
/// # Panics
/// PostgreSQL missing while `MEKTPOY_REQUIRE_POSTGRES=1`, or a cluster that does not start.
pub fn cluster() -> Option<Cluster> {
    let Some(bin) = binaries() else {
        if std::env::var("MEKTPOY_REQUIRE_POSTGRES").as_deref() == Ok("1") {
            panic!("no initdb/pg_ctl on PATH or in /usr/lib/postgresql/*/bin/: {NEEDED}");
        }
        eprintln!("skipped: no initdb/pg_ctl on PATH or in /usr/lib/postgresql/*/bin/: {NEEDED}");
        return None;
    };
    Some(Cluster::create(bin))
}

/// The folder holding `initdb` and `pg_ctl`.
fn binaries() -> Option<PathBuf> {
    let has_both = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            if has_both(&dir) {
                // Debian links them from its versioned folder, where `postgres` lives too.
                let initdb = std::fs::canonicalize(dir.join("initdb")).ok()?;
                return initdb.parent().map(Path::to_path_buf);
            }
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            Some((v, e.path().join("bin")))
        })
        .filter(|(_, bin)| has_both(bin))
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn id_of(user: &str, flag: &str) -> u32 {
    let out = Command::new("id")
        .args([flag, user])
        .output()
        .expect("id runs");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| {
            panic!("running as root, the cluster needs the user `{user}` (Debian's postgresql package creates it): {NEEDED}")
        })
}

impl Cluster {
    fn create(bin: PathBuf) -> Self {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let base = std::env::temp_dir().join(format!("mektpoy-pg-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(base.join("socket")).expect("a temporary folder");
        let run_as = is_root().then(|| "postgres".to_owned());
        if let Some(user) = &run_as {
            let (uid, gid) = (id_of(user, "-u"), id_of(user, "-g"));
            for dir in [base.clone(), base.join("socket")] {
                std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).expect("chown");
            }
        }
        let data = base.join("data");
        let mut cluster = Cluster {
            bin,
            port: free_port(),
            data,
            base,
            run_as,
            running: false,
        };
        let out = cluster.run(
            "initdb",
            &[
                "-D".as_ref(),
                cluster.data.as_os_str(),
                "-U".as_ref(),
                "postgres".as_ref(),
                "--auth=trust".as_ref(),
                "--no-sync".as_ref(),
            ],
        );
        assert!(out.status.success(), "initdb: {}", text(&out));
        cluster.start();
        cluster
    }

    fn run(&self, program: &str, args: &[&std::ffi::OsStr]) -> Output {
        let program = self.bin.join(program);
        let mut command = match &self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(program);
                c
            }
            None => Command::new(program),
        };
        command
            .args(args)
            .current_dir(&self.base)
            .output()
            .expect("a PostgreSQL binary runs")
    }

    /// Starts the server (again), waiting until it accepts connections.
    pub fn start(&mut self) {
        let options = format!(
            "-k {} -p {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.base.join("socket").display(),
            self.port
        );
        let log = self.base.join("server.log");
        let out = self.run(
            "pg_ctl",
            &[
                "-D".as_ref(),
                self.data.as_os_str(),
                "-o".as_ref(),
                options.as_ref(),
                "-l".as_ref(),
                log.as_os_str(),
                "-w".as_ref(),
                "start".as_ref(),
            ],
        );
        assert!(
            out.status.success(),
            "pg_ctl start: {}\n{}",
            text(&out),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        self.running = true;
    }

    /// Stops the server (`pg_ctl stop -m fast`: sessions are cut off).
    pub fn stop(&mut self) {
        let out = self.run(
            "pg_ctl",
            &[
                "-D".as_ref(),
                self.data.as_os_str(),
                "-m".as_ref(),
                "fast".as_ref(),
                "-w".as_ref(),
                "stop".as_ref(),
            ],
        );
        assert!(out.status.success(), "pg_ctl stop: {}", text(&out));
        self.running = false;
    }

    /// The store URL: `postgres://postgres@127.0.0.1:PORT/postgres`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.running {
            let _ = self.run(
                "pg_ctl",
                &[
                    "-D".as_ref(),
                    self.data.as_os_str(),
                    "-m".as_ref(),
                    "fast".as_ref(),
                    "-w".as_ref(),
                    "stop".as_ref(),
                ],
            );
        }
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The proxy as a program, on `store`, upstream the stand-in at `upstream`.
pub struct ProxyProcess {
    /// The process.
    pub child: std::process::Child,
    /// Its base URL, from the address line it prints first.
    pub url: String,
}

impl ProxyProcess {
    /// `store` is a `--store` value: `sqlite:PATH` or `postgres://...`.
    pub fn start(store: &str, upstream: &str) -> Self {
        Self::start_with(store, upstream, &[])
    }

    /// The same with more flags.
    pub fn start_with(store: &str, upstream: &str, extra: &[&str]) -> Self {
        Self::spawn(store, upstream, extra, std::process::Stdio::null())
    }

    /// The same, its log (stderr, `RUST_LOG` unset) written to `log`.
    pub fn start_logging(store: &str, upstream: &str, extra: &[&str], log: &Path) -> Self {
        let file = std::fs::File::create(log).expect("a log file");
        Self::spawn(store, upstream, extra, file.into())
    }

    fn spawn(store: &str, upstream: &str, extra: &[&str], log: std::process::Stdio) -> Self {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mektpoy-proxy"))
            .args(["--listen", "127.0.0.1:0", "--upstream"])
            .arg(format!("anthropic={upstream}"))
            .args(["--store", store])
            .args(extra)
            .env_remove("RUST_LOG")
            .stdout(std::process::Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("the proxy binary starts");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .rsplit(' ')
            .next()
            .expect("the address line")
            .to_owned();
        ProxyProcess { child, url }
    }

    /// SIGTERM (`kill -TERM`), without waiting.
    pub fn terminate(&self) {
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success());
    }

    /// SIGKILL: no shutdown, no flush.
    pub fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for ProxyProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Two proxies on one store behind a load balancer that alternates between them: a
/// conversation on a model that binds thinking and one on an addition-only route, each taken
/// over from what the store holds at every request. Nothing is refused, the cache is kept, and
/// each stored log is one writer's: the client's history, each turn once.
pub async fn alternate_over(
    a: &mektpoy_proxy::demo::Rig,
    b: &mektpoy_proxy::demo::Rig,
    store: &mektpoy_proxy::Store,
) {
    for model in ["claude-fable-5-1", "deepseek-flash"] {
        let met = mektpoy_proxy::demo::conversation_over(
            &[&a.url, &b.url],
            &format!("shared-{model}"),
            model,
            16,
            mektpoy_proxy::demo::Speaks::Messages { stream: false },
        )
        .await
        .unwrap();
        assert_eq!(met.refused, 0, "{model}: {:?}", met.first_refusal);
        assert!(
            met.cached_bytes > 0,
            "{model}: the cache kept across proxies"
        );
    }
    let keys = store.conversations().unwrap();
    assert_eq!(keys.len(), 2, "{keys:?}");
    for key in keys {
        let bytes = store.load(&key).unwrap().unwrap();
        let loaded = mektpoy::Session::load_bytes(&bytes).expect("one writer's log");
        assert!(loaded.torn_tail.is_none());
        // The surface is the client's history: after the compaction at step 13, the summary and
        // steps 13 to 15, each once.
        let users: Vec<String> = loaded
            .session
            .messages()
            .iter()
            .filter(|m| m.role() == mektpoy::vocab::Role::User)
            .map(|m| m.text())
            .collect();
        assert_eq!(users.len(), 4, "{key}: {users:?}");
        assert!(users[0].starts_with("Summary"), "{key}: {users:?}");
        for (i, step) in (13..16).enumerate() {
            assert!(
                users[i + 1].starts_with(&format!("step {step}:")),
                "{key}: {users:?}"
            );
        }
    }
}
