//! The `encode`, `inspect` and `key` commands, run as a user runs them: exit statuses, output forms, and entries
//! that survive encode → inspect.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn larder(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_larder"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("larder starts");
    child.stdin.take().expect("stdin").write_all(stdin).expect("stdin written");
    child.wait_with_output().expect("larder finishes")
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("utf-8 output")
}

#[test]
fn encode_writes_the_worked_example_of_the_spec() {
    let out = larder(
        &["encode", "--created-at", "1700000000000", "--ttl", "60", "--version", "v1", "--tag", "user:7"],
        br#"{"id":7,"name":"Ada"}"#,
    );
    assert!(out.status.success());
    let expected = "c14c0100010006\
        0068e5cf8b010000\
        6052e6cf8b010000\
        02007631\
        0100\
        0600757365723a37\
        82a2696407a46e616d65a3416461";
    assert_eq!(out.stdout.iter().map(|b| format!("{b:02x}")).collect::<String>(), expected);
}

#[test]
fn inspect_json_reports_every_field_after_encode() {
    let doc = br#"{"list":[1,-2,3.5,"x",null,true],"nested":{"b":1,"a":2}}"#;
    let entry = larder(
        &[
            "encode",
            "--created-at",
            "5",
            "--ttl",
            "2",
            "--stale",
            "3",
            "--tag",
            "a",
            "--tag",
            "b",
            "--compressor",
            "zstd",
            "--threshold",
            "0",
        ],
        doc,
    );
    assert!(entry.status.success());
    let out = larder(&["inspect", "--json"], &entry.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("inspect --json prints JSON");
    assert_eq!(report["created_at"], 5);
    assert_eq!(report["expires_at"], 2005);
    assert_eq!(report["stale_ms"], 3000);
    assert_eq!(report["tags"], serde_json::json!(["a", "b"]));
    assert_eq!(report["version"], serde_json::Value::Null);
    assert_eq!(report["stored_bytes"].as_u64(), Some(entry.stdout.len() as u64));
    // Display JSON keeps the document's key order and number forms.
    let value = stdout(&out);
    assert!(
        value.trim_end().ends_with(r#""value":{"list":[1,-2,3.5,"x",null,true],"nested":{"b":1,"a":2}}}"#),
        "{value}"
    );
}

#[test]
fn inspect_refuses_invalid_entries_with_status_1_and_the_kind() {
    let out = larder(&["inspect"], b"\xc1\x4c\x02rest");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("larder: invalid entry: unsupported_version: "), "{err}");
    assert_eq!(err.lines().count(), 1);
}

#[test]
fn encode_refuses_bad_input_with_status_2() {
    assert_eq!(larder(&["encode"], b"{not json").status.code(), Some(2));
    assert_eq!(larder(&["encode", "--serializer", "text"], b"[1]").status.code(), Some(2));
    assert_eq!(larder(&["encode"], b"18446744073709551616").status.code(), Some(2));
    assert_eq!(larder(&["encode", "--serializer", "bogus"], b"1").status.code(), Some(2));
}

#[test]
fn raw_values_take_base64_and_show_non_utf8_as_base64() {
    let entry = larder(&["encode", "--serializer", "raw"], br#"{"$base64":"/wA="}"#);
    assert!(entry.status.success());
    let out = larder(&["inspect", "--json"], &entry.stdout);
    assert!(stdout(&out).contains(r#""value":{"$base64":"/wA="}"#), "{}", stdout(&out));
}

#[test]
fn response_documents_round_trip_through_inspect() {
    let doc = br#"{"status":301,"headers":[["location","/new"],["set-cookie","a=1"],["set-cookie","b=2"]]}"#;
    let entry = larder(&["encode", "--kind", "response"], doc);
    assert!(entry.status.success());
    let human = stdout(&larder(&["inspect"], &entry.stdout));
    assert!(human.contains("status:      301\n"), "{human}");
    assert!(human.contains("header:      set-cookie: a=1\nheader:      set-cookie: b=2\n"), "{human}");
    assert!(human.ends_with("body:        0 bytes\n"), "{human}");
}

#[test]
fn key_prints_the_spec_example_and_refuses_relative_urls() {
    let out = larder(
        &["key", "https://Shop.Example:443/p/42?utm_source=news&b=2&a=1&gclid=x#top", "--namespace", "www"],
        b"",
    );
    assert_eq!(stdout(&out), "www:GET:https://shop.example/p/42?a=1&b=2\n");
    let out = larder(&["key", "http://x/?utm_a=1&s=2", "--no-default-drops", "--drop", "s"], b"");
    assert_eq!(stdout(&out), "GET:http://x/?utm_a=1\n");
    assert_eq!(larder(&["key", "/relative"], b"").status.code(), Some(2));
}

/// The payload of an entry written without optional header fields (23-byte header), below the compression
/// threshold.
fn payload_of(entry: &Output) -> &[u8] {
    assert!(entry.status.success(), "{}", String::from_utf8_lossy(&entry.stderr));
    assert_eq!(entry.stdout[5], 0, "stored uncompressed");
    &entry.stdout[23..]
}

fn encode_bare(serializer: &str, document: &[u8]) -> Output {
    larder(&["encode", "--serializer", serializer, "--compressor", "none", "--created-at", "0"], document)
}

/// A json-serializer entry holding `payload` as is, as no encoder would write it.
fn json_entry(payload: &[u8]) -> Vec<u8> {
    let mut entry = vec![0xc1, 0x4c, 1, 0, 2, 0, 0];
    entry.extend_from_slice(&[0; 16]);
    entry.extend_from_slice(payload);
    entry
}

/// The key serde_json's `arbitrary_precision` uses for numbers internally: documents holding it are ordinary maps.
const MAGIC: &str = "$serde_json::private::Number";

#[test]
fn a_map_keyed_like_serde_json_internals_encodes_as_a_map() {
    let document = format!(r#"{{"{MAGIC}":"1"}}"#);
    let mut expected = vec![0x81, 0xbc];
    expected.extend_from_slice(MAGIC.as_bytes());
    expected.extend_from_slice(&[0xa1, b'1']);
    assert_eq!(payload_of(&encode_bare("msgpack", document.as_bytes())), &expected[..], "a map, not the integer 1");
    assert_eq!(payload_of(&encode_bare("json", document.as_bytes())), document.as_bytes());
    // And inspect shows what was stored, from either serializer.
    for serializer in ["msgpack", "json"] {
        let out = larder(&["inspect", "--json"], &encode_bare(serializer, document.as_bytes()).stdout);
        assert!(stdout(&out).ends_with(&format!(",\"value\":{document}}}\n")), "{}", stdout(&out));
    }
}

#[test]
fn a_json_payload_keyed_like_serde_json_internals_displays_as_a_map() {
    for (payload, shown) in [
        (format!(r#"{{"{MAGIC}":"1"}}"#), format!(r#"{{"{MAGIC}":"1"}}"#)),
        (format!(r#"{{"{MAGIC}":"abc"}}"#), format!(r#"{{"{MAGIC}":"abc"}}"#)),
        (format!(r#"[{{ "{MAGIC}" : 2 , "{MAGIC}":-0 }}]"#), format!(r#"[{{"{MAGIC}":2,"{MAGIC}":0}}]"#)),
    ] {
        let entry = json_entry(payload.as_bytes());
        let out = larder(&["inspect", "--json"], &entry);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout(&out).ends_with(&format!(",\"value\":{shown}}}\n")), "{}", stdout(&out));
        let human = stdout(&larder(&["inspect"], &entry));
        assert!(human.ends_with(&format!("value:       {shown}\n")), "{human}");
    }
}

#[test]
fn encode_keeps_the_last_of_duplicate_keys_where_the_first_stood() {
    // As a Python dict (and the Python CLI) reads the document, at every level.
    let document = br#"{"a":1,"b":{"x":1,"x":2},"a":3}"#;
    let mut expected = vec![0x82, 0xa1, b'a', 0x03, 0xa1, b'b', 0x81, 0xa1, b'x', 0x02];
    assert_eq!(payload_of(&encode_bare("msgpack", document)), &expected[..]);
    assert_eq!(payload_of(&encode_bare("json", document)), br#"{"a":3,"b":{"x":2}}"#);
    // What a later duplicate replaces is not checked for depth: only the value kept counts.
    let deep = format!(r#"{{"a":{}1{},"a":1}}"#, "[".repeat(150), "]".repeat(150));
    expected = vec![0x81, 0xa1, b'a', 0x01];
    assert_eq!(payload_of(&encode_bare("msgpack", deep.as_bytes())), &expected[..]);
    // Raw and response documents too.
    assert_eq!(payload_of(&encode_bare("raw", br#"{"$base64":"!!","$base64":"/wA="}"#)), b"\xff\x00");
    let response = larder(&["encode", "--kind", "response"], br#"{"status":200,"headers":[],"status":404}"#);
    assert!(stdout(&larder(&["inspect"], &response.stdout)).contains("status:      404\n"));
}

#[test]
fn encode_keeps_number_texts_in_json_payloads_and_types_them_by_text_in_msgpack() {
    let document = b"[-0,1E2,1.50,12345678901234567890,123456789012345678901234567890]";
    assert_eq!(payload_of(&encode_bare("json", document)), document);
    let msgpack = payload_of(&encode_bare("msgpack", b"[-0,1E2,1.0,12345678901234567890]")).to_vec();
    let expected = "9400cb4059000000000000cb3ff0000000000000cfab54a98ceb1f0ad2";
    assert_eq!(msgpack.iter().map(|b| format!("{b:02x}")).collect::<String>(), expected);
    let out = encode_bare("msgpack", b"[123456789012345678901234567890]");
    assert_eq!(out.status.code(), Some(2), "integers past 64 bits are refused, not rounded");
}

#[test]
fn encode_refuses_documents_nested_past_the_parser_guard_in_one_line() {
    for depth in [1001, 100_000] {
        let out = encode_bare("msgpack", format!("{}{}", "[".repeat(depth), "]".repeat(depth)).as_bytes());
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with("larder: stdin is not a JSON document: "), "{err}");
        assert_eq!(err.lines().count(), 1);
    }
}

#[test]
fn no_subcommand_is_a_one_line_usage_error_and_help_still_prints() {
    let out = larder(&[], b"");
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert_eq!(String::from_utf8_lossy(&out.stderr), "larder: a subcommand is required (see --help)\n");
    let help = larder(&["--help"], b"");
    assert_eq!(help.status.code(), Some(0));
    assert!(stdout(&help).contains("Usage: larder"), "{}", stdout(&help));
    assert!(help.stderr.is_empty());
}
