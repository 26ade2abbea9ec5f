//! JSON documents as the entry format needs them (spec/FORMAT.md §2): a parser that keeps what the spec reads, the
//! canonical MessagePack form every language must produce for the same document, and a compact JSON writer.
//!
//! [`JsonNode`] keeps each number as the text it was written with (so `1.0` stays a float, `-0` is the integer 0,
//! and integers beyond 64 bits are refused by [`msgpack_from_json`] instead of rounded), and each object's pairs in
//! document order, duplicate keys included. [`parse`] reads one JSON text strictly (RFC 8259: UTF-8, no NaN or
//! Infinity, no lone surrogate escapes, no trailing characters), accepting the same documents as the Python
//! implementation's reader (whose depth limit is its recursion limit, about the same). It keeps open containers on a heap stack rather than recursing, and refuses containers nested
//! more than [`MAX_PARSE_DEPTH`] deep, so no input can exhaust the call stack, neither while parsing nor in what
//! walks a parsed document recursively ([`JsonNode::write_compact`], dropping it: well under 1 MiB of stack at that
//! depth, even unoptimized). [`MAX_NESTING`], the format's own limit, is a separate check ([`check_nesting`]).
//!
//! Why a hand-written parser rather than serde_json or jiter:
//! - serde_json keeps number text only with its `arbitrary_precision` feature, which hands numbers to visitors as
//!   a one-entry map under a private key, so a genuine object with that key (`{"$serde_json::private::Number":
//!   "1"}`) was read as a number; and its `Value` keeps only the last of duplicate keys.
//! - jiter (pydantic's pull parser, which exposes raw number bytes) refuses any number whose digits run past 4,300
//!   (`NumberOutOfRange`, Python's int-conversion guard built into its number scanner, in every release up to
//!   0.18), while a json payload may hold integers of any length and `inspect` must display them (spec/CLI.md; the
//!   cross-language tests pin a 5,000-digit case). Its releases after 0.13 also need Rust 1.88, above this
//!   workspace's rust-version.
//!
//! The RFC 8259 grammar is small, and owning it makes the accepted language explicit: see [`parse`].

use std::collections::HashMap;
use std::fmt;

use crate::error::EncodeError;

/// Arrays and maps may nest this deep in a value (spec/FORMAT.md §2); deeper documents are refused.
pub const MAX_NESTING: usize = 100;

/// [`parse`] refuses documents with more containers than this nested inside each other (the outermost counts as
/// one): a bound on the recursion of everything that walks a parsed document, far past [`MAX_NESTING`], which is
/// checked separately and exactly. About where Python's own reader stops (its recursion limit).
pub const MAX_PARSE_DEPTH: usize = 1000;

/// A JSON document as written: numbers as their literal text, objects as their pairs in order, duplicates kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonNode {
    Null,
    Bool(bool),
    /// The number's text exactly as it appeared (RFC 8259 number grammar), e.g. `-0`, `1E2`, `0.10`. [`parse`]
    /// guarantees the grammar; a node built by hand with other text is written out as it is.
    Number(String),
    String(String),
    Array(Vec<JsonNode>),
    /// The pairs in document order; a key may appear more than once.
    Object(Vec<(String, JsonNode)>),
}

/// Whether a JSON number's text denotes an integer (no fraction, no exponent).
pub fn is_integer_text(text: &str) -> bool {
    !text.contains(['.', 'e', 'E'])
}

impl JsonNode {
    /// The value of `key` in an object: the last one when the key appears more than once (the value a map built
    /// from the document keeps). None for a missing key or a value that is not an object.
    pub fn get(&self, key: &str) -> Option<&JsonNode> {
        match self {
            JsonNode::Object(pairs) => pairs.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The text of a string value.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            JsonNode::String(s) => Some(s),
            _ => None,
        }
    }

    /// The items of an array value.
    pub fn as_array(&self) -> Option<&[JsonNode]> {
        match self {
            JsonNode::Array(items) => Some(items),
            _ => None,
        }
    }

    /// The document as a map-building reader sees it (Python's `dict`, serde_json's `Map` with `preserve_order`):
    /// where an object has a key more than once, only the last value is kept, at the position of the first
    /// occurrence. Applies at every level.
    pub fn without_duplicate_keys(mut self) -> JsonNode {
        // Iterative, so the walk costs no stack however deep the document.
        let mut pending: Vec<&mut JsonNode> = vec![&mut self];
        while let Some(node) = pending.pop() {
            match node {
                JsonNode::Array(items) => pending.extend(items.iter_mut()),
                JsonNode::Object(pairs) => {
                    keep_last_value_at_first_position(pairs);
                    pending.extend(pairs.iter_mut().map(|(_, value)| value));
                }
                _ => {}
            }
        }
        self
    }

    /// Appends the document as compact JSON text: no whitespace, numbers as their literal text, object pairs in
    /// order (duplicates included), strings escaped as serde_json and Python's `json.dumps(ensure_ascii=False)` do
    /// (`"` and `\`, the short forms `\b \f \n \r \t`, other characters below U+0020 as `\u00xx`; everything else
    /// as itself).
    pub fn write_compact(&self, out: &mut Vec<u8>) {
        match self {
            JsonNode::Null => out.extend_from_slice(b"null"),
            JsonNode::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
            JsonNode::Number(text) => out.extend_from_slice(text.as_bytes()),
            JsonNode::String(s) => write_json_string(s, out),
            JsonNode::Array(items) => {
                out.push(b'[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    item.write_compact(out);
                }
                out.push(b']');
            }
            JsonNode::Object(pairs) => {
                out.push(b'{');
                for (i, (key, item)) in pairs.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    write_json_string(key, out);
                    out.push(b':');
                    item.write_compact(out);
                }
                out.push(b'}');
            }
        }
    }

    /// [`JsonNode::write_compact`] into a new buffer.
    pub fn to_compact_vec(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_compact(&mut out);
        out
    }
}

fn keep_last_value_at_first_position(pairs: &mut Vec<(String, JsonNode)>) {
    if pairs.len() < 2 {
        return;
    }
    // For each key, the index of its first and of its last pair.
    let (swaps, keep) = {
        let mut seen: HashMap<&str, (usize, usize)> = HashMap::with_capacity(pairs.len());
        for (i, (key, _)) in pairs.iter().enumerate() {
            seen.entry(key.as_str()).and_modify(|(_, last)| *last = i).or_insert((i, i));
        }
        if seen.len() == pairs.len() {
            return;
        }
        let swaps: Vec<(usize, usize)> = seen.values().filter(|(first, last)| first != last).copied().collect();
        let keep: Vec<bool> = pairs.iter().enumerate().map(|(i, (key, _))| seen[key.as_str()].0 == i).collect();
        (swaps, keep)
    };
    // The keys of both pairs are equal, so swapping whole pairs moves the last value to the first position.
    for (first, last) in swaps {
        pairs.swap(first, last);
    }
    let mut keep = keep.into_iter();
    pairs.retain(|_| keep.next().unwrap_or(false));
}

fn write_json_string(s: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut run = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let short: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            0x0c => b"\\f",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x00..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[run..i]);
        run = i + 1;
        if short.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(&[b'\\', b'u', b'0', b'0', HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xf)]]);
        } else {
            out.extend_from_slice(short);
        }
    }
    out.extend_from_slice(&bytes[run..]);
    out.push(b'"');
}

impl From<&serde_json::Value> for JsonNode {
    /// A `serde_json::Value` as a document. serde_json's parser has already decided what each number is: `-0`,
    /// `1E2` and integers past 64 bits arrive here as floats, written as serde_json displays them (`-0.0`,
    /// `100.0`, `1e20`), so FORMAT.md's number rules hold only as far as the `Value` still shows them. Parse the
    /// original text with [`parse`] where that matters.
    fn from(value: &serde_json::Value) -> Self {
        use serde_json::Value;
        match value {
            Value::Null => JsonNode::Null,
            Value::Bool(b) => JsonNode::Bool(*b),
            Value::Number(n) => JsonNode::Number(n.to_string()),
            Value::String(s) => JsonNode::String(s.clone()),
            Value::Array(items) => JsonNode::Array(items.iter().map(JsonNode::from).collect()),
            Value::Object(map) => JsonNode::Object(map.iter().map(|(k, v)| (k.clone(), JsonNode::from(v))).collect()),
        }
    }
}

// --- parsing ------------------------------------------------------------------------------------------------------

/// Why [`parse`] refused its input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} at line {line} column {column}")]
pub struct JsonError {
    message: String,
    offset: usize,
    line: usize,
    column: usize,
}

impl JsonError {
    /// What is wrong, without the position.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The byte offset in the input where the problem was found.
    pub fn offset(&self) -> usize {
        self.offset
    }
}

/// Reads exactly one JSON text (RFC 8259) from `input`.
///
/// The accepted language: the whole input is UTF-8; whitespace is space, tab, LF and CR; a value is `null`,
/// `true`, `false`, a number (`-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, any length), a string
/// (no raw characters below U+0020; escapes `\" \\ \/ \b \f \n \r \t \uXXXX`, where a `\u` escape of a UTF-16
/// surrogate must be one half of a pair), an array or an object with string keys; nothing but whitespace may
/// follow the value. Containers may nest at most [`MAX_PARSE_DEPTH`] deep. These are the documents Python's
/// `json.loads` accepts once NaN, Infinity and lone surrogates are refused, as larder's Python reader does.
pub fn parse(input: &[u8]) -> Result<JsonNode, JsonError> {
    let text = match std::str::from_utf8(input) {
        Ok(text) => text,
        Err(e) => {
            let at = e.valid_up_to();
            return Err(Parser { text: "", bytes: input, pos: at }.error_at(at, "invalid UTF-8"));
        }
    };
    let mut parser = Parser { text, bytes: input, pos: 0 };
    let value = parser.value()?;
    parser.skip_whitespace();
    if parser.pos < parser.bytes.len() {
        return Err(parser.error("trailing characters after the JSON value"));
    }
    Ok(value)
}

struct Parser<'a> {
    /// The input, known to be UTF-8 (empty when reporting invalid UTF-8).
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

/// A container whose closing bracket the parser has not reached yet.
enum Open {
    Array(Vec<JsonNode>),
    /// The pairs so far, and the key whose value is being read.
    Object(Vec<(String, JsonNode)>, String),
}

impl Parser<'_> {
    fn error(&self, message: &str) -> JsonError {
        self.error_at(self.pos, message)
    }

    fn error_at(&self, offset: usize, message: &str) -> JsonError {
        let before = &self.bytes[..offset.min(self.bytes.len())];
        let line = 1 + before.iter().filter(|&&b| b == b'\n').count();
        let line_start = before.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        // Characters, not bytes: count the bytes that start a UTF-8 sequence.
        let column = 1 + before[line_start..].iter().filter(|&&b| (b & 0xc0) != 0x80).count();
        JsonError { message: message.to_owned(), offset, line, column }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    /// The whole value at the current position. Iterative: the containers still open are on `stack`, not on the
    /// call stack, so the input's nesting costs heap, not stack, and [`MAX_PARSE_DEPTH`] bounds it.
    fn value(&mut self) -> Result<JsonNode, JsonError> {
        let mut stack: Vec<Open> = Vec::new();
        'value: loop {
            self.skip_whitespace();
            let mut value = match self.peek() {
                None => return Err(self.error("unexpected end of input, expected a value")),
                Some(b'n') => self.literal("null", JsonNode::Null)?,
                Some(b't') => self.literal("true", JsonNode::Bool(true))?,
                Some(b'f') => self.literal("false", JsonNode::Bool(false))?,
                Some(b'"') => JsonNode::String(self.string()?),
                Some(b'-' | b'0'..=b'9') => self.number()?,
                Some(open @ (b'[' | b'{')) => {
                    if stack.len() >= MAX_PARSE_DEPTH {
                        return Err(self.error(&format!("containers nested more than {MAX_PARSE_DEPTH} deep")));
                    }
                    self.pos += 1;
                    self.skip_whitespace();
                    match (open, self.peek()) {
                        (b'[', Some(b']')) => {
                            self.pos += 1;
                            JsonNode::Array(Vec::new())
                        }
                        (b'{', Some(b'}')) => {
                            self.pos += 1;
                            JsonNode::Object(Vec::new())
                        }
                        (b'[', _) => {
                            stack.push(Open::Array(Vec::new()));
                            continue 'value;
                        }
                        _ => {
                            let key = self.object_key()?;
                            stack.push(Open::Object(Vec::new(), key));
                            continue 'value;
                        }
                    }
                }
                Some(_) => return Err(self.error("expected a value")),
            };
            // A complete value: it goes into the innermost open container, which may end here too, and so on out.
            loop {
                let Some(mut open) = stack.pop() else { return Ok(value) };
                let close = match &mut open {
                    Open::Array(items) => {
                        items.push(value);
                        b']'
                    }
                    Open::Object(pairs, key) => {
                        pairs.push((std::mem::take(key), value));
                        b'}'
                    }
                };
                self.skip_whitespace();
                match self.peek() {
                    Some(b',') => {
                        self.pos += 1;
                        if let Open::Object(_, key) = &mut open {
                            *key = self.object_key()?;
                        }
                        stack.push(open);
                        continue 'value;
                    }
                    Some(b) if b == close => {
                        self.pos += 1;
                        value = match open {
                            Open::Array(items) => JsonNode::Array(items),
                            Open::Object(pairs, _) => JsonNode::Object(pairs),
                        };
                    }
                    None if close == b']' => return Err(self.error("unexpected end of input in an array")),
                    None => return Err(self.error("unexpected end of input in an object")),
                    Some(_) if close == b']' => return Err(self.error("expected ',' or ']' in an array")),
                    Some(_) => return Err(self.error("expected ',' or '}' in an object")),
                }
            }
        }
    }

    fn literal(&mut self, word: &str, value: JsonNode) -> Result<JsonNode, JsonError> {
        if self.bytes[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(self.error("expected a value"))
        }
    }

    /// An object's key and the `:` after it, whitespace around them included.
    fn object_key(&mut self) -> Result<String, JsonError> {
        self.skip_whitespace();
        match self.peek() {
            Some(b'"') => {}
            None => return Err(self.error("unexpected end of input in an object")),
            Some(_) => return Err(self.error("expected a string key in an object")),
        }
        let key = self.string()?;
        self.skip_whitespace();
        match self.peek() {
            Some(b':') => {
                self.pos += 1;
                Ok(key)
            }
            None => Err(self.error("unexpected end of input in an object")),
            Some(_) => Err(self.error("expected ':' after an object key")),
        }
    }

    /// At a number's first character (`-` or a digit).
    fn number(&mut self) -> Result<JsonNode, JsonError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.error("invalid number: expected a digit")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.error("invalid number: expected a digit after the decimal point"));
            }
            self.digits();
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.error("invalid number: expected a digit in the exponent"));
            }
            self.digits();
        }
        Ok(JsonNode::Number(self.text[start..self.pos].to_owned()))
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
    }

    /// At `"`: the string's decoded text.
    fn string(&mut self) -> Result<String, JsonError> {
        self.pos += 1;
        let mut out = String::new();
        let mut run = self.pos;
        loop {
            match self.peek() {
                None => return Err(self.error("unexpected end of input in a string")),
                Some(b'"') => {
                    // Slicing at ASCII bytes of valid UTF-8 always falls on character boundaries.
                    out.push_str(&self.text[run..self.pos]);
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    out.push_str(&self.text[run..self.pos]);
                    self.escape(&mut out)?;
                    run = self.pos;
                }
                Some(0x00..=0x1f) => return Err(self.error("control character in a string (it must be escaped)")),
                Some(_) => self.pos += 1,
            }
        }
    }

    /// At `\` in a string.
    fn escape(&mut self, out: &mut String) -> Result<(), JsonError> {
        let start = self.pos;
        self.pos += 1;
        let simple = match self.peek() {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{08}',
            Some(b'f') => '\u{0c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => {
                self.pos += 1;
                let unit = self.hex4()?;
                let c = match unit {
                    0xd800..=0xdbff => {
                        if !self.bytes[self.pos..].starts_with(b"\\u") {
                            return Err(self.error_at(start, "lone surrogate escape in a string"));
                        }
                        self.pos += 2;
                        let low = self.hex4()?;
                        if !(0xdc00..=0xdfff).contains(&low) {
                            return Err(self.error_at(start, "lone surrogate escape in a string"));
                        }
                        0x10000 + ((u32::from(unit) - 0xd800) << 10) + (u32::from(low) - 0xdc00)
                    }
                    0xdc00..=0xdfff => return Err(self.error_at(start, "lone surrogate escape in a string")),
                    _ => u32::from(unit),
                };
                // Every value outside the surrogate range is a char.
                out.push(char::from_u32(c).ok_or_else(|| self.error_at(start, "invalid \\u escape"))?);
                return Ok(());
            }
            None => return Err(self.error("unexpected end of input in a string")),
            Some(_) => return Err(self.error("invalid escape in a string")),
        };
        self.pos += 1;
        out.push(simple);
        Ok(())
    }

    /// Four hex digits of a `\u` escape.
    fn hex4(&mut self) -> Result<u16, JsonError> {
        let mut unit = 0u16;
        for _ in 0..4 {
            let digit = match self.peek() {
                Some(b @ b'0'..=b'9') => b - b'0',
                Some(b @ b'a'..=b'f') => b - b'a' + 10,
                Some(b @ b'A'..=b'F') => b - b'A' + 10,
                None => return Err(self.error("unexpected end of input in a string")),
                Some(_) => return Err(self.error("invalid \\u escape: expected four hex digits")),
            };
            unit = unit << 4 | u16::from(digit);
            self.pos += 1;
        }
        Ok(unit)
    }
}

// --- canonical MessagePack ----------------------------------------------------------------------------------------

/// A document [`msgpack_from_json`] and [`check_nesting`] take: a [`JsonNode`] (numbers as written, duplicate keys
/// as given), or a `serde_json::Value` for callers that already hold one (whose numbers serde_json's parser has
/// already typed: see the `From<&serde_json::Value>` conversion of [`JsonNode`]).
pub trait JsonDocument: sealed::Sealed {
    /// The values directly inside this one if it is an array or an object (object keys are strings, never
    /// containers), None for a scalar.
    #[doc(hidden)]
    fn nested_values(&self) -> Option<Box<dyn Iterator<Item = &Self> + '_>>;

    /// Appends the canonical MessagePack form; the nesting is already checked.
    #[doc(hidden)]
    fn write_msgpack(&self, out: &mut Vec<u8>) -> Result<(), EncodeError>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::JsonNode {}
    impl Sealed for serde_json::Value {}
}

/// Appends the canonical MessagePack form of `value` to `out` (spec/FORMAT.md §2): integers in their smallest
/// form, floats as float64, strings as str, maps in document order (duplicate keys of a [`JsonNode`] included:
/// use [`JsonNode::without_duplicate_keys`] first for a map reader's view). Refuses values nested deeper than
/// [`MAX_NESTING`] and integers outside [-2^63, 2^64-1].
pub fn msgpack_from_json<D: JsonDocument + ?Sized>(value: &D, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    check_nesting(value)?;
    value.write_msgpack(out)
}

/// Refuses documents nested deeper than [`MAX_NESTING`] containers: the top-level value is at level 0, the items
/// of a container at level L are at level L + 1, and a container at level 100 or more is too deep.
pub fn check_nesting<D: JsonDocument + ?Sized>(value: &D) -> Result<(), EncodeError> {
    let mut stack: Vec<(&D, usize)> = vec![(value, 0)];
    while let Some((value, level)) = stack.pop() {
        let Some(children) = value.nested_values() else { continue };
        if level >= MAX_NESTING {
            return Err(EncodeError::Invalid(format!("value nested more than {MAX_NESTING} levels deep")));
        }
        stack.extend(children.map(|child| (child, level + 1)));
    }
    Ok(())
}

fn len_u32(len: usize) -> Result<u32, EncodeError> {
    u32::try_from(len).map_err(|_| EncodeError::Invalid(format!("collection of {len} items is too long")))
}

impl JsonDocument for JsonNode {
    fn nested_values(&self) -> Option<Box<dyn Iterator<Item = &Self> + '_>> {
        match self {
            JsonNode::Array(items) => Some(Box::new(items.iter())),
            JsonNode::Object(pairs) => Some(Box::new(pairs.iter().map(|(_, v)| v))),
            _ => None,
        }
    }

    fn write_msgpack(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        match self {
            JsonNode::Null => rmp::encode::write_nil(out).map_err(EncodeError::serialize)?,
            JsonNode::Bool(b) => rmp::encode::write_bool(out, *b).map_err(EncodeError::serialize)?,
            JsonNode::Number(text) => write_number_text(text, out)?,
            JsonNode::String(s) => rmp::encode::write_str(out, s).map_err(EncodeError::serialize)?,
            JsonNode::Array(items) => {
                rmp::encode::write_array_len(out, len_u32(items.len())?).map_err(EncodeError::serialize)?;
                for item in items {
                    item.write_msgpack(out)?;
                }
            }
            JsonNode::Object(pairs) => {
                rmp::encode::write_map_len(out, len_u32(pairs.len())?).map_err(EncodeError::serialize)?;
                for (key, item) in pairs {
                    rmp::encode::write_str(out, key).map_err(EncodeError::serialize)?;
                    item.write_msgpack(out)?;
                }
            }
        }
        Ok(())
    }
}

fn write_number_text(text: &str, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    if !is_integer_text(text) {
        let float: f64 = text.parse().map_err(|_| EncodeError::Invalid(format!("bad number {text}")))?;
        rmp::encode::write_f64(out, float).map_err(EncodeError::serialize)?;
    } else if let Ok(unsigned) = text.parse::<u64>() {
        rmp::encode::write_uint(out, unsigned).map_err(EncodeError::serialize)?;
    } else if let Ok(signed) = text.parse::<i64>() {
        // `-0` parses here as 0 and takes the unsigned form, as in every other language.
        if signed >= 0 {
            rmp::encode::write_uint(out, signed as u64).map_err(EncodeError::serialize)?;
        } else {
            rmp::encode::write_sint(out, signed).map_err(EncodeError::serialize)?;
        }
    } else {
        return Err(EncodeError::Invalid(format!("integer {text} is outside the MessagePack range [-2^63, 2^64-1]")));
    }
    Ok(())
}

impl JsonDocument for serde_json::Value {
    fn nested_values(&self) -> Option<Box<dyn Iterator<Item = &Self> + '_>> {
        match self {
            serde_json::Value::Array(items) => Some(Box::new(items.iter())),
            serde_json::Value::Object(map) => Some(Box::new(map.values())),
            _ => None,
        }
    }

    fn write_msgpack(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        use serde_json::Value;
        match self {
            Value::Null => rmp::encode::write_nil(out).map_err(EncodeError::serialize)?,
            Value::Bool(b) => rmp::encode::write_bool(out, *b).map_err(EncodeError::serialize)?,
            Value::Number(n) => {
                if let Some(unsigned) = n.as_u64() {
                    rmp::encode::write_uint(out, unsigned).map_err(EncodeError::serialize)?;
                } else if let Some(signed) = n.as_i64() {
                    rmp::encode::write_sint(out, signed).map_err(EncodeError::serialize)?;
                } else if let Some(float) = n.as_f64() {
                    rmp::encode::write_f64(out, float).map_err(EncodeError::serialize)?;
                } else {
                    return Err(EncodeError::Invalid(format!("number {n} is not representable")));
                }
            }
            Value::String(s) => rmp::encode::write_str(out, s).map_err(EncodeError::serialize)?,
            Value::Array(items) => {
                rmp::encode::write_array_len(out, len_u32(items.len())?).map_err(EncodeError::serialize)?;
                for item in items {
                    item.write_msgpack(out)?;
                }
            }
            Value::Object(map) => {
                rmp::encode::write_map_len(out, len_u32(map.len())?).map_err(EncodeError::serialize)?;
                for (key, item) in map {
                    rmp::encode::write_str(out, key).map_err(EncodeError::serialize)?;
                    item.write_msgpack(out)?;
                }
            }
        }
        Ok(())
    }
}

impl fmt::Display for JsonNode {
    /// The compact JSON text of [`JsonNode::write_compact`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // write_compact only ever writes whole UTF-8 strings and ASCII.
        f.write_str(&String::from_utf8_lossy(&self.to_compact_vec()))
    }
}
