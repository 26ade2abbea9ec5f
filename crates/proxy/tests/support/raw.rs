//! A raw-socket origin that logs every byte it receives and frames requests itself, as RFC 9112 §6 says (so a
//! framing mistake of larder's shows up here instead of being smoothed over by an HTTP library), and a raw client
//! for requests no HTTP library would send.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One request as the origin framed it.
#[derive(Debug, Clone)]
pub struct RawRequest {
    pub method: String,
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Which connection (0, 1, …) it arrived on.
    pub connection: usize,
}

impl RawRequest {
    /// The first value of a header (names compared case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn all(&self, name: &str) -> Vec<&str> {
        self.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str()).collect()
    }
}

/// How the origin answers a request.
pub enum Reply {
    /// These bytes, then the next request on the connection.
    Send(Vec<u8>),
    /// The head at once, then the body a byte at a time.
    Trickle { head: Vec<u8>, body: Vec<u8>, every: Duration },
    /// Nothing, ever (the connection stays open).
    Hang,
}

/// `HTTP/1.1 200 OK` with these headers, a Content-Length and the body.
pub fn ok(headers: &[(&str, &str)], body: &[u8]) -> Reply {
    Reply::Send(response(200, headers, body))
}

/// A response's bytes.
pub fn response(status: u16, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status} X\r\n").into_bytes();
    for (name, value) in headers {
        out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
    }
    out.extend_from_slice(format!("content-length: {}\r\n\r\n", body.len()).as_bytes());
    out.extend_from_slice(body);
    out
}

type Handler = dyn Fn(&RawRequest) -> Reply + Send + Sync;

pub struct RawOrigin {
    pub addr: SocketAddr,
    requests: Arc<Mutex<Vec<RawRequest>>>,
    bytes: Arc<Mutex<Vec<u8>>>,
    connections: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl RawOrigin {
    pub async fn start(handler: impl Fn(&RawRequest) -> Reply + Send + Sync + 'static) -> RawOrigin {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("raw origin binds");
        let addr = listener.local_addr().expect("address");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let bytes = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let handler: Arc<Handler> = Arc::new(handler);
        let (r, b, c) = (requests.clone(), bytes.clone(), connections.clone());
        let task = tokio::spawn(async move {
            let mut tasks = tokio::task::JoinSet::new();
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let index = c.fetch_add(1, Ordering::SeqCst);
                tasks.spawn(serve(stream, index, r.clone(), b.clone(), handler.clone()));
            }
        });
        RawOrigin { addr, requests, bytes, connections, task }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request framed so far.
    pub fn requests(&self) -> Vec<RawRequest> {
        self.requests.lock().clone()
    }

    pub fn targets(&self) -> Vec<String> {
        self.requests.lock().iter().map(|r| r.target.clone()).collect()
    }

    /// Every byte received, all connections together, lowercased (for searching).
    pub fn received_lowercase(&self) -> String {
        String::from_utf8_lossy(&self.bytes.lock()).to_ascii_lowercase()
    }

    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

impl Drop for RawOrigin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(
    mut stream: TcpStream,
    connection: usize,
    requests: Arc<Mutex<Vec<RawRequest>>>,
    log: Arc<Mutex<Vec<u8>>>,
    handler: Arc<Handler>,
) {
    let mut buffer = Vec::new();
    loop {
        let Some(head_end) = read_until(&mut stream, &mut buffer, &log, |b| find(b, b"\r\n\r\n")).await else { return };
        let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
        buffer.drain(..head_end + 4);
        let mut lines = head.split("\r\n");
        let mut request_line = lines.next().unwrap_or("").split(' ');
        let (method, target) =
            (request_line.next().unwrap_or("").to_owned(), request_line.next().unwrap_or("").to_owned());
        let headers: Vec<(String, String)> =
            lines.filter_map(|l| l.split_once(':').map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))).collect();
        let mut request = RawRequest { method, target, headers, body: Vec::new(), connection };
        let chunked = request.all("transfer-encoding").iter().any(|v| v.to_ascii_lowercase().contains("chunked"));
        if chunked {
            loop {
                let Some(line_end) = read_until(&mut stream, &mut buffer, &log, |b| find(b, b"\r\n")).await else {
                    return;
                };
                let size_text = String::from_utf8_lossy(&buffer[..line_end]).into_owned();
                buffer.drain(..line_end + 2);
                let Ok(size) = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16) else {
                    return;
                };
                let need = size + 2;
                if read_until(&mut stream, &mut buffer, &log, |b| (b.len() >= need).then_some(need)).await.is_none() {
                    return;
                }
                if size == 0 {
                    buffer.drain(..2);
                    break;
                }
                request.body.extend_from_slice(&buffer[..size]);
                buffer.drain(..need);
            }
        } else if let Some(length) = request.header("content-length").and_then(|v| v.parse::<usize>().ok()) {
            if read_until(&mut stream, &mut buffer, &log, |b| (b.len() >= length).then_some(length)).await.is_none() {
                return;
            }
            request.body = buffer.drain(..length).collect();
        }
        requests.lock().push(request.clone());
        match handler(&request) {
            Reply::Send(bytes) => {
                if stream.write_all(&bytes).await.is_err() {
                    return;
                }
            }
            Reply::Trickle { head, body, every } => {
                if stream.write_all(&head).await.is_err() {
                    return;
                }
                for byte in body {
                    tokio::time::sleep(every).await;
                    if stream.write_all(&[byte]).await.is_err() {
                        return;
                    }
                }
            }
            Reply::Hang => {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                return;
            }
        }
    }
}

/// Reads into `buffer` until `done` finds what it looks for (returning its position), or the peer closes.
async fn read_until(
    stream: &mut TcpStream,
    buffer: &mut Vec<u8>,
    log: &Mutex<Vec<u8>>,
    done: impl Fn(&[u8]) -> Option<usize>,
) -> Option<usize> {
    loop {
        if let Some(at) = done(buffer) {
            return Some(at);
        }
        let mut chunk = [0u8; 8192];
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => {
                log.lock().extend_from_slice(&chunk[..n]);
                buffer.extend_from_slice(&chunk[..n]);
            }
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Sends raw bytes to `addr` and returns everything that comes back until the peer closes or stays quiet for
/// `quiet`.
pub async fn exchange(addr: SocketAddr, bytes: &[u8], quiet: Duration) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(bytes).await.expect("write");
    read_all(&mut stream, quiet).await
}

/// Reads until the peer closes or stays quiet for `quiet`.
pub async fn read_all(stream: &mut TcpStream, quiet: Duration) -> String {
    let mut out = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        match tokio::time::timeout(quiet, stream.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(n)) => out.extend_from_slice(&chunk[..n]),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether the peer closes `stream` within `within` (reading and discarding whatever it sends meanwhile).
pub async fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let mut chunk = [0u8; 8192];
    tokio::time::timeout(within, async {
        loop {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(_) => continue,
            }
        }
    })
    .await
    .is_ok()
}
