//! `larder-hostile PROTOCOL BEHAVIOUR [--size BYTES] [--interval-ms N] [--depth N] [--count N]`: the hostile server of
//! `larder_testkit::hostile` for the other languages' test suites. It prints `127.0.0.1:PORT` on the first line of
//! standard output once it listens, and exits when its standard input closes, so a test that holds the pipe open
//! owns the server and cannot leave it behind.

use std::io::{Read, Write};
use std::process::ExitCode;
use std::time::Duration;

use larder_testkit::hostile::{Behaviour, HostileServer, Protocol, Settings};

const USAGE: &str = "usage: larder-hostile memcached|redis drip|huge|nested|endless-line|garbage|silent|wide \
[--size BYTES] [--interval-ms N] [--depth N] [--count N]

Answers handshakes like the real server (PING, SELECT, AUTH, CLIENT, HELLO refused; version, mn) and every data
command with the behaviour:
  drip          a value announced as 1000 bytes, then one byte every --interval-ms (50)
  huge          a value of --size bytes (default 1 GiB), as fast as the client reads
  nested        (redis) arrays nested --depth deep (100000)
  endless-line  a reply line of --size bytes with no line break
  garbage       64 KiB of random bytes
  silent        nothing
  wide          --count (1000) values of --size bytes each in one reply (redis: one array), each within its
                own bound, the whole past any (spec/STORES.md §2, whole reply)
Prints 127.0.0.1:PORT, then serves until standard input closes.";

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("larder-hostile: {message}\n\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn run(args: Vec<String>) -> Result<(), String> {
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return Ok(());
    }
    let mut positional = Vec::new();
    let mut settings = Settings::default();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let mut number = |flag: &str| -> Result<u64, String> {
            let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
            value.parse::<u64>().map_err(|_| format!("{flag}: {value:?} is not a number"))
        };
        match arg.as_str() {
            "--size" => settings.size = number("--size")?,
            "--interval-ms" => settings.interval = Duration::from_millis(number("--interval-ms")?),
            "--depth" => settings.depth = number("--depth")? as usize,
            "--count" => settings.count = number("--count")?,
            _ if arg.starts_with("--") => return Err(format!("unknown option {arg}")),
            _ => positional.push(arg),
        }
    }
    let [protocol, behaviour] = positional.as_slice() else {
        return Err("give a protocol and a behaviour".into());
    };
    let server = HostileServer::start(protocol.parse::<Protocol>()?, behaviour.parse::<Behaviour>()?, settings)
        .map_err(|e| e.to_string())?;
    println!("{}", server.address());
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    let mut sink = [0u8; 256];
    while std::io::stdin().read(&mut sink).map(|n| n > 0).unwrap_or(false) {}
    Ok(())
}
