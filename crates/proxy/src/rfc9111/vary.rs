//! `Vary` (RFC 9111 §4.1): which request headers select among stored variants of one URL. A response that varies
//! on `*` never matches a later request, so it is not stored at all.

use http::header::VARY;
use http::HeaderMap;

/// The header names a response varies on (lowercase, sorted, without duplicates), or `None` for `Vary: *`.
pub fn vary_names(response: &HeaderMap) -> Option<Vec<String>> {
    let mut names = Vec::new();
    for line in response.get_all(VARY) {
        let text = line.to_str().ok()?;
        for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            if name == "*" {
                return None;
            }
            names.push(name.to_ascii_lowercase());
        }
    }
    names.sort();
    names.dedup();
    Some(names)
}

/// The selecting values of `request` for `names`: one line per name, `name: values` (lines of a repeated header
/// and the elements of each line joined with ",", whitespace around elements removed, RFC 9111 §4.1), and a
/// distinct mark for an absent header, so that "absent" and "empty" select different variants.
pub fn selecting_values(names: &[String], request: &HeaderMap) -> String {
    let mut out = String::new();
    for name in names {
        out.push_str(name);
        let mut values = request.get_all(name.as_str()).iter().peekable();
        if values.peek().is_none() {
            out.push_str("\u{0}absent\n");
            continue;
        }
        out.push(':');
        let elements: Vec<String> = values
            .flat_map(|v| {
                String::from_utf8_lossy(v.as_bytes())
                    .split(',')
                    .map(|e| e.trim_matches([' ', '\t']).to_owned())
                    .collect::<Vec<_>>()
            })
            .collect();
        out.push_str(&elements.join(","));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::rfc9111::test_headers as map;

    #[test]
    fn names_are_normalised_and_star_means_never() {
        assert_eq!(vary_names(&map(&[("vary", "Foo, bar"), ("vary", "FOO")])), Some(vec!["bar".into(), "foo".into()]));
        for star in [vec![("vary", "*")], vec![("vary", ", *")], vec![("vary", "Foo"), ("vary", "*")]] {
            assert_eq!(vary_names(&map(&star)), None);
        }
        assert_eq!(vary_names(&map(&[])), Some(vec![]));
    }

    #[test]
    fn absent_and_empty_headers_select_different_variants() {
        let names = vec!["foo".to_owned()];
        let absent = selecting_values(&names, &map(&[]));
        let empty = selecting_values(&names, &map(&[("foo", "")]));
        let one = selecting_values(&names, &map(&[("foo", " 1 ")]));
        assert_ne!(absent, empty);
        assert_eq!(one, selecting_values(&names, &map(&[("foo", "1")])));
        assert_eq!(
            selecting_values(&names, &map(&[("foo", " 1, 2 ")])),
            selecting_values(&names, &map(&[("foo", "1,2")])),
            "whitespace around list elements does not select another variant"
        );
        assert_eq!(
            selecting_values(&names, &map(&[("foo", "1"), ("foo", "2")])),
            selecting_values(&names, &map(&[("foo", "1, 2")])),
            "repeated lines are one list"
        );
    }
}
