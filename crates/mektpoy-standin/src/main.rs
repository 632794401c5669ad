//! `mektpoy-standin --listen ADDR`: the loopback provider stand-in as a program, for scripts
//! and clients in other languages (the official SDKs) that need an upstream refusing what the
//! vendors refuse.

use std::net::TcpListener;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut listen = "127.0.0.1:0".to_owned();
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next()) {
            ("--listen", Some(addr)) => listen = addr,
            _ => {
                eprintln!("usage: mektpoy-standin [--listen ADDR]   (default 127.0.0.1:0)");
                return ExitCode::from(2);
            }
        }
    }
    let listener = match TcpListener::bind(&listen) {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("mektpoy-standin: cannot listen on {listen}: {e}");
            return ExitCode::from(1);
        }
    };
    match listener.local_addr() {
        // Scripts read the address from this first line (a port of 0 picks one).
        Ok(addr) => println!("mektpoy-standin listening on http://{addr}"),
        Err(e) => {
            eprintln!("mektpoy-standin: {e}");
            return ExitCode::from(1);
        }
    }
    mektpoy_standin::serve(listener);
    ExitCode::SUCCESS
}
