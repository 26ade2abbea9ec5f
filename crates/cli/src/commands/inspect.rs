//! `larder inspect`: an entry's header and decoded value, in the human or JSON form of spec/CLI.md, with its body
//! on request, and cut to a readable length when a person reads it on a terminal.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::path::PathBuf;

use bytes::Bytes;
use clap::Args;
use larder_format::{
    decode_response, Compressor, DecodeError, DecodeLimits, Entry, EntryMeta, ErrorKind, HttpResponse, Kind, Serializer,
};

use crate::commands::read_stdin;
use crate::display;
use crate::Failure;

/// Print an entry's header and decoded value.
///
/// Exits 1 with one line naming the error kind (spec/FORMAT.md §7) when the entry is invalid. On a terminal
/// (not with --json), texts longer than 200 characters are cut, saying how many characters were left out.
#[derive(Args)]
pub struct InspectArgs {
    /// The entry file; - or nothing for stdin.
    file: Option<PathBuf>,
    /// Print one JSON object instead of labelled lines.
    #[arg(long)]
    json: bool,
    /// Refuse payloads that decompress to more than this many bytes.
    #[arg(long, default_value_t = larder_format::compress::DEFAULT_MAX_SIZE, value_name = "BYTES")]
    max_size: usize,
    /// After the lines, print an empty line and the body (a response's body, or a value's payload).
    ///
    /// An HTTP response's body is printed as stored: still compressed if its content_encoding says so. A value's
    /// payload is printed decompressed but still serialized. On a terminal it is shown as text, or as
    /// {"$base64":...} when it is not UTF-8. The JSON form always holds the whole body, with or without --body.
    #[arg(long)]
    body: bool,
    /// Do not cut long texts on a terminal.
    #[arg(long)]
    full: bool,
}

/// Who reads the human form: a program gets it whole and exact; a person on a terminal gets long texts cut
/// (unless --full) and binary bodies as base64.
#[derive(Clone, Copy)]
struct View {
    terminal: bool,
    cut: bool,
}

impl View {
    fn shown<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if self.cut {
            display::cut_text(text, display::CUT_AT)
        } else {
            Cow::Borrowed(text)
        }
    }
}

pub fn run(args: InspectArgs) -> Result<(), Failure> {
    let bytes = match &args.file {
        Some(path) if path.as_os_str() != "-" => {
            std::fs::read(path).map_err(|e| Failure::input(format!("cannot read {}: {e}", path.display())))?
        }
        _ => read_stdin()?,
    };
    print(bytes, args.max_size, args.json, args.body, args.full)
}

/// Prints `bytes` as `inspect` does (also for `larder store get --inspect`).
pub fn print(bytes: Vec<u8>, max_size: usize, json: bool, body: bool, full: bool) -> Result<(), Failure> {
    let limits = DecodeLimits { max_size };
    let report = Report::build(Bytes::from(bytes), &limits)
        .map_err(|e| Failure { status: 1, message: format!("invalid entry: {}: {}", e.kind(), e.detail()) })?;
    if json {
        return crate::output::print_line(&report.json());
    }
    let terminal = crate::output::stdout_is_terminal();
    let view = View { terminal, cut: terminal && !full };
    let mut out = report.human(view).into_bytes();
    if body {
        out.push(b'\n');
        report.write_body(&mut out, view);
    }
    crate::output::write_stdout(&out)
}

/// What `inspect` prints, decoded once and rendered in either form.
struct Report {
    kind: Kind,
    serializer: Serializer,
    compressor: Compressor,
    meta: EntryMeta,
    stored_bytes: usize,
    payload_bytes: usize,
    body: Body,
}

enum Body {
    /// The value in display JSON, and the payload it was read from (for --body).
    Value {
        display: String,
        payload: Vec<u8>,
    },
    Response(HttpResponse),
}

impl Report {
    fn build(bytes: Bytes, limits: &DecodeLimits) -> Result<Report, DecodeError> {
        let entry = Entry::parse(&bytes)?;
        let payload = entry.payload(limits)?;
        let payload_bytes = payload.len();
        let h = &entry.header;
        let body = match h.kind {
            Kind::Response => Body::Response(decode_response(&bytes, limits)?.1),
            Kind::Value => {
                Body::Value { display: value_display(h.serializer, &payload)?, payload: payload.into_owned() }
            }
        };
        Ok(Report {
            kind: h.kind,
            serializer: h.serializer,
            compressor: h.compressor,
            meta: h.meta(),
            stored_bytes: bytes.len(),
            payload_bytes,
            body,
        })
    }

    /// The labelled lines, each ending with a newline.
    fn human(&self, view: View) -> String {
        let h = &self.meta;
        let mut out = String::new();
        let mut line = |label: &str, value: &str| {
            let _ = writeln!(out, "{:<12} {}", format!("{label}:"), view.shown(value));
        };
        line("format", "1");
        line("kind", self.kind.name());
        line("serializer", self.serializer.name());
        line("compressor", self.compressor.name());
        line("created_at", &time_text(h.created_at));
        line("expires_at", &if h.expires_at == 0 { "never".to_owned() } else { time_text(h.expires_at) });
        line("stale_ms", &h.stale_ms.to_string());
        line("version", h.version.as_deref().unwrap_or("(none)"));
        line("tags", &if h.tags.is_empty() { "(none)".to_owned() } else { h.tags.join(", ") });
        line("size", &format!("{} bytes stored, {} bytes payload", self.stored_bytes, self.payload_bytes));
        match &self.body {
            Body::Value { display, .. } => line("value", display),
            Body::Response(response) => {
                line("status", &response.status.to_string());
                line("encoding", response.content_encoding.name());
                for (name, value) in &response.headers {
                    line("header", &format!("{}: {}", display::bytes_text(name), display::bytes_text(value)));
                }
                line("body", &format!("{} bytes", response.body.len()));
            }
        }
        out
    }

    /// What --body prints: the bytes as they are for a program; for a person, their display text (cut unless
    /// --full) and a newline to end the output, unless it is empty or ends with one already.
    fn write_body(&self, out: &mut Vec<u8>, view: View) {
        let body = match &self.body {
            Body::Value { payload, .. } => &payload[..],
            Body::Response(response) => &response.body[..],
        };
        if !view.terminal {
            out.extend_from_slice(body);
            return;
        }
        let text = display::bytes_text(body);
        let shown = view.shown(&text);
        out.extend_from_slice(shown.as_bytes());
        if !shown.is_empty() && !shown.ends_with('\n') {
            out.push(b'\n');
        }
    }

    fn json(&self) -> String {
        let h = &self.meta;
        let mut out = String::from("{\"format\":1,\"kind\":");
        display::write_str(&mut out, self.kind.name());
        out.push_str(",\"serializer\":");
        display::write_str(&mut out, self.serializer.name());
        out.push_str(",\"compressor\":");
        display::write_str(&mut out, self.compressor.name());
        let _ =
            write!(out, ",\"created_at\":{},\"expires_at\":{},\"stale_ms\":{}", h.created_at, h.expires_at, h.stale_ms);
        out.push_str(",\"version\":");
        match &h.version {
            Some(v) => display::write_str(&mut out, v),
            None => out.push_str("null"),
        }
        out.push_str(",\"tags\":[");
        for (i, tag) in h.tags.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            display::write_str(&mut out, tag);
        }
        let _ =
            write!(out, "],\"stored_bytes\":{},\"payload_bytes\":{},\"value\":", self.stored_bytes, self.payload_bytes);
        match &self.body {
            Body::Value { display, .. } => out.push_str(display),
            Body::Response(response) => {
                let _ = write!(out, "{{\"status\":{},\"headers\":[", response.status);
                for (i, (name, value)) in response.headers.iter().enumerate() {
                    out.push_str(if i > 0 { ",[" } else { "[" });
                    display::write_bytes(&mut out, name);
                    out.push(',');
                    display::write_bytes(&mut out, value);
                    out.push(']');
                }
                out.push_str("],\"content_encoding\":");
                display::write_str(&mut out, response.content_encoding.name());
                out.push_str(",\"body\":");
                display::write_bytes(&mut out, &response.body);
                out.push('}');
            }
        }
        out.push('}');
        out
    }
}

fn value_display(serializer: Serializer, payload: &[u8]) -> Result<String, DecodeError> {
    let bad = |detail: String| DecodeError::new(ErrorKind::BadValue, detail);
    let limits = display::Limits::for_payload(payload.len());
    let mut out = String::new();
    let written = match serializer {
        Serializer::MsgPack => {
            let len = larder_format::msgpack_walk::object_len(payload).map_err(|e| bad(format!("msgpack: {e}")))?;
            if len != payload.len() {
                return Err(bad(format!("msgpack: {} bytes after the value", payload.len() - len)));
            }
            let value = rmpv::decode::read_value_ref(&mut &payload[..]).map_err(|e| bad(format!("msgpack: {e}")))?;
            display::write_msgpack(&mut out, &value, 0, &limits)
        }
        Serializer::Json => {
            let value = larder_format::json::parse(payload).map_err(|e| bad(format!("json: {e}")))?;
            display::write_json(&mut out, &value, 0, &limits)
        }
        Serializer::Text => {
            let text = std::str::from_utf8(payload).map_err(|e| bad(format!("text is not UTF-8: {e}")))?;
            display::write_str(&mut out, text);
            Ok(())
        }
        Serializer::Raw => {
            display::write_bytes(&mut out, payload);
            Ok(())
        }
    };
    written.and_then(|()| limits.check_final(&out)).map_err(|e| match e {
        display::DisplayError::TooDeep => bad(format!("value nested more than {} levels deep", display::MAX_DEPTH)),
        display::DisplayError::TooLarge => DecodeError::new(
            ErrorKind::TooLarge,
            "the value's display would exceed 16 characters per payload byte + 1 MiB",
        ),
    })?;
    Ok(out)
}

/// `ms (YYYY-MM-DDTHH:MM:SS.mmmZ)`, without the date past year 9999.
fn time_text(ms: u64) -> String {
    const LAST_MS_OF_9999: u64 = 253_402_300_799_999;
    if ms > LAST_MS_OF_9999 {
        return ms.to_string();
    }
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    format!("{ms} ({})", humantime::format_rfc3339_millis(time))
}
