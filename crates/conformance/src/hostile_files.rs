//! hostile_files.json (spec/STORES.md §7): a hostile directory under the file store. For each case,
//! `spec/vectors/hostile_tree.py plant` builds its links, foreign files, FIFO and planted store files under a fresh
//! ROOT and OUTSIDE, the store is opened on `file://ROOT` plus the case's query (through `larder_stores::open`, as
//! every caller opens it), the case's operations run with their expected outcomes, each within 5 s, and
//! `hostile_tree.py check` then finds that nothing planted was read, changed, followed or deleted, and that the
//! files the store made have the modes the case wants.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use larder_store::{DynStore, OpenError, StoreError};
use serde_json::Value;

use crate::{cases, each, entry_bytes, str_field, Checked};

/// How long one operation may take (a FIFO must not block a read).
const WITHIN: Duration = Duration::from_secs(5);

pub fn check(path: &Path) -> Checked {
    let doc = crate::load(path)?;
    let cases = cases(&doc)?;
    let entry = entry_bytes(&doc)?;
    let script = path.with_file_name("hostile_tree.py");
    if !script.is_file() {
        return Err(format!("{} is missing", script.display()));
    }
    let runtime = crate::runtime()?;
    Ok(each(cases, |case| runtime.block_on(one_case(&script, &entry, case))))
}

async fn one_case(script: &Path, entry: &[u8], case: &Value) {
    let name = str_field(case, "name");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (root, outside) = (dir.path().join("root"), dir.path().join("outside"));
    std::fs::create_dir(&root).expect("ROOT");
    std::fs::create_dir(&outside).expect("OUTSIDE");
    tree(script, "plant", name, &root, &outside);
    let query = str_field(case, "url_query");
    let url = format!("file://{}{}{query}", root.display(), if query.is_empty() { "" } else { "?" });
    let operations = case["operations"].as_array().expect("operations");
    let mut store: Option<Arc<dyn DynStore>> = None;
    for (i, operation) in operations.iter().enumerate() {
        let op = str_field(operation, "op");
        let expect = str_field(operation, "expect");
        let what = format!("operation {i} ({op}, expecting {expect})");
        let started = Instant::now();
        if op == "open" {
            let opened = tokio::time::timeout(WITHIN, larder_stores::open(&url)).await.expect("open within 5 s");
            match (expect, opened) {
                ("ok", Ok(opened)) => store = Some(opened),
                ("url_error", Err(OpenError::Url(_))) => {}
                (_, other) => panic!("{what}: got {:?}", other.map(|_| "a store")),
            }
            continue;
        }
        if store.is_none() {
            store = Some(larder_stores::open(&url).await.unwrap_or_else(|e| panic!("{url} opens: {e}")));
        }
        let store = store.as_ref().expect("opened");
        let key = operation["key"].as_str().unwrap_or("");
        let call = run(store.as_ref(), op, key, operation, entry);
        let outcome =
            tokio::time::timeout(WITHIN, call).await.unwrap_or_else(|_| panic!("{what}: no answer within {WITHIN:?}"));
        assert!(started.elapsed() < WITHIN, "{what}: took {:?}", started.elapsed());
        judge(&what, expect, outcome, entry);
    }
    drop(store);
    tree(script, "check", name, &root, &outside);
}

/// What an operation answered, in the terms of the case's `expect`.
#[derive(Debug)]
enum Outcome {
    Value(Option<Vec<u8>>),
    Flag(bool),
    Done,
    Failed(StoreError),
}

async fn run(store: &dyn DynStore, op: &str, key: &str, operation: &Value, entry: &[u8]) -> Outcome {
    let field = |name: &str| operation[name].as_str().unwrap_or_else(|| panic!("{op} has a {name}"));
    let result = match op {
        "get" => store.get(key).await.map(|v| Outcome::Value(v.map(|v| v.to_vec()))),
        "get_many" => store.get_many(&[key]).await.map(|mut v| Outcome::Value(v.pop().flatten().map(|v| v.to_vec()))),
        "set" => store.set(key, entry, None).await.map(|()| Outcome::Done),
        "add" => store.add(key, entry, None).await.map(Outcome::Flag),
        "delete" => store.delete(key).await.map(Outcome::Flag),
        "delete_if" => store.delete_if(key, entry).await.map(Outcome::Flag),
        "purge_prefix" => store.purge_prefix(field("prefix")).await.map(|_| Outcome::Done),
        "purge_tag" => store.purge_tag(field("tag")).await.map(|_| Outcome::Done),
        other => panic!("unknown operation {other:?}"),
    };
    result.unwrap_or_else(Outcome::Failed)
}

fn judge(what: &str, expect: &str, outcome: Outcome, entry: &[u8]) {
    let good = match (expect, &outcome) {
        ("miss", Outcome::Value(None)) => true,
        ("hit", Outcome::Value(Some(value))) => value == entry,
        ("ok", Outcome::Done | Outcome::Flag(true)) => true,
        ("error", Outcome::Failed(error)) => !matches!(error, StoreError::InvalidKey { .. }),
        ("deleted", Outcome::Flag(true)) => true,
        // Nothing removed, which `hostile_tree.py check` verifies; an error is not a no-op.
        ("noop", Outcome::Flag(_)) => true,
        _ => false,
    };
    assert!(good, "{what}: got {outcome:?}");
}

/// `python3 hostile_tree.py ACTION CASE ROOT OUTSIDE`, which must exit 0.
fn tree(script: &Path, action: &str, case: &str, root: &Path, outside: &Path) {
    let output = Command::new("python3")
        .arg(script)
        .args([action, case])
        .arg(root)
        .arg(outside)
        .output()
        .unwrap_or_else(|e| panic!("python3 {}: {e}", script.display()));
    assert!(
        output.status.success(),
        "hostile_tree.py {action}: {}{}",
        String::from_utf8_lossy(&output.stderr).trim(),
        String::from_utf8_lossy(&output.stdout).trim()
    );
}
