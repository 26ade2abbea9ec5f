//! `larder-faults UPSTREAM_HOST:PORT`: the fault proxy of `larder_testkit::faults` for the other languages' test
//! suites. It prints `127.0.0.1:PORT` on the first line of standard output once it listens, then reads one command
//! per line from standard input and answers each with one line (`ok`, `ok {json}` for `stats`, or `error <why>`);
//! it exits when its standard input closes, so a test that holds the pipe open owns the proxy and cannot leave it
//! behind.

use std::io::{BufRead, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::process::ExitCode;

use larder_testkit::faults::{Fault, FaultProxy};

const USAGE: &str = "usage: larder-faults UPSTREAM_HOST:PORT

A TCP proxy on a free loopback port in front of a real server (memcached, Redis, PostgreSQL: it only moves bytes).
Prints 127.0.0.1:PORT once it listens, then reads one command per line from standard input and answers each with
one line: `ok`, `ok {json}` for stats, or `error <why>`. Exits when standard input closes. Each command changes
what every connection, open or new, gets from then on; replies are what flows from the server to the client.
  pass              forward both ways (and listen again after refuse)
  delay MS          hold each chunk of a reply MS milliseconds
  freeze            forward nothing either way, keep connections open and accept new ones (a SIGSTOPped server);
                    what was held goes through after the next command
  reset             reset every connection (SO_LINGER 0: the client reads ECONNRESET); new ones are reset at once
  blackhole         accept new connections and never answer them (even after the fault changes); open ones freeze
  half-close        forward what was read, then shut down the write side toward the client (it reads end of file)
  trickle BYTES MS  forward replies BYTES at a time, one piece every MS milliseconds
  cut AFTER_BYTES   forward at most AFTER_BYTES more reply bytes per connection, then close it
  refuse            stop listening: connections are refused, open ones closed (a killed server); pass listens again
                    on the same port
  stats             ok {\"fault\":…,\"connections\":accepted,\"open\":…,\"bytes_up\":…,\"bytes_down\":…}";

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("larder-faults: {message}\n\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn run(args: Vec<String>) -> Result<(), String> {
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return Ok(());
    }
    let [upstream] = args.as_slice() else {
        return Err("give the server's HOST:PORT".into());
    };
    let upstream: SocketAddr = upstream
        .to_socket_addrs()
        .map_err(|e| format!("{upstream:?}: {e}"))?
        .next()
        .ok_or_else(|| format!("{upstream:?} has no address"))?;
    let proxy = FaultProxy::start(upstream).map_err(|e| e.to_string())?;
    let mut out = std::io::stdout();
    writeln!(out, "{}", proxy.address()).map_err(|e| e.to_string())?;
    out.flush().map_err(|e| e.to_string())?;
    for line in std::io::stdin().lock().split(b'\n') {
        let Ok(line) = line else { break };
        let answer = match std::str::from_utf8(&line).map_err(|_| "not UTF-8".to_string()) {
            Ok(line) => command(&proxy, line.trim()),
            Err(why) => Err(why),
        };
        let answer = match answer {
            Ok(None) => "ok".to_string(),
            Ok(Some(json)) => format!("ok {json}"),
            Err(why) => format!("error {why}"),
        };
        if writeln!(out, "{answer}").and_then(|()| out.flush()).is_err() {
            break;
        }
    }
    Ok(())
}

/// Runs one command line; `Some(json)` for `stats`.
fn command(proxy: &FaultProxy, line: &str) -> Result<Option<String>, String> {
    if line == "stats" {
        return Ok(Some(proxy.stats().to_json()));
    }
    let fault: Fault = line.parse()?;
    proxy.set(fault).map_err(|e| e.to_string())?;
    Ok(None)
}
