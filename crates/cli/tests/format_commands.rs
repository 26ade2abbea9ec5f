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
