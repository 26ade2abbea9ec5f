//! A hostile server for tests: it answers on a loopback port like memcached or Redis would, handshakes included,
//! and then answers every data command with one kind of bad reply. Every language's store suite runs against it
//! (the `larder-hostile` binary wraps it), so "a store's reads are bounded in time and size, and a bad reply is the
//! store's own error" (spec/STORES.md §2) is tested the same way everywhere, by one piece of code.
//!
//! Blocking threads, one per connection: the server must be able to write a gigabyte or drip a byte at a time
//! without caring about the client, and stop when the client hangs up (a write fails).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use crate::TestkitError;

/// The protocol whose handshake the server answers properly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Memcached,
    Redis,
}

/// What every data command gets back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// A value announced as 1,000 bytes (well within every bound, so the deadline is what must trip), then one
    /// byte every `interval`, so it would take 50 s at the default interval.
    Drip,
    /// A value of `size` bytes (1 GiB by default), sent as fast as the client reads.
    Huge,
    /// Redis only: arrays nested `depth` deep (100,000 by default) around one integer.
    Nested,
    /// A reply line that never ends: `size` bytes without a line break, as fast as the client reads.
    EndlessLine,
    /// 64 KiB of random bytes, then nothing (the connection stays open).
    Garbage,
    /// Nothing at all (the connection stays open).
    Silent,
    /// A reply whose every part is within its own bound but whose whole is not: `count` values of `size` bytes
    /// each (Redis: one array of `count` bulk strings; memcached: `count` `VA` blocks), to any data command, as
    /// fast as the client reads. A counter's script or a one-key get can return one element, so a client that
    /// bounds whole replies (spec/STORES.md §2) refuses it at its first line.
    Wide,
}

impl std::str::FromStr for Protocol {
    type Err = String;
    fn from_str(s: &str) -> Result<Protocol, String> {
        match s {
            "memcached" => Ok(Protocol::Memcached),
            "redis" => Ok(Protocol::Redis),
            other => Err(format!("unknown protocol {other:?}: memcached or redis")),
        }
    }
}

impl std::str::FromStr for Behaviour {
    type Err = String;
    fn from_str(s: &str) -> Result<Behaviour, String> {
        Ok(match s {
            "drip" => Behaviour::Drip,
            "huge" => Behaviour::Huge,
            "nested" => Behaviour::Nested,
            "endless-line" => Behaviour::EndlessLine,
            "garbage" => Behaviour::Garbage,
            "silent" => Behaviour::Silent,
            "wide" => Behaviour::Wide,
            other => {
                return Err(format!(
                    "unknown behaviour {other:?}: drip, huge, nested, endless-line, garbage, silent or wide"
                ))
            }
        })
    }
}

/// How big and how slow.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Bytes sent (huge) or sent without a line break (endless-line).
    pub size: u64,
    /// Between two bytes of a drip.
    pub interval: Duration,
    /// Nesting of `nested`.
    pub depth: usize,
    /// Values in a `wide` reply.
    pub count: u64,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings { size: 1 << 30, interval: Duration::from_millis(50), depth: 100_000, count: 1_000 }
    }
}

/// A running hostile server; stops accepting when dropped (connections under way end when their client hangs up).
pub struct HostileServer {
    address: SocketAddr,
    stopped: Arc<AtomicBool>,
}

impl HostileServer {
    /// Listens on a free loopback port.
    pub fn start(protocol: Protocol, behaviour: Behaviour, settings: Settings) -> Result<HostileServer, TestkitError> {
        if protocol == Protocol::Memcached && behaviour == Behaviour::Nested {
            return Err(TestkitError("memcached replies do not nest: `nested` is for redis".into()));
        }
        let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| TestkitError(format!("bind: {e}")))?;
        let address = listener.local_addr().map_err(|e| TestkitError(format!("local address: {e}")))?;
        let stopped = Arc::new(AtomicBool::new(false));
        let flag = stopped.clone();
        thread::spawn(move || {
            for stream in listener.incoming() {
                if flag.load(Ordering::Relaxed) {
                    break;
                }
                if let Ok(stream) = stream {
                    thread::spawn(move || {
                        let _ = serve(stream, protocol, behaviour, settings);
                    });
                }
            }
        });
        Ok(HostileServer { address, stopped })
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }
}

impl Drop for HostileServer {
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::Relaxed);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.address, Duration::from_millis(100));
    }
}

/// One client connection: answer handshakes properly and data commands with the behaviour.
fn serve(stream: TcpStream, protocol: Protocol, behaviour: Behaviour, settings: Settings) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    loop {
        let Some(command) = (match protocol {
            Protocol::Redis => read_redis_command(&mut reader)?,
            Protocol::Memcached => read_memcached_command(&mut reader)?,
        }) else {
            return Ok(());
        };
        let name = command.first().map(|c| c.to_ascii_lowercase()).unwrap_or_default();
        let handshake = match protocol {
            Protocol::Redis => redis_handshake_reply(&name),
            // A silent server says nothing to `mn` either: a client that ends its requests with `mn` would
            // otherwise read `MN` alone and fail at once, and the deadline under test would never be reached.
            Protocol::Memcached if behaviour == Behaviour::Silent && name == b"mn" => None,
            Protocol::Memcached => memcached_handshake_reply(&name),
        };
        if let Some(reply) = handshake {
            writer.write_all(reply.as_bytes())?;
            continue;
        }
        misbehave(&mut writer, protocol, behaviour, settings, &name, command.len())?;
    }
}

fn redis_handshake_reply(name: &[u8]) -> Option<String> {
    Some(match name {
        b"ping" => "+PONG\r\n".into(),
        b"select" | b"auth" | b"readonly" | b"client" => "+OK\r\n".into(),
        b"hello" => "-ERR unknown command 'HELLO'\r\n".into(),
        b"command" => "*0\r\n".into(),
        b"info" => {
            let text = "# Server\r\nredis_version:7.0.15\r\n";
            format!("${}\r\n{text}\r\n", text.len())
        }
        _ => return None,
    })
}

fn memcached_handshake_reply(name: &[u8]) -> Option<String> {
    Some(match name {
        b"version" => "VERSION 1.6.18\r\n".into(),
        b"mn" => "MN\r\n".into(),
        _ => return None,
    })
}

fn misbehave(
    out: &mut TcpStream,
    protocol: Protocol,
    behaviour: Behaviour,
    settings: Settings,
    name: &[u8],
    arguments: usize,
) -> std::io::Result<()> {
    // A reply of the shape the command expects, so that the bound under test is the one that trips.
    let value_head = match protocol {
        Protocol::Redis if name == b"mget" => format!("*{}\r\n${}\r\n", arguments.saturating_sub(1), settings.size),
        Protocol::Redis => format!("${}\r\n", settings.size),
        Protocol::Memcached => format!("VA {}\r\n", settings.size),
    };
    match behaviour {
        Behaviour::Drip => {
            out.write_all(value_head.replace(&settings.size.to_string(), "1000").as_bytes())?;
            loop {
                out.write_all(b"x")?;
                thread::sleep(settings.interval);
            }
        }
        Behaviour::Huge => {
            out.write_all(value_head.as_bytes())?;
            send_filler(out, settings.size)?;
            out.write_all(b"\r\n")
        }
        Behaviour::Nested => {
            out.write_all(&b"*1\r\n".repeat(settings.depth))?;
            out.write_all(b":1\r\n")
        }
        Behaviour::EndlessLine => {
            out.write_all(match protocol {
                Protocol::Redis => b"+",
                Protocol::Memcached => b"HD ",
            })?;
            send_filler(out, settings.size)
        }
        Behaviour::Garbage => {
            let garbage: Vec<u8> = (0..64 << 10).map(|_| fastrand::u8(..)).collect();
            out.write_all(&garbage)
        }
        Behaviour::Silent => Ok(()),
        Behaviour::Wide => {
            let head = match protocol {
                Protocol::Redis => format!("${}\r\n", settings.size),
                Protocol::Memcached => format!("VA {}\r\n", settings.size),
            };
            if protocol == Protocol::Redis {
                out.write_all(format!("*{}\r\n", settings.count).as_bytes())?;
            }
            for _ in 0..settings.count {
                out.write_all(head.as_bytes())?;
                send_filler(out, settings.size)?;
                out.write_all(b"\r\n")?;
            }
            Ok(())
        }
    }
}

/// `size` bytes of `x`, in large writes.
fn send_filler(out: &mut TcpStream, size: u64) -> std::io::Result<()> {
    let chunk = vec![b'x'; 256 << 10];
    let mut left = size;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        out.write_all(&chunk[..n])?;
        left -= n as u64;
    }
    Ok(())
}

/// One RESP command (an array of bulk strings, or an inline line); `None` at end of stream.
fn read_redis_command(reader: &mut BufReader<TcpStream>) -> std::io::Result<Option<Vec<Vec<u8>>>> {
    let Some(line) = read_line(reader)? else { return Ok(None) };
    let Some(count) = line.strip_prefix(b"*") else {
        return Ok(Some(line.split(|b| *b == b' ').filter(|p| !p.is_empty()).map(<[u8]>::to_vec).collect()));
    };
    let count = parse_number(count)?;
    let mut parts = Vec::with_capacity(count.min(1024));
    for _ in 0..count {
        let Some(head) = read_line(reader)? else { return Ok(None) };
        let length = parse_number(head.strip_prefix(b"$").unwrap_or(&head))?;
        let mut part = vec![0; length + 2];
        reader.read_exact(&mut part)?;
        part.truncate(length);
        parts.push(part);
    }
    Ok(Some(parts))
}

/// One memcached command line (and the data block of a set); `None` at end of stream.
fn read_memcached_command(reader: &mut BufReader<TcpStream>) -> std::io::Result<Option<Vec<Vec<u8>>>> {
    let Some(line) = read_line(reader)? else { return Ok(None) };
    let parts: Vec<Vec<u8>> = line.split(|b| *b == b' ').filter(|p| !p.is_empty()).map(<[u8]>::to_vec).collect();
    let data_length = match parts.first().map(Vec::as_slice) {
        Some(b"ms") => parts.get(2),
        Some(b"set" | b"add" | b"replace" | b"append" | b"prepend" | b"cas") => parts.get(4),
        _ => None,
    };
    if let Some(length) = data_length {
        let mut data = vec![0; parse_number(length)? + 2];
        reader.read_exact(&mut data)?;
    }
    Ok(Some(parts))
}

fn read_line(reader: &mut BufReader<TcpStream>) -> std::io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    if reader.by_ref().take(1 << 20).read_until(b'\n', &mut line)? == 0 {
        return Ok(None);
    }
    while line.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        line.pop();
    }
    Ok(Some(line))
}

fn parse_number(text: &[u8]) -> std::io::Result<usize> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|t| t.parse::<usize>().ok())
        .filter(|n| *n <= 512 << 20)
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, "not a length"))
}
