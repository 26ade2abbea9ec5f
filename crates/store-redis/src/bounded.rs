//! Replies are hostile too (spec/STORES.md §2): a Redis server, or whatever answers on its port, may announce a
//! 1 GiB value, nest arrays a hundred thousand deep, send a line that never ends, or send a thousand values that are
//! each within their bound and together are not, and redis-rs would buffer it all before it could say no (measured:
//! the front grew from 25 MB to 642 MB on one 1 GiB reply, and kept it). redis-rs takes any byte stream, so larder
//! puts this one between it and the socket. It follows the commands as they are written (redis-rs writes each as an
//! array of bulk strings) to know what each reply may hold as a whole, and follows the replies as their bytes
//! arrive (Redis answers in order), failing the read (an I/O error, which drops the connection) the moment a reply
//! breaks a bound, before anything is buffered for it. It costs a pass over the bytes of each command's and reply's
//! lines; bulk payloads are skipped by count, not scanned.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The longest line that is not a value (status, error, number, length).
const MAX_LINE: usize = 8 * 1024;
/// How deep aggregates may nest (larder's commands need 3: CLUSTER SLOTS).
pub const MAX_DEPTH: usize = 8;
/// Elements one aggregate may announce.
const MAX_ELEMENTS: u64 = 1 << 20;
/// Bytes a reply may hold besides its values: its lines and framing (spec/STORES.md §2: at most 64 KiB).
const FRAMING: u64 = 64 << 10;
/// The framing of one value of a multi-get (`$67108864` and two CR LF), counted per key asked.
const VALUE_FRAMING: u64 = 32;
/// Elements a reply to a command larder does not know may hold (spec/STORES.md §2: never more than 1,024 plus the
/// batch).
const ANY_ELEMENTS: u64 = 1024;
/// A Redis Cluster's hash slots, which bound its topology reply (`CLUSTER SLOTS`: a range of slots per element).
const CLUSTER_SLOTS: u64 = 16_384;

/// What one reply may hold as a whole, counted across all of its parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allowance {
    /// Bytes, from its type byte to its last CR LF.
    pub bytes: u64,
    /// Elements its aggregates announce, nested ones too (a map's pair counts two).
    pub elements: u64,
}

impl Allowance {
    /// For a command that returns at most one value: the value bound plus the framing allowance, and at most 1,024
    /// elements.
    fn one_value(max_value: u64) -> Allowance {
        Allowance { bytes: max_value + FRAMING, elements: ANY_ELEMENTS }
    }

    /// What the reply to a command may hold (spec/STORES.md §2, "Whole reply"): `name` is its first argument (upper
    /// case), `args` how many it has, `count` its `COUNT` option. A command that returns a number, a status or one
    /// value may hold one element; an `MGET` of n keys n values; a `SCAN` page its `COUNT` (10 unless given) plus
    /// 1,024; a Cluster's topology a few elements per slot.
    pub fn of_command(name: &[u8], args: u64, count: Option<u64>, max_value: u64) -> Allowance {
        let one = Allowance::one_value(max_value);
        match name {
            b"MGET" => {
                let keys = args.saturating_sub(1);
                Allowance {
                    bytes: keys.saturating_mul(max_value + VALUE_FRAMING).saturating_add(FRAMING),
                    elements: keys,
                }
            }
            b"SCAN" | b"SSCAN" => Allowance { elements: count.unwrap_or(10).saturating_add(ANY_ELEMENTS + 2), ..one },
            b"CLUSTER" => Allowance { bytes: max_value + CLUSTER_SLOTS * 1024, elements: CLUSTER_SLOTS * 64 },
            b"GET" | b"SET" | b"DEL" | b"UNLINK" | b"EXISTS" | b"EVALSHA" | b"EVAL" | b"DBSIZE" | b"FLUSHDB"
            | b"FLUSHALL" | b"INFO" | b"PING" | b"AUTH" | b"SELECT" | b"READONLY" | b"ASKING" => {
                Allowance { elements: 1, ..one }
            }
            _ => one,
        }
    }
}

/// Where the scanner is within the current reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Expecting a type byte.
    Start,
    /// Reading the line after type byte `kind`, `read` bytes of it so far (the CR included, once seen).
    Line { kind: u8, read: usize },
    /// Skipping a bulk payload and its CR LF.
    Bulk { remaining: u64 },
}

/// Follows RESP2/RESP3 replies byte by byte and refuses the first one that breaks a bound: of a line, a value, a
/// nesting, or (by the allowance of the command it answers) the reply as a whole.
#[derive(Debug)]
pub struct ReplyScanner {
    max_value: u64,
    state: State,
    /// The number being read from the current line (a length or count).
    number: Option<i64>,
    negative: bool,
    /// Elements still expected at each open aggregate level.
    pending: Vec<u64>,
    /// What the current reply may hold, once its first byte has arrived (`None` between replies).
    allowance: Option<Allowance>,
    /// Bytes and elements of the current reply so far.
    bytes: u64,
    elements: u64,
}

impl ReplyScanner {
    pub fn new(max_value: usize) -> ReplyScanner {
        ReplyScanner {
            max_value: max_value as u64,
            state: State::Start,
            number: None,
            negative: false,
            pending: Vec::with_capacity(MAX_DEPTH),
            allowance: None,
            bytes: 0,
            elements: 0,
        }
    }

    /// Follows `bytes` (the next ones the server sent), each reply against the allowance `next` gives when its first
    /// byte arrives (its command's); the reason for refusing them, if a reply breaks a bound.
    pub fn feed(&mut self, mut bytes: &[u8], mut next: impl FnMut() -> Allowance) -> Result<(), String> {
        while !bytes.is_empty() {
            match self.state {
                State::Start => {
                    if !is_counted(bytes[0]) && !b"+-:_,#(".contains(&bytes[0]) {
                        return Err(format!("a reply that starts with byte {:#04x}", bytes[0]));
                    }
                    if self.allowance.is_none() {
                        self.allowance = Some(next());
                        self.bytes = 0;
                        self.elements = 0;
                    }
                    self.state = State::Line { kind: bytes[0], read: 0 };
                    self.number = None;
                    self.negative = false;
                    self.count_bytes(1)?;
                    bytes = &bytes[1..];
                }
                State::Bulk { remaining } => {
                    let take = remaining.min(bytes.len() as u64);
                    // Counted when its length was announced.
                    bytes = &bytes[take as usize..];
                    if take == remaining {
                        self.value_done();
                    } else {
                        self.state = State::Bulk { remaining: remaining - take };
                    }
                }
                State::Line { kind, read } => {
                    let end = bytes.iter().position(|b| *b == b'\n');
                    let line = &bytes[..end.unwrap_or(bytes.len())];
                    if read + line.len() > MAX_LINE {
                        return Err(format!("a reply line longer than {MAX_LINE} bytes"));
                    }
                    self.count_bytes(line.len() as u64 + u64::from(end.is_some()))?;
                    if is_counted(kind) {
                        self.read_number(line)?;
                    }
                    match end {
                        None => {
                            self.state = State::Line { kind, read: read + line.len() };
                            bytes = &[];
                        }
                        Some(end) => {
                            bytes = &bytes[end + 1..];
                            self.line_done(kind)?;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Accumulates the digits of a length or count line (the CR before the LF is skipped).
    fn read_number(&mut self, line: &[u8]) -> Result<(), String> {
        for &b in line {
            match b {
                b'-' if self.number.is_none() && !self.negative => self.negative = true,
                b'0'..=b'9' => {
                    let n = self.number.unwrap_or(0);
                    let next = n.checked_mul(10).and_then(|n| n.checked_add(i64::from(b - b'0')));
                    self.number = Some(next.ok_or("a length that overflows")?);
                }
                b'\r' => {}
                _ => return Err(format!("a length with byte {b:#04x}")),
            }
        }
        Ok(())
    }

    fn line_done(&mut self, kind: u8) -> Result<(), String> {
        if !is_counted(kind) {
            self.value_done();
            return Ok(());
        }
        let n = self.number.ok_or("a length line without digits")?;
        let n = if self.negative { -n } else { n };
        if n < 0 {
            // -1 is RESP2's null bulk string or array.
            if n != -1 {
                return Err(format!("a length of {n}"));
            }
            self.value_done();
            return Ok(());
        }
        let n = n as u64;
        match kind {
            b'$' | b'!' | b'=' | b'?' => {
                if n > self.max_value {
                    return Err(format!("a value of {n} bytes, past max_value ({} bytes)", self.max_value));
                }
                // The whole payload counts now, before any of it is read.
                self.count_bytes(n + 2)?;
                self.state = State::Bulk { remaining: n + 2 };
            }
            _ => {
                let elements = if kind == b'%' || kind == b'|' { n.saturating_mul(2) } else { n };
                if elements > MAX_ELEMENTS {
                    return Err(format!("an aggregate of {n} elements"));
                }
                self.elements = self.elements.saturating_add(elements);
                let allowed = self.allowance.map_or(ANY_ELEMENTS, |a| a.elements);
                if self.elements > allowed {
                    return Err(format!(
                        "a reply of more than {allowed} elements in all, to a command that returns no more"
                    ));
                }
                if self.pending.len() >= MAX_DEPTH {
                    return Err(format!("replies nested more than {MAX_DEPTH} deep"));
                }
                if elements == 0 {
                    self.value_done();
                } else {
                    self.pending.push(elements);
                    self.state = State::Start;
                }
            }
        }
        Ok(())
    }

    /// Counts `n` more bytes of the current reply against its allowance.
    fn count_bytes(&mut self, n: u64) -> Result<(), String> {
        self.bytes = self.bytes.saturating_add(n);
        let allowed = self.allowance.map_or(self.max_value + FRAMING, |a| a.bytes);
        if self.bytes > allowed {
            return Err(format!("a reply of more than {allowed} bytes in all, past what its command can return"));
        }
        Ok(())
    }

    /// One value is complete: count it against the aggregates that hold it, and end the reply with its last one.
    fn value_done(&mut self) {
        self.state = State::Start;
        while let Some(left) = self.pending.last_mut() {
            *left -= 1;
            if *left > 0 {
                return;
            }
            self.pending.pop();
        }
        self.allowance = None;
    }
}

/// Where the command scanner is within the current command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Writing {
    /// Expecting a command's `*<args>` line.
    Command,
    /// Expecting an argument's `$<length>` line.
    Argument,
    /// Within an argument's bytes and their CR LF.
    Payload { remaining: u64, keep: bool },
    /// Bytes that are not commands in RESP's request form (redis-rs writes no others): every reply then gets the
    /// allowance of one value.
    Lost,
}

/// Follows the commands written, as redis-rs writes them (arrays of bulk strings), and queues what each one's
/// reply may hold. Only the command's name and a `COUNT` option are kept; arguments are skipped by count.
#[derive(Debug)]
pub struct CommandScanner {
    max_value: u64,
    state: Writing,
    /// The header line being read.
    line: Vec<u8>,
    /// The argument being kept (the name, or the number after `COUNT`).
    kept: Vec<u8>,
    args: u64,
    argument: u64,
    name: Vec<u8>,
    after_count: bool,
    count: Option<u64>,
    /// The allowances of the commands written and not yet answered, in order.
    waiting: VecDeque<Allowance>,
}

impl CommandScanner {
    pub fn new(max_value: usize) -> CommandScanner {
        CommandScanner {
            max_value: max_value as u64,
            state: Writing::Command,
            line: Vec::with_capacity(24),
            kept: Vec::with_capacity(24),
            args: 0,
            argument: 0,
            name: Vec::with_capacity(16),
            after_count: false,
            count: None,
            waiting: VecDeque::new(),
        }
    }

    /// The allowance of the oldest command not yet answered (one value's, if none is waiting).
    pub fn next_allowance(&mut self) -> Allowance {
        self.waiting.pop_front().unwrap_or(Allowance::one_value(self.max_value))
    }

    /// Follows `bytes`, the next ones written to the server.
    pub fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            match self.state {
                Writing::Lost => return,
                Writing::Command | Writing::Argument => {
                    let end = bytes.iter().position(|b| *b == b'\n');
                    let part = &bytes[..end.unwrap_or(bytes.len())];
                    if self.line.len() + part.len() > 32 {
                        self.state = Writing::Lost;
                        return;
                    }
                    self.line.extend_from_slice(part);
                    let Some(end) = end else { return };
                    bytes = &bytes[end + 1..];
                    self.header_done();
                }
                Writing::Payload { remaining, keep } => {
                    let take = remaining.min(bytes.len() as u64);
                    if keep {
                        self.kept.extend_from_slice(&bytes[..take as usize]);
                    }
                    bytes = &bytes[take as usize..];
                    if take == remaining {
                        self.argument_done();
                    } else {
                        self.state = Writing::Payload { remaining: remaining - take, keep };
                    }
                }
            }
        }
    }

    fn header_done(&mut self) {
        let line = self.line.strip_suffix(b"\r").unwrap_or(&self.line);
        let number = line.get(1..).and_then(|d| std::str::from_utf8(d).ok()).and_then(|d| d.parse::<u64>().ok());
        match (self.state, line.first(), number) {
            (Writing::Command, Some(b'*'), Some(args)) => {
                self.args = args;
                self.argument = 0;
                self.name.clear();
                self.after_count = false;
                self.count = None;
                if args == 0 {
                    self.command_done();
                } else {
                    self.state = Writing::Argument;
                }
            }
            (Writing::Argument, Some(b'$'), Some(length)) => {
                let keep = length <= 20;
                self.kept.clear();
                self.state = Writing::Payload { remaining: length + 2, keep };
            }
            _ => self.state = Writing::Lost,
        }
        self.line.clear();
    }

    fn argument_done(&mut self) {
        let kept = self.kept.strip_suffix(b"\r\n").unwrap_or(&self.kept);
        if self.argument == 0 {
            self.name = kept.to_ascii_uppercase();
        } else if self.after_count {
            self.count = std::str::from_utf8(kept).ok().and_then(|c| c.parse().ok());
        }
        // The argument after a `COUNT` is its number (`kept` is empty when the argument was not kept).
        self.after_count = self.argument > 0 && kept.eq_ignore_ascii_case(b"COUNT") && !self.after_count;
        self.kept.clear();
        self.argument += 1;
        if self.argument == self.args {
            self.command_done();
        } else {
            self.state = Writing::Argument;
        }
    }

    fn command_done(&mut self) {
        self.waiting.push_back(Allowance::of_command(&self.name, self.args, self.count, self.max_value));
        self.state = Writing::Command;
    }
}

/// Types whose line is a length or count.
fn is_counted(kind: u8) -> bool {
    b"$!=?*~>%|".contains(&kind)
}

/// A byte stream whose writes pass through a [`CommandScanner`] and whose reads through a [`ReplyScanner`]: a reply
/// that breaks a bound, its own or its command's, is an I/O error.
pub struct BoundedStream<S> {
    inner: S,
    scanner: ReplyScanner,
    commands: CommandScanner,
}

impl<S> BoundedStream<S> {
    pub fn new(inner: S, max_value: usize) -> BoundedStream<S> {
        BoundedStream { inner, scanner: ReplyScanner::new(max_value), commands: CommandScanner::new(max_value) }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for BoundedStream<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let commands = &mut this.commands;
                let result = this.scanner.feed(&buf.filled()[before..], || commands.next_allowance());
                Poll::Ready(result.map_err(|reason| {
                    io::Error::new(io::ErrorKind::InvalidData, format!("refused the server's reply: {reason}"))
                }))
            }
            other => other,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for BoundedStream<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let written = Pin::new(&mut this.inner).poll_write(cx, data);
        if let Poll::Ready(Ok(n)) = written {
            this.commands.feed(&data[..n]);
        }
        written
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let written = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(mut n)) = written {
            for buf in bufs {
                let take = n.min(buf.len());
                this.commands.feed(&buf[..take]);
                n -= take;
                if n == 0 {
                    break;
                }
            }
        }
        written
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scans `bytes` as replies to commands larder does not know (each may hold one value).
    fn scan_in_pieces(bytes: &[u8], max_value: usize, piece: usize) -> Result<(), String> {
        let mut scanner = ReplyScanner::new(max_value);
        let one = Allowance::of_command(b"UNKNOWN", 1, None, max_value as u64);
        for chunk in bytes.chunks(piece.max(1)) {
            scanner.feed(chunk, || one)?;
        }
        Ok(())
    }

    /// Writes `commands` through a command scanner and then scans `replies` against what it queued, both in pieces.
    fn answer(commands: &[&[&[u8]]], replies: &[u8], max_value: usize, piece: usize) -> Result<(), String> {
        let mut written = CommandScanner::new(max_value);
        let request: Vec<u8> = commands.iter().flat_map(|args| crate::resp::command(args).to_vec()).collect();
        for chunk in request.chunks(piece.max(1)) {
            written.feed(chunk);
        }
        let mut scanner = ReplyScanner::new(max_value);
        for chunk in replies.chunks(piece.max(1)) {
            scanner.feed(chunk, || written.next_allowance())?;
        }
        Ok(())
    }

    #[test]
    fn commands_are_followed_to_what_their_replies_may_hold() {
        let mut written = CommandScanner::new(1000);
        let request = [
            crate::resp::command(&[b"evalsha", b"0123456789abcdef0123456789abcdef01234567", b"1", b"k", b"1"]),
            crate::resp::command(&[b"MGET", b"a", b"b", b"c"]),
            crate::resp::command(&[b"SCAN", b"0", b"MATCH", b"p*", b"COUNT", b"100"]),
            crate::resp::command(&[b"SSCAN", b"tag", b"0"]),
            crate::resp::command(&[b"SET", b"k", &[b'v'; 5000]]),
            crate::resp::command(&[b"CLUSTER", b"SLOTS"]),
            crate::resp::command(&[b"CLIENT", b"SETINFO", b"LIB-NAME", b"redis-rs"]),
        ]
        .concat();
        for piece in request.chunks(3) {
            written.feed(piece);
        }
        let got: Vec<Allowance> = (0..8).map(|_| written.next_allowance()).collect();
        let one = Allowance { bytes: 1000 + FRAMING, elements: ANY_ELEMENTS };
        assert_eq!(
            got,
            [
                Allowance { elements: 1, ..one },
                Allowance { bytes: 3 * (1000 + VALUE_FRAMING) + FRAMING, elements: 3 },
                Allowance { elements: 100 + ANY_ELEMENTS + 2, ..one },
                Allowance { elements: 10 + ANY_ELEMENTS + 2, ..one },
                Allowance { elements: 1, ..one },
                Allowance { bytes: 1000 + CLUSTER_SLOTS * 1024, elements: CLUSTER_SLOTS * 64 },
                one,
                // A reply no command asked for.
                one,
            ]
        );
    }

    #[test]
    fn a_reply_is_bounded_as_a_whole_by_its_command() {
        let script: &[&[u8]] = &[b"EVALSHA", b"0123456789abcdef0123456789abcdef01234567", b"1", b"counter", b"1"];
        for piece in [1, 4, 1000] {
            // The counter's script answers one integer; an array of a thousand values is refused at its first line.
            assert_eq!(answer(&[script], b":7\r\n", 1 << 20, piece), Ok(()));
            let wide = answer(&[script], b"*1000\r\n", 1 << 20, piece);
            assert!(wide.is_err_and(|e| e.contains("elements")), "pieces of {piece}");
            // An MGET of 2 keys may hold 2 values of max_value each, not 3, nor 2 nested arrays of them.
            let mget: &[&[u8]] = &[b"MGET", b"a", b"b"];
            let two = b"*2\r\n$4\r\nabcd\r\n$-1\r\n";
            assert_eq!(answer(&[mget, script], &[two.as_slice(), b":1\r\n"].concat(), 4, piece), Ok(()));
            assert!(answer(&[mget], b"*3\r\n", 4, piece).is_err());
            assert!(answer(&[mget], b"*2\r\n*1\r\n", 4, piece).is_err());
            // A GET's one value: its bytes are counted as announced, before they arrive.
            let get: &[&[u8]] = &[b"GET", b"k"];
            assert_eq!(answer(&[get], b"$16\r\n0123456789abcdef\r\n", 16, piece), Ok(()));
            let nested = answer(&[get], b"*1\r\n*1\r\n:1\r\n", 16, piece);
            assert!(nested.is_err_and(|e| e.contains("elements")), "pieces of {piece}");
            // A SCAN page holds its COUNT and 1,024 more, not a million.
            let scan: &[&[u8]] = &[b"SCAN", b"0", b"MATCH", b"x*", b"COUNT", b"10"];
            assert_eq!(answer(&[scan], b"*2\r\n$1\r\n0\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n", 16, piece), Ok(()));
            assert!(answer(&[scan], b"*2\r\n$1\r\n0\r\n*1000000\r\n", 16, piece).is_err());
        }
        // Bytes: a reply to a command of one value holds at most max_value plus the framing allowance in all, lines
        // included, however its parts are cut.
        let max_value = 1024;
        let first_line_and_length = b"*1000\r\n$1000\r\n";
        let unknown: &[&[u8]] = &[b"LRANGE", b"k", b"0", b"-1"];
        assert_eq!(answer(&[unknown], first_line_and_length, max_value, 7), Ok(()), "only the first value has arrived");
        let values =
            [b"*1000\r\n".as_slice(), &[b"$1000\r\n".as_slice(), &[b'x'; 1000], b"\r\n"].concat().repeat(70)].concat();
        let refused = answer(&[unknown], &values, max_value, 4096);
        assert!(refused.is_err_and(|e| e.contains("bytes in all")));
    }

    #[test]
    fn real_replies_pass_in_any_split() {
        let replies: &[&[u8]] = &[
            b"+OK\r\n",
            b"-ERR unknown command\r\n",
            b":42\r\n",
            b"$5\r\nhello\r\n",
            b"$-1\r\n",
            b"*-1\r\n",
            b"*3\r\n$1\r\na\r\n$-1\r\n$2\r\n\r\n\r\n",
            b"*2\r\n$1\r\n0\r\n*2\r\n$1\r\nk\r\n$1\r\nj\r\n",
            b"*1\r\n*3\r\n:0\r\n:16383\r\n*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$3\r\nabc\r\n",
            b"%1\r\n+a\r\n:1\r\n_\r\n,1.5\r\n#t\r\n=7\r\ntxt:abc\r\n",
            b"*0\r\n+after empty\r\n",
        ];
        let all: Vec<u8> = replies.concat();
        for piece in [1, 2, 3, 7, all.len()] {
            assert_eq!(scan_in_pieces(&all, 64, piece), Ok(()), "pieces of {piece}");
        }
    }

    #[test]
    fn replies_past_a_bound_are_refused_as_they_arrive() {
        let huge = scan_in_pieces(b"$1073741824\r\n", 64 << 20, 5);
        assert!(huge.is_err_and(|e| e.contains("max_value")));
        assert!(scan_in_pieces(b"$65\r\n", 64, 100).is_err());
        assert!(scan_in_pieces(b"$64\r\n", 64, 100).is_ok());
        let nested = b"*1\r\n".repeat(MAX_DEPTH + 1);
        assert!(scan_in_pieces(&nested, 64, 3).is_err_and(|e| e.contains("nested")));
        assert!(scan_in_pieces(&b"*1\r\n".repeat(MAX_DEPTH), 64, 3).is_ok());
        let endless = [b"+".as_slice(), &[b'x'; MAX_LINE + 1]].concat();
        assert!(scan_in_pieces(&endless, 64, 1000).is_err_and(|e| e.contains("line")));
        assert!(scan_in_pieces(b"*99999999999\r\n", 64, 100).is_err());
        assert!(scan_in_pieces(b"$-2\r\n", 64, 100).is_err());
        assert!(scan_in_pieces(b"$1x\r\n", 64, 100).is_err());
        assert!(scan_in_pieces(b"\x00garbage", 64, 100).is_err());
        assert!(scan_in_pieces(b"$99999999999999999999999\r\n", 64, 100).is_err());
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..2000 {
            let bytes: Vec<u8> =
                (0..rng.usize(0..64)).map(|_| *rng.choice(b"$*%:+-_\r\n0123456789x").unwrap_or(&b'x')).collect();
            let _ = scan_in_pieces(&bytes, 16, rng.usize(1..8));
        }
    }
}
