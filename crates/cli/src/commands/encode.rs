//! `larder encode`: stdin (text, bytes or a JSON document) to entry bytes on stdout (spec/CLI.md).

use base64::Engine;
use bytes::Bytes;
use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, ValueEnum};
use larder_format::json::{self, is_integer_text, msgpack_from_json, JsonNode};
use larder_format::{
    encode_response, encode_serialized, now_ms, Compressor, ContentEncoding, EncodeOptions, EntryMeta, HttpResponse,
    Kind, Serializer,
};

use crate::commands::read_stdin;
use crate::Failure;

/// Encode stdin as a larder entry, written to stdout.
///
/// With --serializer text, stdin's text (UTF-8) is stored verbatim, a trailing newline included; with raw,
/// stdin's bytes. With msgpack or json, stdin is one JSON document; with --kind response it is {"status": 200,
/// "headers": [["name", "value"], ...], "body": "...", "content_encoding": "identity"}.
#[derive(Args)]
pub struct EncodeArgs {
    /// How the value is serialized.
    #[arg(long, default_value = "msgpack", value_parser = names_of(Serializer::ALL, Serializer::name))]
    serializer: Serializer,
    /// Compressor to try; kept only if the payload is at least --threshold bytes and it shrinks.
    #[arg(long, default_value = "lz4", value_parser = names_of(Compressor::ALL, Compressor::name))]
    compressor: Compressor,
    /// Seconds until the entry expires (0 = never).
    #[arg(long, default_value_t = 0, value_name = "SECS")]
    ttl: u64,
    /// Seconds past expiry during which the entry may be served stale while it is recomputed.
    #[arg(long, default_value_t = 0, value_name = "SECS")]
    stale: u64,
    /// Creation time in ms since the Unix epoch (default: now).
    #[arg(long, value_name = "MS")]
    created_at: Option<u64>,
    /// Version string (a reader asking for another version treats the entry as a miss).
    #[arg(long = "version", value_name = "V")]
    entry_version: Option<String>,
    /// Tag for purge by tag; repeatable.
    #[arg(long = "tag", value_name = "T")]
    tags: Vec<String>,
    /// Compress only payloads of at least this many bytes.
    #[arg(long, default_value_t = larder_format::DEFAULT_COMPRESS_THRESHOLD, value_name = "BYTES")]
    threshold: usize,
    /// Compression level (zstd 1-22, brotli 0-11, gzip 0-9; ignored by lz4 and snappy).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    level: Option<i32>,
    /// What the document describes.
    #[arg(long, value_enum, default_value_t = KindArg::Value)]
    kind: KindArg,
    /// Read stdin as a JSON document with text and raw too: a JSON string, or for raw {"$base64": "..."}.
    #[arg(long)]
    json_input: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum KindArg {
    Value,
    Response,
}

/// A parser that accepts exactly the names of `all`, so that `--help` lists them as possible values.
fn names_of<T: std::str::FromStr<Err = String> + Clone + Send + Sync + 'static>(
    all: &'static [T],
    name: fn(T) -> &'static str,
) -> impl TypedValueParser<Value = T> {
    PossibleValuesParser::new(all.iter().cloned().map(name)).try_map(|text| text.parse::<T>())
}

pub fn run(args: EncodeArgs) -> Result<(), Failure> {
    let input = read_stdin()?;
    let created_at = args.created_at.unwrap_or_else(now_ms);
    let mut meta = EntryMeta::with_ttl(created_at, args.ttl.saturating_mul(1000));
    meta.stale_ms = args.stale.saturating_mul(1000);
    meta.version = args.entry_version;
    meta.tags = args.tags;
    let options = EncodeOptions {
        serializer: args.serializer,
        compressor: args.compressor,
        compress_threshold: args.threshold,
        level: args.level,
    };
    let entry = match args.kind {
        KindArg::Response => {
            if args.serializer != Serializer::MsgPack {
                return Err(Failure::input("--kind response needs --serializer msgpack"));
            }
            encode_response(&response_from_json(&json_document(&input)?)?, &meta, &options)?
        }
        KindArg::Value => {
            let payload = match args.serializer {
                Serializer::Text | Serializer::Raw if !args.json_input => verbatim_payload(input, args.serializer)?,
                serializer => serialized_payload(&json_document(&input)?, serializer)?,
            };
            encode_serialized(Kind::Value, args.serializer, &payload, &meta, &options)?
        }
    };
    crate::output::write_stdout(&entry)
}

/// Stdin as one JSON document. A map keeps the last value of a duplicate key, where the first one stood, as the
/// Python CLI's dict does.
fn json_document(input: &[u8]) -> Result<JsonNode, Failure> {
    Ok(json::parse(input)
        .map_err(|e| Failure::input(format!("stdin is not a JSON document: {e}")))?
        .without_duplicate_keys())
}

/// Stdin stored as it came, for text and raw: nothing is unwrapped or trimmed, not even a final newline.
fn verbatim_payload(input: Vec<u8>, serializer: Serializer) -> Result<Vec<u8>, Failure> {
    if serializer == Serializer::Text && std::str::from_utf8(&input).is_err() {
        return Err(Failure::input(NOT_UTF8_TEXT));
    }
    Ok(input)
}

/// The same words in every implementation (spec/CLI.md), with no byte offset, whose counting could differ.
const NOT_UTF8_TEXT: &str = "stdin is not UTF-8 text (--serializer text); use --serializer raw for other bytes";

/// The payload of a JSON document read with `--json-input` or for the msgpack and json serializers.
fn serialized_payload(document: &JsonNode, serializer: Serializer) -> Result<Vec<u8>, Failure> {
    Ok(match serializer {
        Serializer::MsgPack => {
            let mut out = Vec::new();
            msgpack_from_json(document, &mut out)?;
            out
        }
        Serializer::Json => {
            json::check_nesting(document)?;
            reject_non_finite(document)?;
            // Numbers as written: FORMAT.md §6 lets the JSON text differ between languages, not the values.
            document.to_compact_vec()
        }
        Serializer::Text => match document {
            JsonNode::String(text) => text.clone().into_bytes(),
            _ => return Err(Failure::input("--serializer text --json-input needs a JSON string on stdin")),
        },
        Serializer::Raw => {
            bytes_from_json(document, "--serializer raw --json-input needs a JSON string or {\"$base64\": ...}")?
        }
    })
}

/// JSON has no infinities: a number too large for a float64 cannot go into a json payload.
fn reject_non_finite(value: &JsonNode) -> Result<(), Failure> {
    match value {
        JsonNode::Number(text) if !is_integer_text(text) => {
            if text.parse::<f64>().is_ok_and(f64::is_finite) {
                Ok(())
            } else {
                Err(Failure::input(format!("the number {text} does not fit a float64")))
            }
        }
        JsonNode::Array(items) => items.iter().try_for_each(reject_non_finite),
        JsonNode::Object(pairs) => pairs.iter().try_for_each(|(_, item)| reject_non_finite(item)),
        _ => Ok(()),
    }
}

/// A JSON string's UTF-8 bytes, or the bytes of `{"$base64": "..."}`.
fn bytes_from_json(value: &JsonNode, what: &str) -> Result<Vec<u8>, Failure> {
    match value {
        JsonNode::String(text) => Ok(text.clone().into_bytes()),
        JsonNode::Object(pairs) if pairs.len() == 1 => match value.get("$base64") {
            Some(JsonNode::String(b64)) => base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map_err(|e| Failure::input(format!("bad base64: {e}"))),
            _ => Err(Failure::input(what)),
        },
        _ => Err(Failure::input(what)),
    }
}

fn response_from_json(document: &JsonNode) -> Result<HttpResponse, Failure> {
    let status = match document.get("status") {
        Some(JsonNode::Number(text)) if is_integer_text(text) => text.parse::<u16>().ok(),
        _ => None,
    };
    let status = status.ok_or_else(|| Failure::input("a response document needs an integer \"status\""))?;
    let mut headers = Vec::new();
    if let Some(list) = document.get("headers") {
        let pairs = list.as_array().ok_or_else(|| Failure::input("\"headers\" must be a list of [name, value]"))?;
        for pair in pairs {
            match pair.as_array() {
                Some([name, value]) => headers.push((
                    Bytes::from(bytes_from_json(name, "a header name must be a string")?),
                    Bytes::from(bytes_from_json(value, "a header value must be a string")?),
                )),
                _ => return Err(Failure::input("each header must be a [name, value] pair")),
            }
        }
    }
    let body = match document.get("body") {
        Some(body) => bytes_from_json(body, "\"body\" must be a string or {\"$base64\": ...}")?,
        None => Vec::new(),
    };
    let content_encoding = match document.get("content_encoding") {
        Some(JsonNode::String(name)) => name.parse::<ContentEncoding>().map_err(Failure::input)?,
        Some(_) => return Err(Failure::input("\"content_encoding\" must be a string")),
        None => ContentEncoding::Identity,
    };
    Ok(HttpResponse { status, headers, body: Bytes::from(body), content_encoding })
}
