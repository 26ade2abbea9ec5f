//! spec/vectors/storage.json against the front: `Rules::storage` on every case, then a sample of cases end to end
//! through a real proxy (the response stored or not, a HIT or a MISS on the next request, the `Cache-Status` detail).
//! The cases and their format are described in spec/vectors/README.md; the rules they check in spec/HTTP.md.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use larder_proxy::rfc9111::{NotStored, Rules, StorePlan};
use larder_proxy::ProxyConfig;
use larder_store::ManualClock;
use serde_json::{json, Map, Value};
use support::{send, Got, Larder, Origin};

fn load() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../spec/vectors/storage.json");
    let text = std::fs::read_to_string(&path).expect("storage.json is readable");
    serde_json::from_str(&text).expect("storage.json is JSON")
}

fn cases(file: &Value) -> &Vec<Value> {
    file["cases"].as_array().expect("cases")
}

/// The case's rules: the file's defaults with the case's overrides.
fn knobs(file: &Value, case: &Value) -> Map<String, Value> {
    let mut merged = file["rules_defaults"].as_object().expect("rules_defaults").clone();
    for (key, value) in case["rules"].as_object().expect("rules") {
        assert!(merged.contains_key(key), "{}: unknown rule {key}", case["name"]);
        merged.insert(key.clone(), value.clone());
    }
    merged
}

fn secs(knobs: &Map<String, Value>, name: &str) -> u64 {
    knobs[name].as_u64().unwrap_or_else(|| panic!("{name} is a whole number of seconds"))
}

fn flag(knobs: &Map<String, Value>, name: &str) -> bool {
    knobs[name].as_bool().unwrap_or_else(|| panic!("{name} is a boolean"))
}

fn targeted(knobs: &Map<String, Value>) -> Vec<String> {
    knobs["targeted_fields"]
        .as_array()
        .expect("targeted_fields")
        .iter()
        .map(|f| f.as_str().expect("a field name").to_owned())
        .collect()
}

/// `Rules` as `larder serve` builds them from the same settings (ProxyConfig::rules).
fn rules(knobs: &Map<String, Value>) -> Rules {
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

fn pairs(headers: &Value) -> Vec<(String, String)> {
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

fn header_map(headers: &Value) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs(headers) {
        map.append(
            HeaderName::from_bytes(name.as_bytes()).expect("a valid field name"),
            HeaderValue::from_str(&value).expect("a valid field value"),
        );
    }
    map
}

fn outcome(result: Result<StorePlan, NotStored>) -> Value {
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

fn run(file: &Value, case: &Value) -> Value {
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

#[test]
fn the_file_is_well_formed() {
    let file = load();
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
    for case in cases(&file) {
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

#[test]
fn rules_storage_gives_every_expected_outcome() {
    let file = load();
    let mut failures = Vec::new();
    for case in cases(&file) {
        let got = run(&file, case);
        if got != case["expected"] {
            failures.push(format!("{}: expected {}, got {got}", case["name"], case["expected"]));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases fail:\n{}", failures.len(), cases(&file).len(), failures.join("\n"));
}

// --- end to end -------------------------------------------------------------------------------------------------

/// Cases run through a real proxy: stored or not, fresh, stale and varying responses, and the rules larder chose
/// (spec/HTTP.md §1.9). Each needs a GET without Authorization (such requests bypass coalescing and report
/// `authorization` whatever the response says) and no response delay (the origin answers at the proxy's clock).
const END_TO_END: &[&str] = &[
    "method_get",
    "no_store",
    "private",
    "set_cookie",
    "set_cookie_allowed",
    "vary_star",
    "cc_space_before_equals",
    "cc_quoted_max_age",
    "status_404_max_age",
    "status_600_max_age",
    "must_understand_200",
    "must_understand_500",
    "date_past",
    "age_30",
    "expires_date_in_past",
    "expires_invalid_zero_no_stale_window",
    "vary_two_sorted",
    "vary_accept_encoding_deflate",
    "no_cache_with_etag",
    "s_maxage_overrides_max_age",
    "swr_from_response",
    "cdn_over_cc_no_store",
    "cdn_invalid_falls_back_to_no_store",
    "cdn_must_understand",
    "surrogate_content_only",
    "surrogate_targeted_elsewhere",
    "targeted_not_on_list",
];

fn configure(config: &mut ProxyConfig, knobs: &Map<String, Value>) {
    let c = &mut config.cache;
    c.targeted_fields = targeted(knobs);
    c.surrogate_control = flag(knobs, "surrogate_control");
    c.heuristic_max_secs = secs(knobs, "heuristic_max_secs");
    c.cache_set_cookie = flag(knobs, "cache_set_cookie");
    c.stale_while_revalidate_secs = secs(knobs, "stale_while_revalidate_secs");
    c.stale_if_error_secs = secs(knobs, "stale_if_error_secs");
    c.revalidation_window_secs = secs(knobs, "revalidation_window_secs");
    c.honor_request_cache_control = flag(knobs, "honor_request_cache_control");
    // Every request reaches the rules, so each not-stored response reports its own reason.
    c.hit_for_miss_secs = 0;
}

/// The `detail` parameter of larder's `Cache-Status` member.
fn detail(got: &Got) -> Option<String> {
    let status = got.header("cache-status")?;
    status.split(';').map(str::trim).find_map(|p| p.strip_prefix("detail=")).map(str::to_owned)
}

async fn end_to_end(file: &Value, case: &Value) {
    let name = case["name"].as_str().expect("name");
    let request_time = case["request_time_ms"].as_u64().expect("request time");
    assert_eq!(Some(request_time), case["response_time_ms"].as_u64(), "{name}: end to end needs no response delay");
    assert_eq!(case["request"]["method"], "GET", "{name}");
    let response: Vec<(&'static str, String)> = pairs(&case["response"]["headers"])
        .into_iter()
        .map(|(n, v)| (&*Box::leak(n.to_ascii_lowercase().into_boxed_str()), v))
        .collect();
    let status = StatusCode::from_u16(case["response"]["status"].as_u64().expect("status") as u16).expect("status");
    let origin = Origin::start(move |_| (status, response.clone(), Bytes::from_static(b"page"))).await;
    let knobs = knobs(file, case);
    let clock = ManualClock::new(request_time);
    let larder = Larder::start_at(&origin.url(), clock, |c| configure(c, &knobs)).await;
    let request = pairs(&case["request"]["headers"]);
    let request: Vec<(&str, &str)> = request.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let url = larder.url(&format!("/{name}"));
    let path = format!("/{name}");
    let fetch = || send("GET", &url, &request, Bytes::new());

    let first = fetch().await;
    assert_eq!((first.status, first.cache()), (status, "MISS"), "{name}: first request");
    let expected = &case["expected"];
    if expected["stored"] == false {
        let reason = expected["reason"].as_str().expect("reason");
        assert_eq!(detail(&first).as_deref(), Some(reason), "{name}: Cache-Status {:?}", first.header("cache-status"));
        let second = fetch().await;
        assert_eq!((second.cache(), detail(&second).as_deref()), ("MISS", Some(reason)), "{name}: second request");
        assert_eq!(origin.count(&path), 2, "{name}: not stored, so fetched again");
        return;
    }
    assert!(first.header("cache-status").is_some_and(|s| s.contains("stored")), "{name}: {:?}", first.headers);
    let fresh_ms = expected["fresh_ms"].as_u64().expect("fresh_ms");
    let keep_ms = expected["keep_stale_ms"].as_u64().expect("keep_stale_ms");
    let second = fetch().await;
    if fresh_ms == 0 {
        // Stale at once: reused only after asking the origin again.
        assert_ne!(second.cache(), "HIT", "{name}: stale from the start");
        assert_eq!(origin.count(&path), 2, "{name}: revalidated");
        return;
    }
    assert_eq!(second.cache(), "HIT", "{name}: second request");
    let age = expected["initial_age_ms"].as_u64().expect("initial_age_ms") / 1000;
    assert_eq!(second.header("age"), Some(age.to_string().as_str()), "{name}: Age is the initial age");
    assert_eq!(origin.count(&path), 1, "{name}: served from the cache");
    // Just past freshness: served stale when a stale window allows it, else fetched again.
    larder.clock.advance_ms(fresh_ms + 1_000);
    let later = fetch().await;
    let swr = case["response"]["headers"].to_string().contains("stale-while-revalidate");
    match (keep_ms, swr) {
        (0, _) => assert_eq!(later.cache(), "MISS", "{name}: nothing kept past freshness"),
        (_, true) => assert_eq!(later.cache(), "STALE", "{name}: within stale-while-revalidate"),
        _ => assert_ne!(later.cache(), "HIT", "{name}: past freshness"),
    }
}

#[tokio::test]
async fn a_sample_of_cases_through_a_real_proxy() {
    let file = load();
    for name in END_TO_END {
        let case = cases(&file).iter().find(|c| c["name"] == *name).unwrap_or_else(|| panic!("no case {name}"));
        end_to_end(&file, case).await;
    }
}

#[tokio::test]
async fn a_varying_response_is_a_hit_only_for_the_same_request_headers() {
    let file = load();
    let case = cases(&file).iter().find(|c| c["name"] == "vary_two_sorted").expect("case");
    assert_eq!(case["expected"]["vary"], json!(["accept", "user-agent"]));
    let response: Vec<(&'static str, String)> = pairs(&case["response"]["headers"])
        .into_iter()
        .map(|(n, v)| (&*Box::leak(n.to_ascii_lowercase().into_boxed_str()), v))
        .collect();
    let origin = Origin::start(move |_| (StatusCode::OK, response.clone(), Bytes::from_static(b"page"))).await;
    let larder = Larder::start_at(&origin.url(), ManualClock::new(1_700_000_000_000), |_| {}).await;
    let url = larder.url("/v");
    let ua = |agent: &'static str| vec![("accept", "text/html"), ("user-agent", agent)];
    assert_eq!(send("GET", &url, &ua("a"), Bytes::new()).await.cache(), "MISS");
    assert_eq!(send("GET", &url, &ua("a"), Bytes::new()).await.cache(), "HIT");
    assert_eq!(send("GET", &url, &ua("b"), Bytes::new()).await.cache(), "MISS", "another User-Agent");
    assert_eq!(send("GET", &url, &[("user-agent", "a")], Bytes::new()).await.cache(), "MISS", "no Accept");
    assert_eq!(origin.count("/v"), 3);
}
