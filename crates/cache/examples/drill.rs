//! The fetch drill (issue 33; bench/drills.py runs it): `workers` callers `fetch` random keys of `keys` from a
//! store for `seconds`, the loader standing for the app (it sleeps `loader-ms` and returns a query-result-shaped
//! value of about 1 KiB), and one JSON line per interval says what they saw: calls, errors, loads and latency.
//! The harness freezes, kills, slows or empties the store meanwhile; the contract is bench/drills.py's.
//!
//! `cargo run --release -p larder-cache --example drill -- --store URL --seconds S [--workers 16] [--keys 50]
//! [--ttl-ms 60000] [--loader-ms 20] [--interval-ms 250]`

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use larder_cache::Cache;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

const USAGE: &str =
    "usage: drill --store URL --seconds S [--workers 16] [--keys 50] [--ttl-ms 60000] [--loader-ms 20] \
[--interval-ms 250]
Fetches random keys drill:0..keys from the store with `workers` callers for S seconds; the loader sleeps loader-ms
and returns a ~1 KiB query result. Prints one JSON line per interval (t_ms, calls, errors, loads, p50_ms, p99_ms,
max_ms) and a last {\"done\": true, …} line.";

#[derive(Clone, Serialize, Deserialize)]
struct Row {
    i: u32,
    name: String,
    score: f64,
}

#[derive(Clone, Serialize, Deserialize)]
struct QueryResult {
    id: u64,
    rows: Vec<Row>,
}

struct Options {
    store: String,
    seconds: u64,
    workers: u64,
    keys: u64,
    ttl_ms: u64,
    loader_ms: u64,
    interval_ms: u64,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        store: String::new(),
        seconds: 0,
        workers: 16,
        keys: 50,
        ttl_ms: 60_000,
        loader_ms: 20,
        interval_ms: 250,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = || value.parse::<u64>().map_err(|_| format!("{flag}: {value:?} is not a whole number"));
        match flag.as_str() {
            "--store" => o.store = value.clone(),
            "--seconds" => o.seconds = number()?,
            "--workers" => o.workers = number()?.max(1),
            "--keys" => o.keys = number()?.max(1),
            "--ttl-ms" => o.ttl_ms = number()?,
            "--loader-ms" => o.loader_ms = number()?,
            "--interval-ms" => o.interval_ms = number()?.max(10),
            other => return Err(format!("unknown option {other}")),
        }
    }
    if o.store.is_empty() || o.seconds == 0 {
        return Err("--store and --seconds are required".into());
    }
    Ok(o)
}

/// What the callers saw in the current interval.
#[derive(Default)]
struct Interval {
    latencies_us: Vec<u64>,
    errors: u64,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let options = match parse(&args) {
        Ok(options) => options,
        Err(why) => {
            eprintln!("drill: {why}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("drill: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run(options));
    // Calls stuck on a frozen store are abandoned, not waited for.
    runtime.shutdown_timeout(Duration::from_millis(100));
    ExitCode::SUCCESS
}

async fn run(o: Options) {
    let store = match larder_stores::open(&o.store).await {
        Ok(store) => store,
        Err(e) => {
            eprintln!("drill: {e}");
            std::process::exit(2);
        }
    };
    let cache = Cache::new(store);
    let started = Instant::now();
    let end = started + Duration::from_secs(o.seconds);
    let interval = Arc::new(Mutex::new(Interval::default()));
    let loads = Arc::new(AtomicU64::new(0));
    let (ttl, pause) = (Duration::from_millis(o.ttl_ms), Duration::from_millis(o.loader_ms));
    // The callers run concurrently on this task (a cache over a store chosen at run time is not `Send` across
    // spawned tasks' higher-ranked bounds); the store's own connections run on the runtime's threads.
    let workers = futures_util::future::join_all((0..o.workers).map(|_| {
        let (cache, interval, loads, keys) = (cache.clone(), interval.clone(), loads.clone(), o.keys);
        async move {
            while Instant::now() < end {
                let n = fastrand::u64(..keys);
                let called = Instant::now();
                let loads = loads.clone();
                let got = cache
                    .fetch(&format!("drill:{n}"), ttl, move || async move {
                        loads.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(pause).await;
                        Ok::<_, std::io::Error>(query_result(n))
                    })
                    .await;
                let took = called.elapsed().as_micros() as u64;
                {
                    let mut now = interval.lock();
                    now.latencies_us.push(took);
                    if got.is_err() {
                        now.errors += 1;
                    }
                }
                // A fetch answered from memory never waits, so give the reporter (on this task) its turn.
                tokio::task::yield_now().await;
            }
        }
    }));
    // The report decides when the run ends: callers that finish early wait for it, and callers stuck on a frozen
    // store are abandoned when it is done.
    let workers = async {
        workers.await;
        std::future::pending::<()>().await;
    };
    tokio::select! {
        () = workers => {}
        () = report(&o, started, end, &interval, &loads) => {}
    }
}

/// One JSON line per interval until `end`, then the totals.
async fn report(o: &Options, started: Instant, end: Instant, interval: &Mutex<Interval>, loads: &AtomicU64) {
    let (mut calls, mut errors, mut loaded) = (0u64, 0u64, 0u64);
    let mut tick = tokio::time::interval(Duration::from_millis(o.interval_ms));
    tick.tick().await;
    while Instant::now() < end {
        tick.tick().await;
        let seen = std::mem::take(&mut *interval.lock());
        let loads_now = loads.swap(0, Ordering::Relaxed);
        let mut latencies = seen.latencies_us;
        latencies.sort_unstable();
        let at = |q: f64| latencies.get(((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1)));
        let ms = |us: Option<&u64>| us.map_or(0.0, |us| *us as f64 / 1000.0);
        calls += latencies.len() as u64;
        errors += seen.errors;
        loaded += loads_now;
        println!(
            "{}",
            serde_json::json!({
                "t_ms": started.elapsed().as_millis() as u64,
                "calls": latencies.len(),
                "errors": seen.errors,
                "loads": loads_now,
                "p50_ms": ms(at(0.5)),
                "p99_ms": ms(at(0.99)),
                "max_ms": ms(latencies.last()),
            })
        );
    }
    println!("{}", serde_json::json!({"done": true, "calls": calls, "errors": errors, "loads": loaded}));
}

/// A query result of about 1 KiB: a map holding a list of small maps.
fn query_result(id: u64) -> QueryResult {
    QueryResult {
        id,
        rows: (0..24).map(|j| Row { i: j, name: format!("row {j}"), score: f64::from(j) * 1.5 }).collect(),
    }
}
