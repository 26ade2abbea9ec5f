//! The JSON document type of spec/FORMAT.md §2: the parser (numbers as text, duplicate keys kept, strict RFC 8259,
//! bounded recursion), the canonical MessagePack written from it, the compact writer, and the nesting limit.

use larder_format::json::{check_nesting, msgpack_from_json, parse, JsonNode, MAX_NESTING, MAX_PARSE_DEPTH};
use proptest::prelude::*;

fn num(text: &str) -> JsonNode {
    JsonNode::Number(text.to_owned())
}

fn string(text: &str) -> JsonNode {
    JsonNode::String(text.to_owned())
}

fn parsed(text: &str) -> JsonNode {
    parse(text.as_bytes()).unwrap_or_else(|e| panic!("{text:?} parses: {e}"))
}

fn msgpack_hex(document: &JsonNode) -> String {
    let mut out = Vec::new();
    msgpack_from_json(document, &mut out).expect("encodes");
    hex::encode(out)
}

#[test]
fn numbers_keep_their_text() {
    let texts = ["-0", "0", "1E2", "1e2", "-0.0", "1.50", "0e0", "12345678901234567890", "-1.5e-300", "1E400"];
    let document = parsed(&format!("[{}]", texts.join(" , ")));
    assert_eq!(document, JsonNode::Array(texts.iter().map(|t| num(t)).collect()));
    // The compact writer gives the texts back unchanged.
    assert_eq!(document.to_compact_vec(), format!("[{}]", texts.join(",")).into_bytes());
}

#[test]
fn numbers_become_canonical_msgpack_by_their_text() {
    let cases = [
        ("-0", "00"), // the integer 0, not the float -0.0
        ("0", "00"),
        ("-0.0", "cb8000000000000000"), // a float
        ("1E2", "cb4059000000000000"),  // an exponent makes a float
        ("1.0", "cb3ff0000000000000"),
        ("127", "7f"),
        ("-33", "d0df"),
        ("12345678901234567890", "cfab54a98ceb1f0ad2"), // 20 digits, still a u64
        ("18446744073709551615", "cfffffffffffffffff"),
        ("-9223372036854775808", "d38000000000000000"),
        ("1E400", "cb7ff0000000000000"), // beyond float64: infinity
    ];
    for (text, expected) in cases {
        assert_eq!(msgpack_hex(&parsed(text)), expected, "{text}");
    }
    for text in ["18446744073709551616", "99999999999999999999", "-9223372036854775809"] {
        let err = msgpack_from_json(&parsed(text), &mut Vec::new()).expect_err(text);
        assert!(err.to_string().contains("outside the MessagePack range"), "{text}: {err}");
    }
}

#[test]
fn integers_of_any_length_parse() {
    let long = format!("-{}", "9".repeat(5000));
    assert_eq!(parsed(&long), num(&long));
    let float = format!("{}.5", "1".repeat(5000));
    assert_eq!(parsed(&float), num(&float));
}

#[test]
fn duplicate_keys_are_kept_in_order() {
    let text = r#"{"a":1,"b":2,"a":3,"":0,"":{"":[]}}"#;
    let document = parsed(text);
    assert_eq!(
        document,
        JsonNode::Object(vec![
            ("a".into(), num("1")),
            ("b".into(), num("2")),
            ("a".into(), num("3")),
            ("".into(), num("0")),
            ("".into(), JsonNode::Object(vec![("".into(), JsonNode::Array(vec![]))])),
        ])
    );
    assert_eq!(document.to_compact_vec(), text.as_bytes());
    assert_eq!(document.get("a"), Some(&num("3")), "get gives the last of duplicates");
    assert_eq!(document.get("missing"), None);
    // MessagePack keeps every pair too: a map of 5.
    assert!(msgpack_hex(&document).starts_with("85a16101a16202a16103"));
}

#[test]
fn without_duplicate_keys_keeps_the_last_value_at_the_first_position() {
    // What Python's dict and serde_json's preserve_order map make of the same document, at every level.
    let document = parsed(r#"[{"x":{"k":1,"k":2},"y":0,"x":{"k":3,"j":[{"z":1,"z":2}]}},{"a":1,"a":[{"b":1,"b":2}]}]"#);
    let expected = parsed(r#"[{"x":{"k":3,"j":[{"z":2}]},"y":0},{"a":[{"b":2}]}]"#);
    assert_eq!(document.without_duplicate_keys(), expected);
    let unique = parsed(r#"{"b":1,"a":{"c":2}}"#);
    assert_eq!(unique.clone().without_duplicate_keys(), unique);
}

#[test]
fn escapes_and_surrogate_pairs_decode() {
    let document = parsed(r#""\"\\\/\b\f\n\r\t\u00e9\u00C9\ud83c\udf5e\uD83C\uDF5E\u0000\u001f\u2028é🍞""#);
    let expected = "\"\\/\u{8}\u{c}\n\r\t\u{e9}\u{c9}\u{1f35e}\u{1f35e}\u{0}\u{1f}\u{2028}é🍞";
    assert_eq!(document, string(expected));
    // Written back the way serde_json and Python's json.dumps(ensure_ascii=False) write it.
    assert_eq!(
        String::from_utf8(document.to_compact_vec()).expect("UTF-8"),
        "\"\\\"\\\\/\\b\\f\\n\\r\\t\u{e9}\u{c9}\u{1f35e}\u{1f35e}\\u0000\\u001f\u{2028}é🍞\""
    );
    assert_eq!(string("\u{7f}\u{1}").to_compact_vec(), "\"\u{7f}\\u0001\"".as_bytes());
}

#[test]
fn the_serde_json_number_key_is_an_ordinary_object() {
    for text in [r#"{"$serde_json::private::Number":"1"}"#, r#"{"$serde_json::private::Number":"abc"}"#] {
        let document = parsed(text);
        let JsonNode::Object(pairs) = &document else { panic!("{text} is an object, not {document:?}") };
        assert_eq!(pairs.len(), 1);
        assert_eq!(pairs[0].0, "$serde_json::private::Number");
        assert!(matches!(pairs[0].1, JsonNode::String(_)));
        assert_eq!(document.to_compact_vec(), text.as_bytes());
    }
    // A map of one str key to the str "1": not the integer 1 (0x01).
    let mut key = vec![0xbc];
    key.extend_from_slice(b"$serde_json::private::Number");
    let expected = format!("81{}a131", hex::encode(key));
    assert_eq!(msgpack_hex(&parsed(r#"{"$serde_json::private::Number":"1"}"#)), expected);
}

#[test]
fn invalid_json_is_refused() {
    let cases: &[&[u8]] = &[
        b"",
        b"  \n",
        b"nul",
        b"nulll",
        b"True",
        b"[1,]",
        b"[,1]",
        b"[1 2]",
        b"[",
        b"]",
        b"{\"a\":1,}",
        b"{a:1}",
        b"{'a':1}",
        b"{\"a\" 1}",
        b"{\"a\":}",
        b"{\"a\":1",
        b"{1:1}",
        b"01",
        b"-01",
        b"1.",
        b".5",
        b"-",
        b"+1",
        b"1e",
        b"1e+",
        b"1.e5",
        b"0x10",
        b"NaN",
        b"Infinity",
        b"-Infinity",
        b"\"abc",
        b"\"\\x\"",
        b"\"\\u12\"",
        b"\"\\u12g4\"",
        b"\"\\ud800\"",
        b"\"\\udc00\"",
        b"\"\\ud800\\u0041\"",
        b"\"\\ud800\\ud800\"",
        b"\"\\ud800x\"",
        b"{\"\\udfff\":1}",
        b"\"a\x01b\"",
        b"\"tab\there\"",
        b"\"a\nb\"",
        b"[1] 2",
        b"1 1",
        b"\xff",
        b"\"\xc3\"",
        b"\xef\xbb\xbf1",
        b"\x0c1",
        b"\xc2\xa01",
    ];
    for input in cases {
        assert!(parse(input).is_err(), "{:?} must be refused", String::from_utf8_lossy(input));
    }
    let err = parse(b"[1,\n  2,\n  x]").expect_err("x is not a value");
    assert_eq!(err.to_string(), "expected a value at line 3 column 3");
    assert_eq!(err.offset(), 11);
}

#[test]
fn whitespace_is_space_tab_newline_and_return() {
    assert_eq!(parsed(" \t\r\n[ 1 ,\t2 ]\r\n "), JsonNode::Array(vec![num("1"), num("2")]));
    assert_eq!(parsed("\n{ \"a\" :\ttrue , \"b\":false,\"c\" : null }"), parsed(r#"{"a":true,"b":false,"c":null}"#));
}

#[test]
fn deep_nesting_is_refused_without_overflowing_the_stack() {
    let arrays = |levels: usize| format!("{}{}", "[".repeat(levels), "]".repeat(levels));
    let maps = |levels: usize| format!("{}1{}", r#"{"a":"#.repeat(levels), "}".repeat(levels));
    assert!(parse(arrays(MAX_PARSE_DEPTH).as_bytes()).is_ok());
    assert!(parse(maps(MAX_PARSE_DEPTH).as_bytes()).is_ok());
    for text in [arrays(MAX_PARSE_DEPTH + 1), maps(MAX_PARSE_DEPTH + 1), "[".repeat(1_000_000), arrays(1_000_000)] {
        let err = parse(text.as_bytes()).expect_err("too deep");
        assert!(err.message().contains("nested more than 1000"), "{err}");
    }
    // The parser keeps open containers on the heap: a small stack is enough for it, and for writing and dropping
    // the deepest document it accepts.
    let small = std::thread::Builder::new()
        .stack_size(1024 * 1024)
        .spawn(move || {
            let deepest = parse(maps(MAX_PARSE_DEPTH).as_bytes()).expect("parses");
            let written = deepest.to_compact_vec() == maps(MAX_PARSE_DEPTH).into_bytes();
            let deduplicated = deepest.clone().without_duplicate_keys() == deepest;
            drop(deepest);
            (written, deduplicated, parse("[".repeat(100_000).as_bytes()).is_err())
        })
        .expect("thread starts");
    assert_eq!(small.join().expect("no stack overflow"), (true, true, true));
}

#[test]
fn nesting_beyond_100_levels_is_refused_exactly() {
    let arrays = |levels: usize| parsed(&format!("{}1{}", "[".repeat(levels), "]".repeat(levels)));
    let maps = |levels: usize| parsed(&format!("{}1{}", r#"{"a":"#.repeat(levels), "}".repeat(levels)));
    for deep in [arrays, maps] {
        assert!(check_nesting(&deep(MAX_NESTING)).is_ok());
        assert!(msgpack_from_json(&deep(MAX_NESTING), &mut Vec::new()).is_ok());
        let err = check_nesting(&deep(MAX_NESTING + 1)).expect_err("101 levels");
        assert_eq!(err.to_string(), "value nested more than 100 levels deep");
        assert!(msgpack_from_json(&deep(MAX_NESTING + 1), &mut Vec::new()).is_err());
    }
    // Scalars inside the 100th container are fine; only containers count.
    assert!(check_nesting(&parsed(&format!("{}[]{}", "[".repeat(99), "]".repeat(99)))).is_ok());
    assert!(check_nesting(&parsed(&format!("{}[]{}", "[".repeat(100), "]".repeat(100)))).is_err());
}

#[test]
fn serde_json_values_convert_and_encode_alike() {
    let value = serde_json::json!({"a": -1, "b": 1.0, "c": u64::MAX, "d": [null, true, "s", 1e300], "e": {}});
    let document = JsonNode::from(&value);
    assert_eq!(document.get("a"), Some(&num("-1")));
    assert_eq!(document.get("b"), Some(&num("1.0")));
    assert_eq!(document.get("c"), Some(&num("18446744073709551615")));
    assert_eq!(document.get("d").and_then(JsonNode::as_array).map(<[JsonNode]>::len), Some(4));
    assert_eq!(document.get("d").and_then(|d| d.as_array()?[2].as_str()), Some("s"));
    let (mut from_value, mut from_document) = (Vec::new(), Vec::new());
    msgpack_from_json(&value, &mut from_value).expect("value encodes");
    msgpack_from_json(&document, &mut from_document).expect("document encodes");
    assert_eq!(hex::encode(&from_value), hex::encode(&from_document));
    assert!(hex::encode(&from_value).starts_with("85a161ffa162cb3ff0000000000000a163cfffffffffffffffff"));
    assert_eq!(document.to_compact_vec(), serde_json::to_vec(&value).expect("serializes"));
}

fn json_values() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<u64>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        any::<String>().prop_map(Value::String),
        "[\"\\\\\u{0}-\u{1f}\u{7f}é🍞a]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 40, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((any::<String>(), inner), 0..6)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

/// Whether the document holds a number that float64 cannot hold (its value overflows to infinity).
fn has_number_beyond_f64(node: &JsonNode) -> bool {
    match node {
        JsonNode::Number(text) => text.parse::<f64>().is_ok_and(f64::is_infinite),
        JsonNode::Array(items) => items.iter().any(has_number_beyond_f64),
        JsonNode::Object(pairs) => pairs.iter().any(|(_, value)| has_number_beyond_f64(value)),
        JsonNode::Null | JsonNode::Bool(_) | JsonNode::String(_) => false,
    }
}

proptest! {
    /// What serde_json writes, this parser reads to the same document, and the compact writer writes back the same
    /// bytes, also pretty-printed input.
    #[test]
    fn serde_json_text_round_trips(value in json_values()) {
        let compact = serde_json::to_vec(&value).expect("serializes");
        let document = parse(&compact).expect("parses");
        prop_assert_eq!(&document, &JsonNode::from(&value));
        prop_assert_eq!(document.to_compact_vec(), compact);
        let pretty = serde_json::to_vec_pretty(&value).expect("serializes");
        prop_assert_eq!(parse(&pretty).expect("parses"), document);
    }

    /// Arbitrary bytes never panic the parser, and it accepts what serde_json accepts (serde_json also refuses
    /// numbers beyond float64, which are JSON all the same).
    #[test]
    fn parser_agrees_with_serde_json_on_arbitrary_bytes(bytes in prop::collection::vec(prop_oneof![
        any::<u8>(), Just(b'['), Just(b']'), Just(b'{'), Just(b'}'), Just(b'"'), Just(b':'), Just(b','), Just(b'1'),
        Just(b'e'), Just(b'\\'), Just(b' '),
    ], 0..24)) {
        match (parse(&bytes), serde_json::from_slice::<serde_json::Value>(&bytes)) {
            (Ok(_), Ok(_)) | (Err(_), Err(_)) => {}
            // The one difference allowed: a number beyond float64 (serde_json refuses it; its wording is its own).
            (Ok(document), Err(e)) => prop_assert!(has_number_beyond_f64(&document), "serde_json: {}", e),
            (Err(e), Ok(_)) => prop_assert!(false, "refused what serde_json reads: {}", e),
        }
    }
}
