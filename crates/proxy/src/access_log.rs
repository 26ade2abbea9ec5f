//! The access log (off by default; `--access-log FILE` or `-` for standard output): one line per request, written
//! when its response has been sent (or abandoned), so it can report the bytes sent and the whole time taken.
//!
//! Lines go through a bounded queue to a writer thread, so a slow disk never stalls a request; if the queue is
//! full the line is dropped and counted (`larder_access_log_dropped_total`), never waited for. The format, fields
//! separated by one space:
//!
//! ```text
//! 2026-11-22T10:15:42.123Z 192.0.2.1 GET http://shop.example/p/42 HTTP/1.1 200 10240 HIT hit - 0.412 - "curl/8.5"
//! time                     client    method url                   protocol status bytes x-cache outcome detail
//!                                                                  total-ms upstream-ms "user-agent"
//! ```
//!
//! `outcome` is one of hit, revalidated, stale, miss, collapsed, pass, bypass, local (docs/ARCHITECTURE.md);
//! `detail` is the `Cache-Status` detail (why a response was not stored, why a request was refused) or `-`.
//! `url` is the URL larder keyed on, or the raw request target of a refused request. The user agent is quoted, with
//! `"`, `\` and control characters escaped as `\xHH`.

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use http::request::Parts;
use http::Version;

use crate::cache_status::Verdict;

/// Lines waiting for the writer, at most.
const QUEUE: usize = 16_384;

/// Where access lines go.
#[derive(Clone)]
pub struct AccessLog {
    queue: SyncSender<String>,
    dropped: Arc<AtomicU64>,
}

impl AccessLog {
    /// Opens `target` for appending ("-" = standard output) and starts its writer thread.
    pub fn open(target: &str) -> Result<AccessLog, String> {
        let mut out: Box<dyn Write + Send> = if target == "-" {
            Box::new(std::io::stdout())
        } else {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(target)
                .map_err(|e| format!("cannot open {target}: {e}"))?;
            Box::new(file)
        };
        let (queue, lines) = sync_channel::<String>(QUEUE);
        std::thread::Builder::new()
            .name("larder-access-log".into())
            .spawn(move || {
                let mut buffered = std::io::BufWriter::new(&mut out);
                while let Ok(line) = lines.recv() {
                    let _ = buffered.write_all(line.as_bytes());
                    // Flush whenever the queue runs dry, so a quiet server's log is current.
                    while let Ok(more) = lines.try_recv() {
                        let _ = buffered.write_all(more.as_bytes());
                    }
                    let _ = buffered.flush();
                }
            })
            .map_err(|e| format!("cannot start the access log writer: {e}"))?;
        Ok(AccessLog { queue, dropped: Arc::new(AtomicU64::new(0)) })
    }

    /// Queues a line; drops it (and counts it) rather than wait if the writer is behind.
    pub fn write(&self, line: String) {
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = self.queue.try_send(line) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Lines dropped because the writer could not keep up.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// What is known of a request when it arrives.
#[derive(Debug, Clone)]
pub struct AccessRecord {
    at: SystemTime,
    started: Instant,
    client: IpAddr,
    method: String,
    version: Version,
    /// The URL larder keyed on (set once the request is understood), else the raw target.
    pub url: String,
    pub user_agent: Option<String>,
}

impl AccessRecord {
    pub fn started(parts: &Parts, client: SocketAddr) -> AccessRecord {
        AccessRecord {
            at: SystemTime::now(),
            started: Instant::now(),
            client: client.ip(),
            method: parts.method.to_string(),
            version: parts.version,
            url: parts.uri.to_string(),
            user_agent: None,
        }
    }

    /// The line for this request, answered with `status` after `bytes` body bytes.
    pub fn line(&self, status: u16, bytes: u64, verdict: &Verdict) -> String {
        let ms = |d: Duration| format!("{:.3}", d.as_secs_f64() * 1000.0);
        format!(
            "{} {} {} {} {:?} {status} {bytes} {} {} {} {} {} \"{}\"\n",
            humantime::format_rfc3339_millis(self.at),
            self.client,
            self.method,
            token(&self.url),
            self.version,
            verdict.outcome.x_cache(),
            verdict.outcome.name(),
            verdict.detail.unwrap_or("-"),
            ms(self.started.elapsed()),
            verdict.upstream_time.map_or_else(|| "-".to_owned(), ms),
            escaped(self.user_agent.as_deref().unwrap_or("")),
        )
    }
}

/// A field that must stay one token: spaces and control characters escaped.
fn token(text: &str) -> String {
    if text.bytes().all(|b| b > 0x20 && b < 0x7f) {
        text.to_owned()
    } else {
        text.bytes()
            .map(|b| if b > 0x20 && b < 0x7f { (b as char).to_string() } else { format!("\\x{b:02X}") })
            .collect()
    }
}

fn escaped(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'"' | b'\\' => format!("\\x{b:02X}"),
            0x20..=0x7e => (b as char).to_string(),
            _ => format!("\\x{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache_status::Outcome;

    #[test]
    fn a_line_has_the_documented_fields() {
        let request = http::Request::get("/p?q=1").body(()).expect("request");
        let (parts, ()) = request.into_parts();
        let mut record = AccessRecord::started(&parts, "192.0.2.1:4000".parse().expect("addr"));
        record.url = "http://shop.example/p?q=1".into();
        record.user_agent = Some("curl/8 \"x\"".into());
        let verdict = Verdict::new(Outcome::Miss).with_detail("private");
        let line = record.line(200, 42, &verdict);
        let (fields, agent) = line.split_once(" \"").expect("a quoted user agent");
        assert_eq!(agent, "curl/8 \\x22x\\x22\"\n");
        let fields: Vec<&str> = fields.split(' ').collect();
        assert_eq!(fields.len(), 12, "{line}");
        assert!(fields[0].ends_with('Z') && fields[0].contains('T'));
        assert_eq!(
            &fields[1..10],
            ["192.0.2.1", "GET", "http://shop.example/p?q=1", "HTTP/1.1", "200", "42", "MISS", "miss", "private"]
        );
        assert!(fields[10].parse::<f64>().is_ok());
        assert_eq!(fields[11], "-");
    }
}
