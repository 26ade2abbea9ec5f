//! A fault injector for tests: a TCP proxy on a loopback port between a client and a real server (memcached,
//! Redis, PostgreSQL: it only moves bytes), whose behaviour a test changes at any moment with [`FaultProxy::set`],
//! for connections already open and new ones alike. It freezes, delays, trickles, resets, black-holes, half-closes,
//! cuts replies mid-value and refuses connections, so every language's store and `fetch` tests run the same fault
//! scenarios against real servers (spec/STORES.md §1, "Failure and recovery"); the `larder-faults` binary wraps it.
//!
//! Blocking threads, two per connection (one per direction), as in `hostile`: every read and write waits at most
//! [`POLL`], so a change of fault reaches a connection within that time whatever its peers do. "Toward the client"
//! is the reply direction: `Delay`, `Trickle`, `CutMidValue` and `HalfClose` act on replies only, requests are
//! forwarded as they come (unless frozen).

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use crate::TestkitError;

/// How long a blocked read or write waits before it looks at the fault again.
const POLL: Duration = Duration::from_millis(20);
/// How long [`FaultProxy::set`] waits for the listener to close or open again.
const LISTEN_WAIT: Duration = Duration::from_secs(5);
/// How long connecting to the upstream server may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// What the proxy does, to every connection, from the moment it is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Forward bytes both ways as they come.
    Pass,
    /// Hold each chunk of a reply this long before forwarding it.
    Delay(Duration),
    /// Forward nothing either way, keep every connection open and accept new ones (connected upstream, silent):
    /// a SIGSTOPped or swapping server. Everything held goes through once the fault changes.
    Freeze,
    /// Reset every connection (SO_LINGER 0, so the client reads ECONNRESET); new connections are accepted and
    /// reset at once.
    Reset,
    /// New connections are accepted and never answered, even after the fault changes (they are never connected
    /// upstream; their requests are read and dropped); connections already open are frozen as by `Freeze`.
    Blackhole,
    /// Forward what was already read from the server, then shut down the write side toward the client (it reads
    /// end of file); its requests still reach the server, the replies are dropped. A half-closed connection stays
    /// so after the fault changes; new connections are half-closed at once.
    HalfClose,
    /// Forward replies `bytes` at a time, one piece every `every`.
    Trickle { bytes: usize, every: Duration },
    /// Forward at most `after_bytes` more bytes of replies on each connection (counted from the moment the fault
    /// is set, or from a new connection's start), then close the connection (the client reads end of file).
    CutMidValue { after_bytes: u64 },
    /// Stop listening: new connections are refused and open ones closed, as when the server is killed. `Pass`
    /// (or any other fault) listens again on the same port.
    Refuse,
}

impl Fault {
    /// Its `larder-faults` command word.
    pub fn name(&self) -> &'static str {
        match self {
            Fault::Pass => "pass",
            Fault::Delay(_) => "delay",
            Fault::Freeze => "freeze",
            Fault::Reset => "reset",
            Fault::Blackhole => "blackhole",
            Fault::HalfClose => "half-close",
            Fault::Trickle { .. } => "trickle",
            Fault::CutMidValue { .. } => "cut",
            Fault::Refuse => "refuse",
        }
    }
}

impl std::str::FromStr for Fault {
    type Err = String;

    /// A `larder-faults` command line that sets a fault: `pass`, `delay MS`, `freeze`, `reset`, `blackhole`,
    /// `half-close`, `trickle BYTES MS`, `cut AFTER_BYTES`, `refuse`.
    fn from_str(line: &str) -> Result<Fault, String> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(&name) = words.first() else {
            return Err("empty command".into());
        };
        let number = |i: usize, what: &str| -> Result<u64, String> {
            let word = words.get(i).ok_or_else(|| format!("{name} needs {what}"))?;
            word.parse::<u64>().map_err(|_| format!("{what}: {word:?} is not a whole number"))
        };
        let (fault, arity) = match name {
            "pass" => (Fault::Pass, 1),
            "delay" => (Fault::Delay(Duration::from_millis(number(1, "MS")?)), 2),
            "freeze" => (Fault::Freeze, 1),
            "reset" => (Fault::Reset, 1),
            "blackhole" => (Fault::Blackhole, 1),
            "half-close" => (Fault::HalfClose, 1),
            "trickle" => {
                let bytes = usize::try_from(number(1, "BYTES")?).map_err(|_| "BYTES is too large".to_string())?;
                (Fault::Trickle { bytes, every: Duration::from_millis(number(2, "MS")?) }, 3)
            }
            "cut" => (Fault::CutMidValue { after_bytes: number(1, "AFTER_BYTES")? }, 2),
            "refuse" => (Fault::Refuse, 1),
            other => return Err(format!("unknown command {other:?} (see --help)")),
        };
        if words.len() != arity {
            return Err(format!("{name} takes {} argument(s)", arity - 1));
        }
        Ok(fault)
    }
}

/// Counters since the proxy started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// The fault in force (its command word).
    pub fault: &'static str,
    /// Connections accepted (reset, black-holed and half-closed ones included).
    pub connections: u64,
    /// Connections open now.
    pub open: u64,
    /// Bytes forwarded from clients to the server.
    pub bytes_up: u64,
    /// Bytes forwarded from the server to clients.
    pub bytes_down: u64,
}

impl Stats {
    /// One line of JSON, as `larder-faults` prints for `stats`.
    pub fn to_json(&self) -> String {
        format!(
            "{{\"fault\":\"{}\",\"connections\":{},\"open\":{},\"bytes_up\":{},\"bytes_down\":{}}}",
            self.fault, self.connections, self.open, self.bytes_up, self.bytes_down
        )
    }
}

struct State {
    fault: Fault,
    /// Bumped by every `set`, so a connection sees a new `CutMidValue` as a new budget.
    generation: u64,
    listening: bool,
    stopped: bool,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    upstream: SocketAddr,
    connections: AtomicU64,
    open: AtomicU64,
    bytes_up: AtomicU64,
    bytes_down: AtomicU64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The fault and its generation now.
    fn current(&self) -> (Fault, u64, bool) {
        let state = self.lock();
        (state.fault, state.generation, state.stopped)
    }
}

/// A running fault proxy; it stops accepting and closes its connections when dropped.
pub struct FaultProxy {
    address: SocketAddr,
    shared: Arc<Shared>,
}

impl FaultProxy {
    /// Listens on a free loopback port, forwarding every connection to `upstream` (fault `Pass`).
    pub fn start(upstream: SocketAddr) -> Result<FaultProxy, TestkitError> {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| TestkitError(format!("bind: {e}")))?;
        let address = listener.local_addr().map_err(|e| TestkitError(format!("local address: {e}")))?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State { fault: Fault::Pass, generation: 0, listening: true, stopped: false }),
            changed: Condvar::new(),
            upstream,
            connections: AtomicU64::new(0),
            open: AtomicU64::new(0),
            bytes_up: AtomicU64::new(0),
            bytes_down: AtomicU64::new(0),
        });
        let for_thread = shared.clone();
        thread::spawn(move || accept_loop(listener, address, for_thread));
        Ok(FaultProxy { address, shared })
    }

    /// `127.0.0.1:port`, where clients connect.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The server the proxy forwards to.
    pub fn upstream(&self) -> SocketAddr {
        self.shared.upstream
    }

    /// The fault in force.
    pub fn fault(&self) -> Fault {
        self.shared.lock().fault
    }

    /// Changes the behaviour of every connection, open or new. Setting `Refuse` returns once the port refuses
    /// connections, and setting anything else after it once the port listens again (an error if it could not be
    /// bound again within 5 s, which happens only if another process took the port).
    pub fn set(&self, fault: Fault) -> Result<(), TestkitError> {
        if let Fault::Trickle { bytes: 0, .. } = fault {
            return Err(TestkitError("trickle needs at least one byte per piece".into()));
        }
        let want_listening = fault != Fault::Refuse;
        {
            let mut state = self.shared.lock();
            state.fault = fault;
            state.generation += 1;
        }
        self.shared.changed.notify_all();
        if !want_listening {
            // Wake the accept loop, blocked in accept, so it sees the fault and closes the listener.
            let _ = TcpStream::connect_timeout(&self.address, Duration::from_millis(200));
        }
        let deadline = Instant::now() + LISTEN_WAIT;
        let mut state = self.shared.lock();
        while state.listening != want_listening {
            let now = Instant::now();
            if now >= deadline {
                return Err(TestkitError(format!(
                    "the proxy did not {} {} within {LISTEN_WAIT:?}",
                    if want_listening { "listen again on" } else { "stop listening on" },
                    self.address
                )));
            }
            state = self.shared.changed.wait_timeout(state, deadline - now).unwrap_or_else(PoisonError::into_inner).0;
        }
        Ok(())
    }

    /// Counters since the start.
    pub fn stats(&self) -> Stats {
        Stats {
            fault: self.fault().name(),
            connections: self.shared.connections.load(Ordering::Relaxed),
            open: self.shared.open.load(Ordering::Relaxed),
            bytes_up: self.shared.bytes_up.load(Ordering::Relaxed),
            bytes_down: self.shared.bytes_down.load(Ordering::Relaxed),
        }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.lock().stopped = true;
        self.shared.changed.notify_all();
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.address, Duration::from_millis(100));
    }
}

/// Accepts connections while listening; closes the listener under `Refuse` and binds the same port again after.
fn accept_loop(listener: TcpListener, address: SocketAddr, shared: Arc<Shared>) {
    let mut listener = Some(listener);
    loop {
        let Some(open) = listener.as_ref() else {
            // Refusing: wait for another fault (or the end), then listen again on the same port.
            let mut state = shared.lock();
            while state.fault == Fault::Refuse && !state.stopped {
                state = shared.changed.wait(state).unwrap_or_else(PoisonError::into_inner);
            }
            if state.stopped {
                return;
            }
            drop(state);
            listener = rebind(address, &shared);
            if listener.is_none() {
                return;
            }
            shared.lock().listening = true;
            shared.changed.notify_all();
            continue;
        };
        let accepted = open.accept();
        let (fault, _, stopped) = shared.current();
        if stopped {
            return;
        }
        if fault == Fault::Refuse {
            drop(accepted);
            listener = None;
            shared.lock().listening = false;
            shared.changed.notify_all();
            continue;
        }
        let Ok((client, _)) = accepted else {
            continue;
        };
        shared.connections.fetch_add(1, Ordering::Relaxed);
        let for_thread = shared.clone();
        thread::spawn(move || start_connection(client, fault, for_thread));
    }
}

/// Binds `address` again, retrying for a while (its old connections' TIME_WAIT does not stop SO_REUSEADDR, which
/// std sets; another process taking the port would).
fn rebind(address: SocketAddr, shared: &Shared) -> Option<TcpListener> {
    let deadline = Instant::now() + LISTEN_WAIT;
    loop {
        if let Ok(listener) = TcpListener::bind(address) {
            return Some(listener);
        }
        if Instant::now() >= deadline || shared.lock().stopped {
            return None;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// How a connection ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// Close toward the client with a RST.
    Reset,
    /// Close both sides normally.
    Close,
}

/// One proxied connection, shared by its two pumps; the sockets close when both are done.
struct Connection {
    client: TcpStream,
    upstream: TcpStream,
    shared: Arc<Shared>,
    /// Set once by whichever pump decides the connection ends.
    ended: Mutex<Option<End>>,
}

impl Connection {
    fn end(&self, how: End) {
        let mut ended = self.ended.lock().unwrap_or_else(PoisonError::into_inner);
        if ended.is_some() {
            return;
        }
        *ended = Some(how);
        if how == End::Reset {
            let _ = socket2::SockRef::from(&self.client).set_linger(Some(Duration::ZERO));
        } else {
            let _ = self.client.shutdown(Shutdown::Both);
        }
        let _ = self.upstream.shutdown(Shutdown::Both);
    }

    fn ended(&self) -> bool {
        self.ended.lock().unwrap_or_else(PoisonError::into_inner).is_some()
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.shared.open.fetch_sub(1, Ordering::Relaxed);
    }
}

fn reset(client: TcpStream) {
    let _ = socket2::SockRef::from(&client).set_linger(Some(Duration::ZERO));
    drop(client);
}

fn start_connection(client: TcpStream, fault: Fault, shared: Arc<Shared>) {
    let _ = client.set_nonblocking(false);
    let _ = client.set_nodelay(true);
    match fault {
        Fault::Reset => return reset(client),
        Fault::Blackhole => return blackhole(client, &shared),
        _ => {}
    }
    let upstream = match TcpStream::connect_timeout(&shared.upstream, CONNECT_TIMEOUT) {
        Ok(upstream) => upstream,
        // The server is down: the client sees its connection reset, as a proxy in front of a dead server would.
        Err(_) => return reset(client),
    };
    let _ = upstream.set_nodelay(true);
    for stream in [&client, &upstream] {
        let _ = stream.set_read_timeout(Some(POLL));
        let _ = stream.set_write_timeout(Some(POLL));
    }
    shared.open.fetch_add(1, Ordering::Relaxed);
    let connection = Arc::new(Connection { client, upstream, shared, ended: Mutex::new(None) });
    let up = connection.clone();
    thread::spawn(move || pump_up(&up));
    pump_down(&connection);
}

/// A black-holed connection: read and drop whatever the client sends until it hangs up, the proxy stops, or the
/// fault becomes `Reset` or `Refuse`.
fn blackhole(mut client: TcpStream, shared: &Shared) {
    let _ = client.set_read_timeout(Some(POLL));
    let mut sink = [0u8; 4096];
    loop {
        match client.read(&mut sink) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if is_timeout(&e) => {}
            Err(_) => return,
        }
        match shared.current() {
            (_, _, true) | (Fault::Refuse, _, _) => return,
            (Fault::Reset, _, _) => return reset(client),
            _ => {}
        }
    }
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted)
}

/// What a pump should do now: wait while frozen, end the connection on `Reset`, `Refuse` or the proxy's end.
/// Returns the fault to apply, or None when the connection is over.
fn wait_for_turn(connection: &Connection) -> Option<(Fault, u64)> {
    let shared = &connection.shared;
    let mut state = shared.lock();
    loop {
        if connection.ended() {
            return None;
        }
        if state.stopped {
            drop(state);
            connection.end(End::Close);
            return None;
        }
        match state.fault {
            Fault::Freeze | Fault::Blackhole => {
                state = shared.changed.wait_timeout(state, POLL).unwrap_or_else(PoisonError::into_inner).0;
            }
            Fault::Reset => {
                drop(state);
                connection.end(End::Reset);
                return None;
            }
            Fault::Refuse => {
                drop(state);
                connection.end(End::Close);
                return None;
            }
            fault => return Some((fault, state.generation)),
        }
    }
}

/// Writes all of `bytes`, looking at the connection's end between attempts. False when it ended or failed.
fn write_all(connection: &Connection, mut to: &TcpStream, mut bytes: &[u8]) -> bool {
    while !bytes.is_empty() {
        if connection.ended() {
            return false;
        }
        match to.write(bytes) {
            Ok(0) => return false,
            Ok(n) => bytes = &bytes[n..],
            Err(e) if is_timeout(&e) => {}
            Err(_) => return false,
        }
    }
    true
}

/// Client to server: forwarded as read, except while frozen. End of file from the client is passed on.
fn pump_up(connection: &Connection) {
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        if wait_for_turn(connection).is_none() {
            return;
        }
        let n = match (&connection.client).read(&mut buffer) {
            Ok(0) if connection.ended() => return,
            Ok(0) => {
                let _ = connection.upstream.shutdown(Shutdown::Write);
                return;
            }
            Ok(n) => n,
            Err(e) if is_timeout(&e) => continue,
            Err(_) => return connection.end(End::Close),
        };
        // A chunk read just before a freeze waits for it to pass.
        if wait_for_turn(connection).is_none() {
            return;
        }
        if !write_all(connection, &connection.upstream, &buffer[..n]) {
            return connection.end(End::Close);
        }
        connection.shared.bytes_up.fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// Server to client, where the reply faults act.
fn pump_down(connection: &Connection) {
    let mut buffer = vec![0u8; 16 * 1024];
    // The generation whose `CutMidValue` budget is being spent, and what is left of it: a new connection starts a
    // budget of its own even under the generation it was accepted in.
    let mut budget: Option<(u64, u64)> = None;
    loop {
        let Some((fault, _)) = wait_for_turn(connection) else {
            return;
        };
        if fault == Fault::HalfClose {
            return half_close(connection);
        }
        let n = match (&connection.upstream).read(&mut buffer) {
            // Ended here (`end` shuts the server's side down): a reset must not send an end of file first.
            Ok(0) if connection.ended() => return,
            Ok(0) => {
                // The server closed: pass the end of file on.
                let _ = connection.client.shutdown(Shutdown::Write);
                return;
            }
            Ok(n) => n,
            Err(e) if is_timeout(&e) => continue,
            Err(_) => return connection.end(End::Close),
        };
        let mut rest = &buffer[..n];
        while !rest.is_empty() {
            let Some((fault, generation)) = wait_for_turn(connection) else {
                return;
            };
            let piece = match fault {
                Fault::Delay(delay) => {
                    thread::sleep(delay);
                    rest.len()
                }
                Fault::Trickle { bytes, .. } => bytes.max(1).min(rest.len()),
                Fault::CutMidValue { after_bytes } => {
                    let left = match budget {
                        Some((g, left)) if g == generation => left,
                        _ => after_bytes,
                    };
                    if left == 0 {
                        return connection.end(End::Close);
                    }
                    let piece = (left.min(rest.len() as u64)) as usize;
                    budget = Some((generation, left - piece as u64));
                    piece
                }
                Fault::HalfClose => {
                    // Forward what was read, then shut the client's side.
                    if write_all(connection, &connection.client, rest) {
                        connection.shared.bytes_down.fetch_add(rest.len() as u64, Ordering::Relaxed);
                    }
                    return half_close(connection);
                }
                _ => rest.len(),
            };
            if !write_all(connection, &connection.client, &rest[..piece]) {
                return connection.end(End::Close);
            }
            connection.shared.bytes_down.fetch_add(piece as u64, Ordering::Relaxed);
            rest = &rest[piece..];
            match fault {
                Fault::Trickle { every, .. } => thread::sleep(every),
                Fault::CutMidValue { .. } if matches!(budget, Some((_, 0))) => {
                    return connection.end(End::Close);
                }
                _ => {}
            }
        }
    }
}

/// Shuts down the write side toward the client and drops what the server sends from then on, until either side
/// ends the connection.
fn half_close(connection: &Connection) {
    let _ = connection.client.shutdown(Shutdown::Write);
    let mut sink = vec![0u8; 16 * 1024];
    loop {
        if connection.ended() {
            return;
        }
        match connection.shared.current() {
            (_, _, true) | (Fault::Refuse, _, _) => return connection.end(End::Close),
            (Fault::Reset, _, _) => return connection.end(End::Reset),
            _ => {}
        }
        match (&connection.upstream).read(&mut sink) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if is_timeout(&e) => {}
            Err(_) => return,
        }
    }
}
