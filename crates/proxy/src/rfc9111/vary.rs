//! `Vary` (RFC 9111 §4.1): which request headers select among stored variants of one URL. A response that varies
//! on `*` never matches a later request, so it is not stored at all. The selecting values and variant keys every
//! language computes alike are in `larder_format::key`.

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
}
