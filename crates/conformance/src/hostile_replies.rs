//! hostile_replies.json (spec/STORES.md §2, "Replies are hostile too"): every operation of the memcached and Redis
//! stores against `larder-hostile`. For each case and each operation a hostile server is started and a fresh store
//! opened on it (so no ejection from an earlier operation answers at once), and the operation must fail with the
//! store's own error (not a success, not `invalid_key`, not a panic) within the case's `within_ms`.

use std::path::Path;
use std::time::{Duration, Instant};

use larder_store::{DynStore, StoreError};

use crate::{cases, each, entry_bytes, str_field, u64_field, Checked, Servers};

pub fn check(path: &Path, servers: &Servers) -> Checked {
    let doc = crate::load(path)?;
    let cases = cases(&doc)?;
    let entry = entry_bytes(&doc)?;
    let start = servers.hostile.as_ref().ok_or("LARDER_HOSTILE is not set: no larder-hostile to start")?;
    let runtime = crate::runtime()?;
    Ok(each(cases, |case| {
        let protocol = str_field(case, "protocol");
        let behaviour = str_field(case, "behaviour");
        let args: Vec<String> = case["server_args"]
            .as_array()
            .expect("server_args")
            .iter()
            .map(|a| a.as_str().expect("an argument").to_owned())
            .collect();
        let within = Duration::from_millis(u64_field(case, "within_ms"));
        let query = str_field(case, "url_query");
        let mut failed = Vec::new();
        for operation in case["operations"].as_array().expect("operations") {
            let op = operation.as_str().expect("an operation name");
            let server = start(protocol, behaviour, &args).unwrap_or_else(|e| panic!("{e}"));
            let url = format!("{protocol}://{}?{query}", server.address);
            let result = runtime.block_on(async {
                let store = larder_stores::open(&url).await.unwrap_or_else(|e| panic!("{url} opens: {e}"));
                let started = Instant::now();
                let outcome = call(store.as_ref(), op, &entry).await;
                (outcome, started.elapsed())
            });
            drop(server);
            match result {
                (Err(StoreError::Server { .. } | StoreError::Timeout { .. }), took) if took <= within => {}
                (Err(StoreError::Server { .. } | StoreError::Timeout { .. }), took) => {
                    failed.push(format!("{op}: the store's error after {} ms", took.as_millis()));
                }
                (other, _) => failed.push(format!("{op}: {other:?}")),
            }
        }
        assert!(failed.is_empty(), "{}", failed.join("; "));
    }))
}

/// Runs one operation on safe ASCII keys (`k1`, `k2`, `k3`, tag `t`, prefix `k`); `Ok` carries what it answered.
async fn call(store: &dyn DynStore, op: &str, entry: &[u8]) -> Result<String, StoreError> {
    let shown = |v: &dyn std::fmt::Debug| format!("{v:?}").chars().take(80).collect::<String>();
    match op {
        "get" => store.get("k1").await.map(|v| shown(&v.map(|v| v.len()))),
        "get_many" => store.get_many(&["k1", "k2", "k3"]).await.map(|v| shown(&v.len())),
        "set" => store.set("k1", entry, None).await.map(|()| "set".into()),
        "add" => store.add("k1", entry, None).await.map(|added| shown(&added)),
        "incr" => store.incr("k1", 1, None, true).await.map(|n| shown(&n)),
        "delete" => store.delete("k1").await.map(|deleted| shown(&deleted)),
        "delete_if" => store.delete_if("k1", entry).await.map(|deleted| shown(&deleted)),
        "purge_tag" => store.purge_tag("t").await.map(|purged| shown(&purged)),
        "purge_prefix" => store.purge_prefix("k").await.map(|purged| shown(&purged)),
        other => panic!("unknown operation {other:?}"),
    }
}
