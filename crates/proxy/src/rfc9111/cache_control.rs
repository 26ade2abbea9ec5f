//! Cache directives from `Cache-Control` (RFC 9111 §5.2), `Surrogate-Control` (the same syntax) and
//! `CDN-Cache-Control` (RFC 9213, a Structured Fields dictionary).
//!
//! Parsing follows the grammar strictly where the conformance suite checks it: commas inside quoted strings do not
//! split directives, names are case-insensitive, `name =value` is not `name=value`, and a delta-seconds value must be
//! digits (a quoted form is accepted, a single-quoted or negative one is not). An invalid freshness value makes the
//! response stale rather than cacheable, and an invalid stale-* value allows no stale use: the safe reading.
//! spec/HTTP.md states each rule; spec/vectors/storage.json checks them.

use http::header::HeaderValue;

/// Largest delta-seconds value (RFC 9111 §1.2.2): anything larger counts as this.
pub const MAX_DELTA_SECONDS: u64 = 1 << 31;

/// The directives larder acts on. `None` means absent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Directives {
    pub no_store: bool,
    pub no_cache: bool,
    pub private: bool,
    pub public: bool,
    pub must_revalidate: bool,
    pub proxy_revalidate: bool,
    pub must_understand: bool,
    pub no_transform: bool,
    pub immutable: bool,
    pub only_if_cached: bool,
    pub max_age: Option<u64>,
    pub s_maxage: Option<u64>,
    pub stale_while_revalidate: Option<u64>,
    pub stale_if_error: Option<u64>,
    pub min_fresh: Option<u64>,
    /// `max-stale` without a value accepts any staleness.
    pub max_stale: Option<u64>,
}

impl Directives {
    /// Directives from every line of a `Cache-Control`-syntax field.
    pub fn parse<'a>(values: impl IntoIterator<Item = &'a HeaderValue>) -> Directives {
        let mut d = Directives::default();
        let mut seen: Vec<String> = Vec::new();
        for value in values {
            let Ok(text) = value.to_str() else { continue };
            for (name, arg) in split_directives(text).iter().filter_map(|element| directive(element)) {
                // The first occurrence of a directive wins.
                if seen.contains(&name) {
                    continue;
                }
                d.apply(&name, arg.as_deref());
                seen.push(name);
            }
        }
        d
    }

    /// Directives from `Surrogate-Control` (W3C Edge Architecture): Cache-Control syntax, but a directive with a
    /// `;device-token` is for the surrogate of that name (larder has none, so it is skipped), `max-age=N+M` counts
    /// as N (larder does not implement the freshness extension M), and `no-store-remote` and `content` are not for
    /// a surrogate beside the origin. `None` when what is left holds no directive larder acts on (an empty field,
    /// ESI's `content="ESI/1.0"` alone…): then the field does not govern and Cache-Control does.
    pub fn parse_surrogate<'a>(values: impl IntoIterator<Item = &'a HeaderValue>) -> Option<Directives> {
        let mut d = Directives::default();
        let mut seen: Vec<String> = Vec::new();
        let mut acts = false;
        for value in values {
            let Ok(text) = value.to_str() else { continue };
            for element in split_directives(text) {
                if has_unquoted_semicolon(&element) {
                    continue;
                }
                let Some((name, mut arg)) = directive(&element) else { continue };
                if seen.contains(&name) {
                    continue;
                }
                if name == "max-age" {
                    if let Some((n, m)) = arg.as_deref().and_then(|a| a.split_once('+')) {
                        if is_digits(n) && is_digits(m) {
                            arg = Some(n.to_owned());
                        }
                    }
                }
                acts |= ACTED_ON.contains(&name.as_str());
                d.apply(&name, arg.as_deref());
                seen.push(name);
            }
        }
        acts.then_some(d)
    }

    fn apply(&mut self, name: &str, arg: Option<&str>) {
        match name {
            "no-store" => self.no_store = true,
            "no-cache" => self.no_cache = true,
            "private" => self.private = true,
            "public" => self.public = true,
            "must-revalidate" => self.must_revalidate = true,
            "proxy-revalidate" => self.proxy_revalidate = true,
            "must-understand" => self.must_understand = true,
            "no-transform" => self.no_transform = true,
            "immutable" => self.immutable = true,
            "only-if-cached" => self.only_if_cached = true,
            // An invalid freshness value counts as zero: never fresher than the sender meant. Likewise an invalid
            // stale-* value allows no stale use (rather than the configured default for responses that say nothing).
            "max-age" => self.max_age = Some(delta_seconds(arg).unwrap_or(0)),
            "s-maxage" => self.s_maxage = Some(delta_seconds(arg).unwrap_or(0)),
            "stale-while-revalidate" => self.stale_while_revalidate = Some(delta_seconds(arg).unwrap_or(0)),
            "stale-if-error" => self.stale_if_error = Some(delta_seconds(arg).unwrap_or(0)),
            "min-fresh" => self.min_fresh = delta_seconds(arg),
            "max-stale" => self.max_stale = Some(arg.map_or(Some(u64::MAX), |_| delta_seconds(arg)).unwrap_or(0)),
            _ => {}
        }
    }

    /// Directives from a targeted field such as `CDN-Cache-Control` (RFC 9213): a Structured Fields dictionary (RFC
    /// 8941, the version RFC 9213 is defined on: no Date or Display String items). `None` when the field is absent,
    /// empty or invalid (wrong syntax, or a directive larder knows with a value of the wrong type), in which case the
    /// cache ignores it and falls back to the next field. Members larder does not know are ignored whatever their
    /// value; parameters are ignored.
    pub fn parse_structured<'a>(values: impl IntoIterator<Item = &'a HeaderValue>) -> Option<Directives> {
        // The lines are one field joined with ", " (RFC 9110 §5.3), empty ones included: an empty first line makes
        // the dictionary invalid, as it would be sent as one line.
        let mut joined = String::new();
        let mut lines = 0;
        for value in values {
            if lines > 0 {
                joined.push_str(", ");
            }
            joined.push_str(value.to_str().ok()?);
            lines += 1;
        }
        if lines == 0 || joined.is_empty() {
            return None;
        }
        let dict: sfv::Dictionary = sfv::Parser::new(&joined).with_version(sfv::Version::Rfc8941).parse().ok()?;
        if dict.is_empty() {
            return None;
        }
        let mut d = Directives::default();
        for (key, entry) in &dict {
            let item = match entry {
                sfv::ListEntry::Item(item) => Some(&item.bare_item),
                sfv::ListEntry::InnerList(_) => None,
            };
            let integer = || match item {
                Some(sfv::BareItem::Integer(i)) => u64::try_from(i64::from(*i)).ok().map(|n| n.min(MAX_DELTA_SECONDS)),
                _ => None,
            };
            // A flag directive is a bare `true` (`?1`); any other value makes the field invalid.
            let flag = || matches!(item, Some(sfv::BareItem::Boolean(true))).then_some(true);
            // no-cache and private may also carry a field-name list (a String, RFC 9213 §2.1); like their qualified
            // Cache-Control forms, larder reads them as unqualified.
            let flag_or_list =
                || matches!(item, Some(sfv::BareItem::Boolean(true) | sfv::BareItem::String(_))).then_some(true);
            match key.as_str() {
                "max-age" => d.max_age = Some(integer()?),
                "s-maxage" => d.s_maxage = Some(integer()?),
                "stale-while-revalidate" => d.stale_while_revalidate = Some(integer()?),
                "stale-if-error" => d.stale_if_error = Some(integer()?),
                "no-store" => d.no_store = flag()?,
                "no-cache" => d.no_cache = flag_or_list()?,
                "private" => d.private = flag_or_list()?,
                "public" => d.public = flag()?,
                "must-revalidate" => d.must_revalidate = flag()?,
                "proxy-revalidate" => d.proxy_revalidate = flag()?,
                "must-understand" => d.must_understand = flag()?,
                "immutable" => d.immutable = flag()?,
                _ => {}
            }
        }
        Some(d)
    }
}

/// The directives whose presence makes `Surrogate-Control` govern (spec/HTTP.md).
const ACTED_ON: [&str; 11] = [
    "no-store",
    "no-cache",
    "private",
    "public",
    "must-revalidate",
    "proxy-revalidate",
    "must-understand",
    "max-age",
    "s-maxage",
    "stale-while-revalidate",
    "stale-if-error",
];

fn is_digits(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// Whether `element` has a `;` outside quoted strings (a Surrogate-Control device token).
fn has_unquoted_semicolon(element: &str) -> bool {
    let (mut quoted, mut escaped) = (false, false);
    for c in element.chars() {
        if quoted {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                quoted = false;
            }
        } else if c == '"' {
            quoted = true;
        } else if c == ';' {
            return true;
        }
    }
    false
}

/// The elements of one field line (RFC 9110 §5.6.1), trimmed of spaces and tabs, empty ones dropped; commas inside
/// quoted strings do not split.
fn split_directives(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut in_quotes = false;
    let mut escaped = false;
    for c in text.chars() {
        if in_quotes {
            current.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_quotes = false;
            }
        } else if c == '"' {
            in_quotes = true;
            current.push(c);
        } else if c == ',' {
            push_element(&mut out, &current);
            current.clear();
        } else {
            current.push(c);
        }
    }
    push_element(&mut out, &current);
    out
}

fn push_element(out: &mut Vec<String>, raw: &str) {
    let raw = raw.trim_start_matches([' ', '\t']).trim_end_matches([' ', '\t']);
    if !raw.is_empty() {
        out.push(raw.to_owned());
    }
}

/// One element as `(lowercase name, argument)`; `None` when the name is not a token (`max-age =3600`).
fn directive(element: &str) -> Option<(String, Option<String>)> {
    let (name, arg) = match element.split_once('=') {
        Some((name, arg)) => (name, Some(unquote(arg))),
        None => (element, None),
    };
    if name.is_empty() || name.contains([' ', '\t']) {
        return None;
    }
    Some((name.to_ascii_lowercase(), arg))
}

fn unquote(arg: &str) -> String {
    match arg.strip_prefix('"').and_then(|a| a.strip_suffix('"')) {
        Some(inner) => {
            let mut out = String::with_capacity(inner.len());
            let mut chars = inner.chars();
            while let Some(c) = chars.next() {
                if c == '\\' {
                    if let Some(next) = chars.next() {
                        out.push(next);
                    }
                } else {
                    out.push(c);
                }
            }
            out
        }
        None => arg.to_owned(),
    }
}

/// delta-seconds: one or more digits, capped at 2^31.
pub fn delta_seconds(arg: Option<&str>) -> Option<u64> {
    let digits = arg?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let significant = digits.trim_start_matches('0');
    if significant.is_empty() {
        return Some(0);
    }
    // Only overflow can fail here (all digits): such a value counts as 2^31.
    Some(significant.parse::<u64>().map_or(MAX_DELTA_SECONDS, |n| n.min(MAX_DELTA_SECONDS)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cc(lines: &[&str]) -> Directives {
        let values: Vec<HeaderValue> = lines.iter().map(|l| HeaderValue::from_str(l).expect("valid header")).collect();
        Directives::parse(&values)
    }

    #[test]
    fn parses_directives_case_insensitively_with_values() {
        let d = cc(&["Max-Age=60, nO-StOrE", "s-maxage=\"30\", stale-while-revalidate=5"]);
        assert_eq!((d.max_age, d.s_maxage, d.stale_while_revalidate), (Some(60), Some(30), Some(5)));
        assert!(d.no_store);
    }

    #[test]
    fn quoted_strings_do_not_split_or_hide_directives() {
        assert_eq!(cc(&["extension=\"max-age=3600\", max-age=1"]).max_age, Some(1));
        assert_eq!(cc(&["max-age=1, extension=\"max-age=3600\""]).max_age, Some(1));
        assert!(!cc(&["a=\"x, no-store\""]).no_store);
    }

    #[test]
    fn invalid_freshness_values_count_as_zero() {
        assert_eq!(cc(&["max-age=-3600"]).max_age, Some(0));
        assert_eq!(cc(&["max-age='3600'"]).max_age, Some(0));
        assert_eq!(cc(&["max-age=3600.5"]).max_age, Some(0));
        assert_eq!(cc(&["max-age =3600"]).max_age, None, "not a max-age directive at all");
        assert_eq!(cc(&["max-age=003600"]).max_age, Some(3600));
        assert_eq!(cc(&["max-age=0"]).max_age, Some(0));
        assert_eq!(cc(&["max-age=000"]).max_age, Some(0));
        assert_eq!(cc(&["max-age=99999999999999999999"]).max_age, Some(MAX_DELTA_SECONDS));
    }

    #[test]
    fn the_first_occurrence_wins() {
        assert_eq!(cc(&["max-age=1800, max-age=1"]).max_age, Some(1800));
        assert_eq!(cc(&["max-age=1", "max-age=1800"]).max_age, Some(1));
    }

    #[test]
    fn max_stale_without_a_value_accepts_any_staleness() {
        assert_eq!(cc(&["max-stale"]).max_stale, Some(u64::MAX));
        assert_eq!(cc(&["max-stale=10"]).max_stale, Some(10));
    }

    #[test]
    fn cdn_cache_control_is_a_structured_dictionary_or_ignored() {
        let sf = |s: &str| Directives::parse_structured(&[HeaderValue::from_str(s).expect("valid")]);
        assert_eq!(sf("max-age=10000").map(|d| d.max_age), Some(Some(10000)));
        assert_eq!(sf("no-store, private").map(|d| (d.no_store, d.private)), Some((true, true)));
        assert_eq!(sf("max-age=10000, &&&&&"), None, "invalid syntax");
        assert_eq!(sf("max-age=\"10000\""), None, "wrong type");
        assert_eq!(sf("max-age=-1"), None, "negative");
        assert_eq!(Directives::parse_structured(&[]), None, "absent");
        assert_eq!(sf(""), None, "empty");
        assert_eq!(sf("foo=@1700000000, max-age=1"), None, "RFC 8941 has no Date items");
        assert_eq!(sf("foo=(a b), max-age=1").map(|d| d.max_age), Some(Some(1)), "unknown members are ignored");
        assert_eq!(sf("max-age=(1)"), None, "a known directive as an inner list");
        assert_eq!(sf("no-cache=\"set-cookie\"").map(|d| d.no_cache), Some(true), "a field-name list");
        assert_eq!(sf("must-understand, no-store").map(|d| d.must_understand), Some(true));
        assert_eq!(sf("max-age=1, max-age=2").map(|d| d.max_age), Some(Some(2)), "RFC 8941: the last value");
    }

    #[test]
    fn surrogate_control_skips_what_is_not_for_larder() {
        let sc = |s: &str| Directives::parse_surrogate(&[HeaderValue::from_str(s).expect("valid")]);
        assert_eq!(sc("max-age=60, no-store;abc").map(|d| (d.max_age, d.no_store)), Some((Some(60), false)));
        assert_eq!(sc("max-age=60+30").map(|d| d.max_age), Some(Some(60)), "the extension is not implemented");
        assert_eq!(sc("max-age=60+x").map(|d| d.max_age), Some(Some(0)), "not max-age syntax");
        for silent in ["content=\"ESI/1.0\"", "no-store-remote", "", "max-age=60;abc", "foo"] {
            assert_eq!(sc(silent), None, "{silent}: nothing larder acts on, so Cache-Control governs");
        }
    }

    #[test]
    fn invalid_stale_values_allow_no_stale_use() {
        assert_eq!(cc(&["stale-if-error=-1"]).stale_if_error, Some(0));
        assert_eq!(cc(&["stale-while-revalidate"]).stale_while_revalidate, Some(0));
        assert_eq!(cc(&["stale-if-error=\"30\""]).stale_if_error, Some(30));
        assert_eq!(cc(&["max-age=1"]).stale_if_error, None, "absent: the configured default applies");
    }
}
