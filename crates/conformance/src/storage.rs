//! storage.json (spec/HTTP.md): `Rules::storage`, built from each case's settings as `larder serve` builds them,
//! gives every case's expected outcome; and the file's shape (unique names, notes, known reasons, sorted Vary
//! names) is checked as a case of its own, `file-shape`. The helpers are public so the proxy's end-to-end sample
//! (crates/proxy/tests/storage_vectors.rs) reads the cases the same way.

use std::path::Path;
use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use larder_proxy::rfc9111::{NotStored, Rules, StorePlan};
use serde_json::{json, Map, Value};

use crate::{cases, each, Checked};

/// Fills in every case's `expected` with what the Rust rules decide (`larder-conformance --answer`): the
/// differential test (spec/storage_differential.py) asks the other languages to agree with it on random cases.
pub fn answer(file: &mut Value) -> Result<(), String> {
    let snapshot = file.clone();
    let list = file["cases"].as_array_mut().ok_or("the file has no list of cases")?;
    for case in list.iter_mut() {
        case["expected"] = run(&snapshot, case);
    }
    Ok(())
}

pub fn check(path: &Path) -> Checked {
    let file = crate::load(path)?;
    let list = cases(&file)?;
    let mut results = each(&[json!({"name": "file-shape"})], |_| well_formed(&file));
    results.extend(each(list, |case| {
        let got = run(&file, case);
        assert!(got == case["expected"], "expected {}, got {got}", case["expected"]);
    }));
    Ok(results)
}

/// The case's rules: the file's defaults with the case's overrides.
pub fn knobs(file: &Value, case: &Value) -> Map<String, Value> {
    let mut merged = file["rules_defaults"].as_object().expect("rules_defaults").clone();
    for (key, value) in case["rules"].as_object().expect("rules") {
        assert!(merged.contains_key(key), "{}: unknown rule {key}", case["name"]);
        merged.insert(key.clone(), value.clone());
    }
    merged
}

pub fn secs(knobs: &Map<String, Value>, name: &str) -> u64 {
    knobs[name].as_u64().unwrap_or_else(|| panic!("{name} is a whole number of seconds"))
}

pub fn flag(knobs: &Map<String, Value>, name: &str) -> bool {
    knobs[name].as_bool().unwrap_or_else(|| panic!("{name} is a boolean"))
}

pub fn targeted(knobs: &Map<String, Value>) -> Vec<String> {
    knobs["targeted_fields"]
        .as_array()
        .expect("targeted_fields")
        .iter()
        .map(|f| f.as_str().expect("a field name").to_owned())
        .collect()
}

/// `Rules` as `larder serve` builds them from the same settings (ProxyConfig::rules).
pub fn rules(knobs: &Map<String, Value>) -> Rules {
    let heuristic = secs(knobs, "heuristic_max_secs");
    Rules {
        targeted_fields: targeted(knobs)
            .iter()
            .map(|f| HeaderName::try_from(f.as_str()).expect("a field name"))
            .collect(),
        surrogate_control: flag(knobs, "surrogate_control"),
        heuristic_cap: (heuristic > 0).then(|| Duration::from_secs(heuristic)),
        cache_set_cookie: flag(knobs, "cache_set_cookie"),
        default_stale_while_revalidate: Duration::from_secs(secs(knobs, "stale_while_revalidate_secs")),
        default_stale_if_error: Duration::from_secs(secs(knobs, "stale_if_error_secs")),
        revalidation_window: Duration::from_secs(secs(knobs, "revalidation_window_secs")),
        honor_request_directives: flag(knobs, "honor_request_cache_control"),
    }
}

pub fn pairs(headers: &Value) -> Vec<(String, String)> {
    headers
        .as_array()
        .expect("headers")
        .iter()
        .map(|pair| {
            let pair = pair.as_array().expect("[name, value]");
            assert_eq!(pair.len(), 2, "a header is [name, value]");
            (pair[0].as_str().expect("name").to_owned(), pair[1].as_str().expect("value").to_owned())
        })
        .collect()
}

pub fn header_map(headers: &Value) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs(headers) {
        map.append(
            HeaderName::from_bytes(name.as_bytes()).expect("a valid field name"),
            HeaderValue::from_str(&value).expect("a valid field value"),
        );
    }
    map
}

pub fn outcome(result: Result<StorePlan, NotStored>) -> Value {
    match result {
        Ok(plan) => json!({
            "stored": true,
            "fresh_ms": plan.fresh_ms,
            "initial_age_ms": plan.initial_age_ms,
            "keep_stale_ms": plan.keep_stale_ms,
            "vary": plan.vary,
        }),
        Err(reason) => json!({"stored": false, "reason": reason.detail()}),
    }
}

pub fn run(file: &Value, case: &Value) -> Value {
    let rules = rules(&knobs(file, case));
    let method = Method::from_bytes(case["request"]["method"].as_str().expect("method").as_bytes()).expect("method");
    let status = StatusCode::from_u16(case["response"]["status"].as_u64().expect("status") as u16).expect("status");
    let time = |name: &str| case[name].as_u64().unwrap_or_else(|| panic!("{name} in ms"));
    outcome(rules.storage(
        &method,
        &header_map(&case["request"]["headers"]),
        status,
        &header_map(&case["response"]["headers"]),
        time("request_time_ms"),
        time("response_time_ms"),
    ))
}

fn well_formed(file: &Value) {
    assert_eq!(file["schema"], 1);
    let reasons = [
        "method",
        "status",
        "no-store",
        "request-no-store",
        "private",
        "authorization",
        "set-cookie",
        "vary-star",
        "no-explicit-freshness",
    ];
    let mut names = std::collections::HashSet::new();
    for case in file["cases"].as_array().expect("cases") {
        let name = case["name"].as_str().expect("name");
        assert!(names.insert(name), "{name} is not unique");
        assert!(!case["note"].as_str().expect("note").is_empty(), "{name} has a note");
        let expected = case["expected"].as_object().expect("expected");
        if expected["stored"] == true {
            let mut keys: Vec<&str> = expected.keys().map(String::as_str).collect();
            keys.sort_unstable();
            assert_eq!(keys, ["fresh_ms", "initial_age_ms", "keep_stale_ms", "stored", "vary"], "{name}");
            let vary: Vec<&str> =
                expected["vary"].as_array().expect("vary").iter().map(|v| v.as_str().expect("a name")).collect();
            let mut normal: Vec<&str> = vary.clone();
            normal.sort_unstable();
            normal.dedup();
            assert_eq!(vary, normal, "{name}: vary is sorted and unique");
            assert!(vary.iter().all(|v| v.bytes().all(|b| !b.is_ascii_uppercase())), "{name}: vary is lowercase");
        } else {
            let reason = expected["reason"].as_str().expect("reason");
            assert!(reasons.contains(&reason), "{name}: unknown reason {reason}");
        }
    }
    assert!(names.len() >= 300, "several hundred cases, found {}", names.len());
}
