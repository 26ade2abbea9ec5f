//! spec/vectors/storage.json through a real proxy: a sample of cases end to end (the response stored or not, a HIT
//! or a MISS on the next request, the `Cache-Status` detail). Every case against `Rules::storage` is the Rust column
//! of the conformance matrix (crates/conformance), whose readers of the cases this test shares. The cases and their
//! format are described in spec/vectors/README.md; the rules they check in spec/HTTP.md.

mod support;

use bytes::Bytes;
use http::StatusCode;
use larder_conformance::storage::{flag, knobs, pairs, secs, targeted};
use larder_proxy::ProxyConfig;
use larder_store::ManualClock;
use serde_json::{json, Map, Value};
use support::{send, Got, Larder, Origin};

fn load() -> Value {
    larder_conformance::load(&larder_conformance::vectors_dir().join("storage.json")).expect("storage.json")
}

fn cases(file: &Value) -> &Vec<Value> {
    file["cases"].as_array().expect("cases")
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
