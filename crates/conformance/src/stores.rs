//! stores.json (spec/STORES.md §2): the key a store writes for a caller's key under its prefix, its bookkeeping
//! keys, and the keys every store refuses (or accepts at the edge of the rule) before sending anything.

use std::path::Path;

use larder_store::keys::{check_key, internal_key, stored_key};
use larder_store::StoreError;

use crate::{cases, each, str_field, Checked};

pub fn check(path: &Path) -> Checked {
    let doc = crate::load(path)?;
    let cases = cases(&doc)?;
    // Older cases have no name: name them by kind and position.
    let named: Vec<serde_json::Value> = cases
        .iter()
        .enumerate()
        .map(|(i, case)| {
            let mut case = case.clone();
            if case["name"].is_null() {
                case["name"] = format!("{}-{i}", case["kind"].as_str().unwrap_or("case")).into();
            }
            case
        })
        .collect();
    Ok(each(&named, |case| {
        let text = |field: &str| str_field(case, field).to_owned();
        let key_bytes = || hex::decode(text("key_hex")).expect("hex");
        match case["kind"].as_str() {
            Some("stored") => {
                let got = stored_key("test", &text("prefix"), &text("key")).expect("a safe key").into_owned();
                assert_eq!(got, text("stored_key"));
            }
            Some("internal") => {
                assert_eq!(internal_key(&text("prefix"), &text("purpose"), &text("name")), text("stored_key"))
            }
            // Keys that are not UTF-8 cannot reach a Rust store at all (`&str`): refused by the type.
            Some("refused") => {
                if let Ok(key) = String::from_utf8(key_bytes()) {
                    assert!(matches!(check_key("test", &key), Err(StoreError::InvalidKey { .. })), "{key:?} refused");
                }
            }
            Some("accepted") => {
                let key = String::from_utf8(key_bytes()).expect("UTF-8");
                assert!(check_key("test", &key).is_ok(), "{key:?} accepted");
            }
            other => panic!("unknown kind {other:?}"),
        }
    }))
}
