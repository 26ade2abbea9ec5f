//! entries.json (spec/vectors/README.md): every entry decodes to its header and value; every case not marked
//! `decode_only` encodes to an entry that decodes the same, byte for byte the vector's when uncompressed. `bless`
//! rewrites the encoder-made `entry_hex` values after a deliberate format change (`LARDER_BLESS=1 cargo test -p
//! larder-conformance`).

use std::path::Path;

use base64::Engine;
use bytes::Bytes;
use larder_format::json::{self, is_integer_text, msgpack_from_json, JsonNode};
use larder_format::{
    decode_response, encode_response, encode_serialized, ContentEncoding, DecodeLimits, EncodeOptions, Entry,
    EntryMeta, HttpResponse, Kind, Serializer,
};
use serde_json::Value;

use crate::{cases, each, str_field, u64_field, Checked};

/// Every case of the file.
pub fn check(path: &Path) -> Checked {
    let doc = crate::load(path)?;
    let mut document = load_document(path)?;
    let cases = cases(&doc)?;
    let documents = case_documents(&mut document);
    if documents.len() != cases.len() {
        return Err("the file's cases and documents differ in number".into());
    }
    let documents: Vec<&JsonNode> = documents.into_iter().map(|d| &*d).collect();
    let next = std::cell::Cell::new(0usize);
    Ok(each(cases, |case| {
        let i = next.get();
        next.set(i + 1);
        check_case(case, documents[i]);
    }))
}

fn check_case(case: &Value, document: &JsonNode) {
    let name = str_field(case, "name");
    let expected = hex::decode(str_field(case, "entry_hex")).expect("hex");
    check_decodes(case, document, &expected);
    if case["decode_only"].as_bool() == Some(true) {
        return;
    }
    let ours = encode_case(case, document);
    check_decodes(case, document, &ours);
    if case["stored_compressor"] == "none" {
        assert_eq!(hex::encode(&ours), hex::encode(&expected), "{name}: bytes differ");
    }
}

/// Rewrites `entry_hex` (and `stored_compressor`) of every encoder-made case with what this encoder writes.
pub fn bless(path: &Path) -> Result<(), String> {
    let mut doc = crate::load(path)?;
    let mut document = load_document(path)?;
    let cases = doc["cases"].as_array_mut().ok_or("no cases")?;
    let documents = case_documents(&mut document);
    for (case, case_document) in cases.iter_mut().zip(documents) {
        let fixed = case["decode_only"].as_bool() == Some(true) || case["hand_written"].as_bool() == Some(true);
        if !fixed {
            let hex = hex::encode(encode_case(case, case_document));
            set_string(case_document, "entry_hex", &hex);
            case["entry_hex"] = Value::String(hex);
        }
        let bytes = hex::decode(str_field(case, "entry_hex")).map_err(|e| e.to_string())?;
        let stored = Entry::parse(&bytes).map_err(|e| e.to_string())?.header.compressor.name();
        set_string(case_document, "stored_compressor", stored);
    }
    // Written from the document, not the serde_json value, so that number texts stay as they are.
    let mut text = String::new();
    write_pretty(&document, 0, &mut text);
    text.push('\n');
    std::fs::write(path, text).map_err(|e| e.to_string())
}

/// A vector file as written: the documents of the cases' `value` fields keep their number texts (`-0.0`,
/// `1e+300`), which a `serde_json::Value` does not.
fn load_document(path: &Path) -> Result<JsonNode, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    json::parse(&bytes).map_err(|e| format!("{} is not JSON: {e:?}", path.display()))
}

fn b64(text: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.decode(text).expect("valid base64 in vectors")
}

fn meta_of(options: &Value) -> EntryMeta {
    EntryMeta {
        created_at: u64_field(options, "created_at"),
        expires_at: u64_field(options, "expires_at"),
        stale_ms: u64_field(options, "stale_ms"),
        version: options["version"].as_str().map(str::to_owned),
        tags: options["tags"].as_array().expect("tags").iter().map(|t| t.as_str().expect("tag").to_owned()).collect(),
    }
}

fn encode_options(options: &Value) -> EncodeOptions {
    EncodeOptions {
        serializer: str_field(options, "serializer").parse().expect("serializer"),
        compressor: str_field(options, "compressor").parse().expect("compressor"),
        compress_threshold: u64_field(options, "threshold") as usize,
        level: options["level"].as_i64().map(|l| l as i32),
    }
}

fn header_bytes(v: &Value) -> Bytes {
    match v {
        Value::String(s) => Bytes::from(s.clone().into_bytes()),
        other => Bytes::from(b64(str_field(other, "$base64"))),
    }
}

fn response_of(case: &Value) -> HttpResponse {
    let r = &case["response"];
    HttpResponse {
        status: u64_field(r, "status") as u16,
        headers: r["headers"]
            .as_array()
            .expect("headers")
            .iter()
            .map(|pair| (header_bytes(&pair[0]), header_bytes(&pair[1])))
            .collect(),
        body: Bytes::from(b64(str_field(r, "body_base64"))),
        content_encoding: str_field(r, "content_encoding").parse::<ContentEncoding>().expect("encoding"),
    }
}

/// The document in a case's `value` field, as written.
fn value_of(case: &JsonNode) -> &JsonNode {
    case.get("value").expect("the case has a value")
}

/// The serialized payload a case's value should have, before compression.
fn serialized_value(case: &Value, document: &JsonNode, serializer: Serializer) -> Vec<u8> {
    match serializer {
        Serializer::MsgPack => {
            let mut out = Vec::new();
            msgpack_from_json(value_of(document), &mut out).expect("value encodes");
            out
        }
        Serializer::Json => value_of(document).to_compact_vec(),
        Serializer::Text => str_field(case, "value_text").as_bytes().to_vec(),
        Serializer::Raw => b64(str_field(case, "value_base64")),
    }
}

fn encode_case(case: &Value, document: &JsonNode) -> Vec<u8> {
    let options = &case["options"];
    let meta = meta_of(options);
    let opts = encode_options(options);
    if str_field(case, "kind") == "response" {
        encode_response(&response_of(case), &meta, &opts).expect("response encodes")
    } else {
        let payload = serialized_value(case, document, opts.serializer);
        encode_serialized(Kind::Value, opts.serializer, &payload, &meta, &opts).expect("value encodes")
    }
}

/// Numbers compare by value (the vector's `1e+300` and a decoder's `1e300` are the same float; an integer is never
/// equal to a float), everything else structurally, map order and duplicate keys included.
fn json_equal(a: &JsonNode, b: &JsonNode) -> bool {
    match (a, b) {
        (JsonNode::Number(xs), JsonNode::Number(ys)) => match (is_integer_text(xs), is_integer_text(ys)) {
            (true, true) => xs.parse::<i128>().ok() == ys.parse::<i128>().ok(),
            (false, false) => xs.parse::<f64>().ok().map(f64::to_bits) == ys.parse::<f64>().ok().map(f64::to_bits),
            _ => false,
        },
        (JsonNode::Array(x), JsonNode::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_equal(a, b))
        }
        (JsonNode::Object(x), JsonNode::Object(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|((ka, va), (kb, vb))| ka == kb && json_equal(va, vb))
        }
        _ => a == b,
    }
}

/// Decodes `bytes` and checks header and value against the case.
fn check_decodes(case: &Value, document: &JsonNode, bytes: &[u8]) {
    let name = str_field(case, "name");
    let options = &case["options"];
    let limits = DecodeLimits::default();
    let entry = Entry::parse(bytes).unwrap_or_else(|e| panic!("{name}: header: {e}"));
    assert_eq!(entry.header.meta(), meta_of(options), "{name}: metadata");
    assert_eq!(entry.header.kind.name(), str_field(case, "kind"), "{name}: kind");
    assert_eq!(entry.header.serializer.name(), str_field(options, "serializer"), "{name}: serializer");
    if let Some(stored) = case["stored_compressor"].as_str() {
        assert_eq!(entry.header.compressor.name(), stored, "{name}: stored compressor");
    }
    if str_field(case, "kind") == "response" {
        let (_, response) = decode_response(&Bytes::copy_from_slice(bytes), &limits).expect("response decodes");
        assert_eq!(response, response_of(case), "{name}: response");
        return;
    }
    let payload = entry.payload(&limits).unwrap_or_else(|e| panic!("{name}: payload: {e}"));
    match entry.header.serializer {
        Serializer::MsgPack => {
            let decoded: Value = rmp_serde::from_slice(&payload).expect("msgpack decodes");
            let decoded = JsonNode::from(&decoded);
            let expected = value_of(document);
            assert!(json_equal(&decoded, expected), "{name}: value {decoded} != {expected}");
        }
        Serializer::Json => {
            let decoded = json::parse(&payload).expect("json decodes");
            assert!(json_equal(&decoded, value_of(document)), "{name}: value");
        }
        Serializer::Text => assert_eq!(std::str::from_utf8(&payload).ok(), case["value_text"].as_str(), "{name}"),
        Serializer::Raw => assert_eq!(&payload[..], &b64(str_field(case, "value_base64"))[..], "{name}: bytes"),
    }
}

/// The cases of a vector file, as documents.
fn case_documents(document: &mut JsonNode) -> Vec<&mut JsonNode> {
    let JsonNode::Object(pairs) = document else { panic!("the vector file is an object") };
    match pairs.iter_mut().find(|(key, _)| key == "cases") {
        Some((_, JsonNode::Array(cases))) => cases.iter_mut().collect(),
        _ => panic!("the vector file has a list of cases"),
    }
}

/// Sets the string field `key` of an object, adding it at the end if it is missing.
fn set_string(object: &mut JsonNode, key: &str, value: &str) {
    let JsonNode::Object(pairs) = object else { panic!("a case is an object") };
    match pairs.iter_mut().find(|(k, _)| k == key) {
        Some((_, slot)) => *slot = JsonNode::String(value.to_owned()),
        None => pairs.push((key.to_owned(), JsonNode::String(value.to_owned()))),
    }
}

/// `serde_json::to_string_pretty`'s layout (two-space indent, `": "`, empty containers as `[]` and `{}`), with
/// numbers as written.
fn write_pretty(node: &JsonNode, indent: usize, out: &mut String) {
    let open_close =
        |out: &mut String, items: usize, open: char, close: char, item: &mut dyn FnMut(&mut String, usize)| {
            out.push(open);
            if items == 0 {
                out.push(close);
                return;
            }
            for i in 0..items {
                out.push_str(if i > 0 { ",\n" } else { "\n" });
                out.push_str(&" ".repeat(indent + 2));
                item(out, i);
            }
            out.push('\n');
            out.push_str(&" ".repeat(indent));
            out.push(close);
        };
    match node {
        JsonNode::Array(items) => {
            open_close(out, items.len(), '[', ']', &mut |out, i| write_pretty(&items[i], indent + 2, out));
        }
        JsonNode::Object(pairs) => open_close(out, pairs.len(), '{', '}', &mut |out, i| {
            out.push_str(&JsonNode::String(pairs[i].0.clone()).to_string());
            out.push_str(": ");
            write_pretty(&pairs[i].1, indent + 2, out);
        }),
        scalar => out.push_str(&scalar.to_string()),
    }
}
