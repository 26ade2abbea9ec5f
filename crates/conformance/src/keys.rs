//! keys.json (spec/FORMAT.md §5): HTTP request keys, safe keys, namespaced keys, variant keys and alternate keys,
//! each section's cases through `larder_format::key`. Case names are prefixed with their section.

use std::path::Path;

use larder_format::key::{alternate_key, namespaced_key, safe_key, url_key, variant_key, KeyOptions, VaryMarker};
use larder_format::ContentEncoding;
use serde_json::Value;

use crate::{each, str_field, Checked};

pub fn check(path: &Path) -> Checked {
    let doc = crate::load(path)?;
    let mut results = Vec::new();
    type Section = (&'static str, fn(&Value));
    let sections: [Section; 5] = [
        ("http", http),
        ("safe", |case| assert_eq!(safe_key(str_field(case, "key")), str_field(case, "safe"))),
        ("namespaced", |case| {
            assert_eq!(namespaced_key(str_field(case, "namespace"), str_field(case, "key")), str_field(case, "full"))
        }),
        ("variants", variant),
        ("alternates", |case| {
            let coding: ContentEncoding = str_field(case, "coding").parse().expect("a coding");
            assert_eq!(alternate_key(str_field(case, "entry_key"), coding), str_field(case, "alternate_key"));
        }),
    ];
    for (section, check) in sections {
        let cases = doc[section].as_array().ok_or_else(|| format!("no section {section}"))?;
        results.extend(each(cases, check).into_iter().map(|(name, r)| (format!("{section}/{name}"), r)));
    }
    Ok(results)
}

fn http(case: &Value) {
    let mut options = KeyOptions::default();
    if let Some(ns) = case["namespace"].as_str() {
        options.namespace = ns.to_owned();
    }
    if let Some(drop) = case["drop"].as_array() {
        options.drop_params = drop.iter().map(|d| d.as_str().expect("pattern").to_owned()).collect();
    }
    let key = url_key(str_field(case, "method"), str_field(case, "url"), &options).expect("url parses");
    assert_eq!(key, str_field(case, "key"));
}

fn variant(case: &Value) {
    let marker: VaryMarker = serde_json::from_value(case["marker"].clone()).expect("a marker");
    let request: Vec<(String, String)> = case["request_headers"]
        .as_array()
        .expect("headers")
        .iter()
        .map(|line| (line[0].as_str().expect("name").to_owned(), line[1].as_str().expect("value").to_owned()))
        .collect();
    assert_eq!(variant_key(str_field(case, "base_key"), &marker, request.as_slice()), str_field(case, "variant_key"));
}
