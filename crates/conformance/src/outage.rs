//! outage.json (spec/STORES.md §3, "When the store fails"): `fetch` with `larder-faults` between the cache and a
//! real memcached or Redis. Each case gets a fault proxy of its own, a *faulted* cache over the proxy and a *direct*
//! cache over the server, both under a fresh namespace, and runs its steps (spec/vectors/README.md, outage.json).

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use larder_cache::Cache;
use larder_store::{DynStore, Store};
use serde_json::Value;

use crate::{cases, each, str_field, u64_field, Checked, Servers};

type Shared = Cache<Arc<dyn DynStore>>;

/// A fault proxy in front of a server, driven by `larder-faults`'s command lines.
pub trait FaultControl: Send {
    /// `127.0.0.1:PORT` of the proxy.
    fn address(&self) -> String;
    /// Sets a fault (`freeze`, `pass`, …); `Err` with the proxy's answer if it is not `ok`.
    fn command(&mut self, line: &str) -> Result<(), String>;
}

/// Starts a fault proxy in front of `HOST:PORT`.
pub type StartFaults = dyn Fn(&str) -> Result<Box<dyn FaultControl>, String> + Send + Sync;

const TTL: Duration = Duration::from_secs(60);

pub fn check(path: &Path, servers: &Servers) -> Checked {
    let doc = crate::load(path)?;
    let cases = cases(&doc)?;
    let start = servers.faults.as_ref().ok_or("LARDER_FAULTS is not set: no larder-faults to start")?;
    let runtime = crate::runtime()?;
    Ok(each(cases, |case| {
        let store = str_field(case, "store");
        let server = match store {
            "memcached" => servers.memcached.as_ref().expect("LARDER_CONFORMANCE_MEMCACHED is not set"),
            "redis" => servers.redis.as_ref().expect("LARDER_CONFORMANCE_REDIS is not set"),
            other => panic!("unknown store {other:?}"),
        };
        let mut faults = start(server).unwrap_or_else(|e| panic!("{e}"));
        let query = str_field(case, "url_query");
        let url = |address: &str, query: &str| match store {
            "redis" => format!("redis://{address}/0?{query}"),
            _ => format!("memcached://{address}?{query}"),
        };
        let (faulted_url, direct_url) = (url(&faults.address(), query), url(server, ""));
        let namespace = format!("outage{:016x}", fastrand_u64());
        let steps = case["steps"].as_array().expect("steps");
        runtime.block_on(async {
            let open = |url: String| {
                let namespace = namespace.clone();
                async move {
                    let store = larder_stores::open(&url).await.unwrap_or_else(|e| panic!("{url}: {e}"));
                    Cache::builder(store).namespace(namespace).build()
                }
            };
            let faulted = open(faulted_url).await;
            let direct = open(direct_url).await;
            for (i, step) in steps.iter().enumerate() {
                run_step(step, faults.as_mut(), &faulted, &direct).await.unwrap_or_else(|e| panic!("step {i}: {e}"));
            }
        });
    }))
}

async fn run_step(
    step: &Value,
    faults: &mut dyn FaultControl,
    faulted: &Shared,
    direct: &Shared,
) -> Result<(), String> {
    if let Some(command) = step["fault"].as_str() {
        let command = command.to_owned();
        return faults.command(&command);
    }
    if let Some(burst) = step.get("burst") {
        return run_burst(burst, &step["expect"], faulted).await;
    }
    if let Some(write) = step.get("write_direct") {
        let (key, value) = (str_field(write, "key"), str_field(write, "value"));
        return direct
            .write(key, value, &larder_cache::WriteOptions::ttl(TTL))
            .await
            .map_err(|e| format!("write_direct: {e}"));
    }
    if let Some(read) = step.get("read_direct") {
        let (key, value) = (str_field(read, "key"), str_field(read, "value"));
        let found: Option<String> = direct.read(key).await.map_err(|e| format!("read_direct: {e}"))?;
        return match found.as_deref() == Some(value) {
            true => Ok(()),
            false => Err(format!("read_direct {key}: {found:?}, not {value:?}")),
        };
    }
    if step.get("flush_direct").is_some() {
        return Store::clear(direct.store()).await.map_err(|e| format!("flush_direct: {e}"));
    }
    if let Some(wait) = step.get("await_value") {
        let (key, value, loaded) = (str_field(wait, "key"), str_field(wait, "value"), str_field(wait, "loader_value"));
        let deadline = Instant::now() + Duration::from_millis(u64_field(wait, "within_ms"));
        loop {
            let got = faulted
                .fetch(key, TTL, || async { Ok::<_, std::io::Error>(loaded.to_owned()) })
                .await
                .map_err(|e| format!("await_value: fetch failed: {e}"))?;
            if got == value {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!("await_value {key}: still {got:?}, not {value:?}"));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Err(format!("unknown step {step}"))
}

/// `rounds` rounds of `callers` concurrent fetches of one key, counting the loader's runs.
async fn run_burst(burst: &Value, expect: &Value, faulted: &Shared) -> Result<(), String> {
    let key = str_field(burst, "key").to_owned();
    let value = str_field(burst, "loader_value").to_owned();
    let pause = Duration::from_millis(u64_field(burst, "loader_ms"));
    let within = Duration::from_millis(u64_field(expect, "round_within_ms"));
    let expected = str_field(expect, "value");
    let loads = Arc::new(AtomicUsize::new(0));
    for round in 0..u64_field(burst, "rounds") {
        let started = Instant::now();
        // Concurrent on one task (join_all), which is what coalescing needs: the callers overlap in time.
        let calls = (0..u64_field(burst, "callers")).map(|_| {
            let (value, loads) = (value.clone(), loads.clone());
            faulted.fetch(&key, TTL, move || async move {
                loads.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(pause).await;
                Ok::<_, std::io::Error>(value)
            })
        });
        for result in futures_util::future::join_all(calls).await {
            match result {
                Ok(got) if got == expected => {}
                Ok(got) => return Err(format!("round {round}: a caller got {got:?}, not {expected:?}")),
                Err(e) => return Err(format!("round {round}: a caller got an error: {e}")),
            }
        }
        let took = started.elapsed();
        if took > within {
            return Err(format!("round {round} took {} ms, more than {} ms", took.as_millis(), within.as_millis()));
        }
    }
    let ran = loads.load(Ordering::SeqCst) as u64;
    if let Some(exactly) = expect["loads"].as_u64() {
        if ran != exactly {
            return Err(format!("the loader ran {ran} times, not {exactly}"));
        }
    }
    if let Some(most) = expect["loads_at_most"].as_u64() {
        if ran > most {
            return Err(format!("the loader ran {ran} times, more than {most}"));
        }
    }
    Ok(())
}

/// A random namespace suffix, so runs never share keys on a shared server.
fn fastrand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    hasher.finish()
}
