//! The `encode`, `inspect` and `key` commands, run as a user runs them: exit statuses, output forms (for programs
//! and for a person on a terminal), and entries that survive encode → inspect.

use std::io::Write;
use std::process::{Command, Output, Stdio};

mod support;

/// Overrides terminal detection in `inspect` (spec/CLI.md).
const FORCE_TTY: &str = "LARDER_FORCE_TTY";

fn larder(args: &[&str], stdin: &[u8]) -> Output {
    larder_with(args, stdin, None)
}

/// `larder ARGS` with stdout a pipe; `force_tty` sets LARDER_FORCE_TTY, which is otherwise removed so that the
/// caller's environment cannot change what the tests see.
fn larder_with(args: &[&str], stdin: &[u8], force_tty: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_larder"));
    match force_tty {
        Some(value) => command.env(FORCE_TTY, value),
        None => command.env_remove(FORCE_TTY),
    };
    let mut child = command
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("larder starts");
    // A command that does not read its input (--help) may exit before the write: a broken pipe is not a failure.
    if let Err(e) = child.stdin.take().expect("stdin").write_all(stdin) {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "stdin written: {e}");
    }
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
    assert_eq!(larder(&["encode", "--serializer", "text", "--json-input"], b"[1]").status.code(), Some(2));
    assert_eq!(larder(&["encode"], b"18446744073709551616").status.code(), Some(2));
    assert_eq!(larder(&["encode", "--serializer", "bogus"], b"1").status.code(), Some(2));
}

#[test]
fn raw_values_take_base64_and_show_non_utf8_as_base64() {
    let entry = larder(&["encode", "--serializer", "raw", "--json-input"], br#"{"$base64":"/wA="}"#);
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
    let raw = larder(
        &["encode", "--serializer", "raw", "--json-input", "--created-at", "0"],
        br#"{"$base64":"!!","$base64":"/wA="}"#,
    );
    assert_eq!(payload_of(&raw), b"\xff\x00");
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
    // The help names the commands (its layout and headings are clap's).
    let listed = stdout(&help);
    assert!(["encode", "inspect", "key", "serve", "store"].iter().all(|c| listed.contains(c)), "{listed}");
    assert!(help.stderr.is_empty());
}

#[test]
fn text_and_raw_store_stdin_verbatim() {
    // A final newline, a byte order mark, JSON-looking text: all kept, nothing unwrapped or trimmed.
    for text in [&b"h\xc3\xa9llo\n"[..], b"\xef\xbb\xbfbom", b"\"quoted\"\n", b"", b"\n\n"] {
        assert_eq!(payload_of(&encode_bare("text", text)), text);
    }
    for bytes in [&b"\xff\x00{"[..], br#"{"$base64":"/wA="}"#, b"", b"\r\n"] {
        assert_eq!(payload_of(&encode_bare("raw", bytes)), bytes);
    }
    let out = larder(&["inspect", "--json"], &encode_bare("text", b"line\n").stdout);
    assert!(stdout(&out).ends_with(",\"value\":\"line\\n\"}\n"), "{}", stdout(&out));
}

#[test]
fn text_refuses_stdin_that_is_not_utf8_in_one_line() {
    // A lone 0xff, a surrogate (ED A0 80), an overlong '/' (C0 AF), a sequence cut short.
    for stdin in [&b"ok\xff"[..], b"\xed\xa0\x80", b"\xc0\xaf", b"\xe2\x82"] {
        let out = encode_bare("text", stdin);
        assert_eq!(out.status.code(), Some(2));
        assert!(out.stdout.is_empty());
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "larder: stdin is not UTF-8 text (--serializer text); use --serializer raw for other bytes\n"
        );
    }
}

#[test]
fn json_input_keeps_the_json_forms_of_text_and_raw() {
    let bare_json = |serializer: &str, stdin: &[u8]| {
        larder(
            &["encode", "--serializer", serializer, "--json-input", "--compressor", "none", "--created-at", "0"],
            stdin,
        )
    };
    assert_eq!(payload_of(&bare_json("text", br#""h\u00e9llo""#)), "héllo".as_bytes());
    assert_eq!(payload_of(&bare_json("raw", br#"{"$base64":"/wA="}"#)), b"\xff\x00");
    assert_eq!(payload_of(&bare_json("raw", br#""text""#)), b"text");
    assert_eq!(bare_json("text", b"hello").status.code(), Some(2), "not a JSON document");
    assert_eq!(bare_json("raw", b"[1]").status.code(), Some(2));
    // With msgpack it changes nothing: the document is JSON anyway.
    assert_eq!(payload_of(&bare_json("msgpack", b"[1]")), b"\x91\x01");
}

/// The human form's first lines for an entry encoded with `--created-at 0` and no optional header fields.
fn human_head(serializer: &str, kind: &str, stored: usize, payload: usize) -> String {
    format!(
        "format:      1\nkind:        {kind}\nserializer:  {serializer}\ncompressor:  none\n\
         created_at:  0 (1970-01-01T00:00:00.000Z)\nexpires_at:  never\nstale_ms:    0\nversion:     (none)\n\
         tags:        (none)\nsize:        {stored} bytes stored, {payload} bytes payload\n"
    )
}

fn encode_response(document: &[u8]) -> Vec<u8> {
    let out = larder(&["encode", "--kind", "response", "--compressor", "none", "--created-at", "0"], document);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

#[test]
fn inspect_body_prints_a_response_body_as_stored_after_an_empty_line() {
    // A gzip content coding is not undone: the stored bytes are printed, not UTF-8 and no newline added.
    let entry = encode_response(
        br#"{"status":200,"headers":[["content-type","text/plain"]],"body":{"$base64":"/wBoaQ=="},"content_encoding":"gzip"}"#,
    );
    let out = larder(&["inspect", "--body"], &entry);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut expected = human_head("msgpack", "response", 65, 42).into_bytes();
    expected.extend_from_slice(
        b"status:      200\nencoding:    gzip\nheader:      content-type: text/plain\nbody:        4 bytes\n\n\xff\x00hi",
    );
    assert_eq!(out.stdout, expected);
    // The JSON form always holds the whole body: --body changes nothing there.
    let json = larder(&["inspect", "--json", "--body"], &entry);
    assert!(stdout(&json).ends_with("\"content_encoding\":\"gzip\",\"body\":{\"$base64\":\"/wBoaQ==\"}}}\n"));
    assert_eq!(json.stdout, larder(&["inspect", "--json"], &entry).stdout);
}

#[test]
fn inspect_body_of_a_value_prints_its_decompressed_payload() {
    let out = larder(&["inspect", "--body"], &encode_bare("text", b"hi").stdout);
    let expected = human_head("text", "value", 25, 2) + "value:       \"hi\"\n\nhi";
    assert_eq!(stdout(&out), expected);
    // A compressed msgpack value: the MessagePack bytes, decompressed.
    let document = format!("[{}]", vec!["1"; 2000].join(","));
    let entry = larder(&["encode", "--compressor", "zstd", "--threshold", "0"], document.as_bytes());
    assert!(entry.stdout.len() < 500, "stored compressed");
    let out = larder(&["inspect", "--body"], &entry.stdout);
    let mut msgpack = vec![0xdc, 0x07, 0xd0];
    msgpack.extend(std::iter::repeat_n(0x01, 2000));
    assert!(out.stdout.ends_with(&[b"\n\n".as_slice(), &msgpack].concat()), "ends with the payload");
}

#[test]
fn inspect_cuts_long_texts_on_a_terminal_unless_full() {
    let text = "x".repeat(300);
    let entry = encode_bare("text", text.as_bytes()).stdout;
    let cut_line = format!("value:       \"{}… (102 more characters)\n", "x".repeat(199));
    let out = larder_with(&["inspect"], &entry, Some("1"));
    assert_eq!(stdout(&out), human_head("text", "value", 323, 300) + &cut_line);
    let whole_line = format!("value:       \"{text}\"\n");
    for (args, tty) in [(&["inspect", "--full"][..], Some("1")), (&["inspect"], Some("0")), (&["inspect"], None)] {
        assert_eq!(stdout(&larder_with(args, &entry, tty)), human_head("text", "value", 323, 300) + &whole_line);
    }
    // Never in the JSON form.
    let json = larder_with(&["inspect", "--json"], &entry, Some("1"));
    assert!(stdout(&json).ends_with(&format!("\"value\":\"{text}\"}}\n")), "{}", stdout(&json));
}

#[test]
fn inspect_cuts_headers_and_bodies_on_a_terminal_and_counts_characters() {
    let document =
        format!(r#"{{"status":200,"headers":[["x-long","{}"]],"body":"{}"}}"#, "v".repeat(300), "b".repeat(250));
    let entry = encode_response(document.as_bytes());
    let out = larder_with(&["inspect", "--body"], &entry, Some("1"));
    let expected = human_head("msgpack", "response", 600, 577)
        + "status:      200\nencoding:    identity\n"
        + &format!("header:      x-long: {}… (108 more characters)\n", "v".repeat(192))
        + "body:        250 bytes\n\n"
        + &format!("{}… (50 more characters)\n", "b".repeat(200));
    assert_eq!(stdout(&out), expected);
    // Two-byte characters: cut after 200 characters (quotes included), not 200 bytes; one is "character".
    let entry = encode_bare("raw", "é".repeat(200).as_bytes()).stdout;
    let out = larder_with(&["inspect"], &entry, Some("1"));
    assert!(stdout(&out).ends_with(&format!("value:       \"{}… (2 more characters)\n", "é".repeat(199))));
    let entry = encode_bare("text", "é".repeat(199).as_bytes()).stdout;
    let out = larder_with(&["inspect", "--body"], &entry, Some("1"));
    assert!(stdout(&out).ends_with(&format!("\"{}… (1 more character)\n\n{}\n", "é".repeat(199), "é".repeat(199))));
}

#[test]
fn inspect_on_a_terminal_shows_binary_bodies_as_base64_and_ends_the_line() {
    let entry = encode_response(br#"{"status":200,"body":{"$base64":"/wA="}}"#);
    let head =
        human_head("msgpack", "response", 40, 17) + "status:      200\nencoding:    identity\nbody:        2 bytes\n\n";
    for args in [&["inspect", "--body"][..], &["inspect", "--body", "--full"]] {
        assert_eq!(stdout(&larder_with(args, &entry, Some("1"))), head.clone() + "{\"$base64\":\"/wA=\"}\n");
    }
    let piped = larder_with(&["inspect", "--body"], &entry, Some("0"));
    assert_eq!(piped.stdout, [head.as_bytes(), b"\xff\x00"].concat());
    // A body that ends with a newline gets no second one; an empty body nothing at all.
    let entry = encode_response(br#"{"status":200,"body":"ok\n"}"#);
    assert!(stdout(&larder_with(&["inspect", "--body"], &entry, Some("1"))).ends_with("3 bytes\n\nok\n"));
    let entry = encode_response(br#"{"status":204}"#);
    assert!(stdout(&larder_with(&["inspect", "--body"], &entry, Some("1"))).ends_with("0 bytes\n\n"));
}

/// A real terminal, through `script` (util-linux), without LARDER_FORCE_TTY: `inspect` must notice it itself.
#[test]
fn inspect_detects_a_real_terminal() {
    let dir = std::env::temp_dir().join(format!("larder-tty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("long.entry");
    std::fs::write(&file, encode_bare("text", "x".repeat(300).as_bytes()).stdout).expect("entry written");
    let command = format!("'{}' inspect '{}'", env!("CARGO_BIN_EXE_larder"), file.display());
    let run = Command::new("script").args(["-q", "-e", "-c", &command, "/dev/null"]).env_remove(FORCE_TTY).output();
    let _ = std::fs::remove_dir_all(&dir);
    let Ok(out) = run else {
        eprintln!("skipped: `script` (util-linux) is not installed");
        return;
    };
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // The terminal turns each \n into \r\n.
    let shown = stdout(&out).replace("\r\n", "\n");
    assert!(shown.ends_with(&format!("value:       \"{}… (102 more characters)\n", "x".repeat(199))), "{shown}");
}

#[test]
fn help_lists_the_accepted_values_of_every_option_with_a_fixed_set() {
    let help = stdout(&larder(&["encode", "--help"], b""));
    for (option, values) in [
        ("--serializer", &["raw", "msgpack", "json", "text"][..]),
        ("--compressor", &["none", "lz4", "snappy", "zstd", "brotli", "gzip"][..]),
        ("--kind", &["value", "response"][..]),
    ] {
        assert!(support::lists_values(&help, option, values), "{option}: {values:?} missing from\n{help}");
    }
    let help = stdout(&larder(&["bench", "hit-ratio", "--help"], b""));
    assert!(support::lists_values(&help, "--format", &["arc", "lirs", "cache2k", "oracle-general"]), "{help}");
    // An unknown value is still a one-line usage error, larder's, naming the value and the option (in clap's words).
    let out = larder(&["encode", "--serializer", "yaml"], b"1");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("larder: ") && err.contains("yaml") && err.contains("--serializer"), "{err}");
    assert_eq!(err.lines().count(), 1);
}
