//! `larder bench stores`: operations per second and p50/p99 latency of each store (get, get_many of 100 keys, set, at
//! the value sizes asked for), with many requests in flight at once, as a reference client (memcached's memcslap,
//! redis-benchmark) is run at the same concurrency by `bench/stores.sh` for the ratio.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use larder_store::Store;

use crate::Failure;

/// Measure get, get_many (100 keys) and set against stores, with many operations in flight.
///
/// Each phase runs --concurrency tasks for --seconds on a two-thread runtime; each task times its own operations.
/// Keys are spread over --keys per size; get and get_many read keys written beforehand.
#[derive(Args)]
pub struct StoresArgs {
    /// A store URL (spec/STORES.md); repeat to compare several in one run.
    #[arg(long = "store", value_name = "URL", required = true)]
    stores: Vec<String>,
    /// Operations in flight at once.
    #[arg(long, default_value_t = 50)]
    concurrency: usize,
    /// Seconds per phase.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Value sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1K,100K", value_parser = larder_store::parse_usize)]
    sizes: Vec<usize>,
    /// Distinct keys per size.
    #[arg(long, default_value_t = 1000)]
    keys: usize,
    /// Operations: any of get, get_many, set.
    #[arg(long, value_delimiter = ',', default_value = "set,get,get_many", value_parser = ["get", "get_many", "set"])]
    ops: Vec<String>,
    /// One JSON object per figure.
    #[arg(long)]
    json: bool,
}

/// One measured figure.
struct Figure {
    store: String,
    op: String,
    size: usize,
    ops_per_sec: f64,
    p50_ms: f64,
    p99_ms: f64,
    errors: u64,
}

pub fn run(args: StoresArgs) -> Result<(), Failure> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::input(format!("runtime: {e}")))?;
    runtime.block_on(async {
        if !args.json {
            crate::output::print_line(&format!(
                "{:<34} {:<9} {:>7} {:>12} {:>9} {:>9} {:>7}",
                "store", "op", "size", "ops/s", "p50 ms", "p99 ms", "errors"
            ))?;
        }
        for url in &args.stores {
            let store = larder_stores::open(url).await.map_err(|e| Failure::input(e.to_string()))?;
            for &size in &args.sizes {
                let prefix = format!("bench:{size}:");
                let keys: Arc<Vec<String>> = Arc::new((0..args.keys).map(|i| format!("{prefix}{i}")).collect());
                let value: Arc<Vec<u8>> = Arc::new((0..size).map(|i| (i % 251) as u8).collect());
                prefill(&store, &keys, &value).await.map_err(|e| Failure { status: 1, message: e.to_string() })?;
                for op in &args.ops {
                    let figure = measure(&store, url, op, size, &keys, &value, &args).await;
                    report(&figure, args.json)?;
                }
            }
        }
        Ok(())
    })
}

async fn prefill(
    store: &Arc<dyn larder_store::DynStore>,
    keys: &[String],
    value: &[u8],
) -> Result<(), larder_store::StoreError> {
    for chunk in keys.chunks(100) {
        let items: Vec<(&str, &[u8])> = chunk.iter().map(|k| (k.as_str(), value)).collect();
        store.set_many(&items, None).await?;
    }
    Ok(())
}

async fn measure(
    store: &Arc<dyn larder_store::DynStore>,
    url: &str,
    op: &str,
    size: usize,
    keys: &Arc<Vec<String>>,
    value: &Arc<Vec<u8>>,
    args: &StoresArgs,
) -> Figure {
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::with_capacity(args.concurrency);
    let started = Instant::now();
    for worker in 0..args.concurrency {
        let (store, keys, value, stop, op) = (store.clone(), keys.clone(), value.clone(), stop.clone(), op.to_owned());
        tasks.push(tokio::spawn(async move {
            let mut latencies: Vec<u32> = Vec::with_capacity(16 * 1024);
            let mut errors = 0u64;
            let mut rng = fastrand::Rng::with_seed(worker as u64);
            while !stop.load(Ordering::Relaxed) {
                let begun = Instant::now();
                let ok = match op.as_str() {
                    "set" => store.set(&keys[rng.usize(..keys.len())], &value, None).await.is_ok(),
                    "get" => store.get(&keys[rng.usize(..keys.len())]).await.is_ok(),
                    _ => {
                        let batch: Vec<&str> = (0..100).map(|_| keys[rng.usize(..keys.len())].as_str()).collect();
                        store.get_many(&batch).await.is_ok()
                    }
                };
                latencies.push(u32::try_from(begun.elapsed().as_micros()).unwrap_or(u32::MAX));
                errors += u64::from(!ok);
            }
            (latencies, errors)
        }));
    }
    tokio::time::sleep(Duration::from_secs_f64(args.seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    let mut errors = 0;
    for task in tasks {
        if let Ok((latencies, task_errors)) = task.await {
            all.extend(latencies);
            errors += task_errors;
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    all.sort_unstable();
    let percentile = |p: usize| all.get((all.len() * p / 100).min(all.len().saturating_sub(1))).copied().unwrap_or(0);
    let (p50, p99) = (percentile(50), percentile(99));
    Figure {
        store: larder_store::url::redact(url),
        op: op.to_owned(),
        size,
        ops_per_sec: all.len() as f64 / elapsed,
        p50_ms: f64::from(p50) / 1000.0,
        p99_ms: f64::from(p99) / 1000.0,
        errors,
    }
}

fn report(figure: &Figure, json: bool) -> Result<(), Failure> {
    let line = if json {
        serde_json::json!({
            "store": figure.store,
            "op": figure.op,
            "size": figure.size,
            "ops_per_sec": figure.ops_per_sec.round(),
            "p50_ms": figure.p50_ms,
            "p99_ms": figure.p99_ms,
            "errors": figure.errors,
        })
        .to_string()
    } else {
        format!(
            "{:<34} {:<9} {:>7} {:>12.0} {:>9.3} {:>9.3} {:>7}",
            figure.store, figure.op, figure.size, figure.ops_per_sec, figure.p50_ms, figure.p99_ms, figure.errors
        )
    };
    crate::output::print_line(&line)
}
