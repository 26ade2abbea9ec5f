//! `larder demo`: the experiment of the source post (003) on this machine. A built-in slow app (a pool of
//! workers, 50 ms per request) is measured directly and through larder, for 100, 1,000 and 10,000 requests,
//! and the table of seconds and speedups is printed. No external service is needed.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Args;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use larder_proxy::origin::Origin;
use larder_proxy::{ProxyConfig, Server};
use larder_store::SystemClock;

use crate::output::write_stdout;
use crate::Failure;

/// Show what larder does for a slow app: the same requests, directly and through larder.
///
/// Starts a built-in app (a pool of workers that each take --delay-ms per request, like Rails workers) and larder
/// in front of it on loopback, sends each batch of requests to both with --concurrency clients, prints the table,
/// and stops everything.
#[derive(Args)]
pub struct DemoArgs {
    /// Batches of requests, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "100,1000,10000")]
    requests: Vec<usize>,
    /// Concurrent clients.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Milliseconds the app spends on each request.
    #[arg(long, default_value_t = 50)]
    delay_ms: u64,
    /// The app's workers (requests it handles at once).
    #[arg(long, default_value_t = 16)]
    workers: usize,
    /// Size of the page in bytes.
    #[arg(long, default_value_t = 10_000)]
    page_bytes: usize,
    /// Only run the built-in slow app on ADDR (e.g. 127.0.0.1:3000), until stopped, to put `larder serve` in front
    /// of it by hand. Its pages say `Cache-Control: max-age=3600`.
    #[arg(long, value_name = "ADDR", value_parser = larder_proxy::config::resolve_addr)]
    app_only: Option<SocketAddr>,
}

pub fn run(args: DemoArgs) -> Result<(), Failure> {
    let runtime = tokio::runtime::Runtime::new().map_err(|e| Failure::input(format!("cannot start: {e}")))?;
    runtime.block_on(demo(args))
}

async fn demo(args: DemoArgs) -> Result<(), Failure> {
    let delay = Duration::from_millis(args.delay_ms);
    if let Some(addr) = args.app_only {
        let origin = Origin::start_on(addr, delay, args.workers, args.page_bytes, 3600)
            .await
            .map_err(|e| Failure::input(format!("cannot start the demo app on {addr}: {e}")))?;
        eprintln!(
            "the demo app answers on {} ({} ms a page, {} workers); Ctrl-C stops it",
            origin.url(),
            args.delay_ms,
            args.workers
        );
        let _ = tokio::signal::ctrl_c().await;
        return Ok(());
    }
    let origin = Origin::start(delay, args.workers, args.page_bytes, 3600)
        .await
        .map_err(|e| Failure::input(format!("cannot start the demo app: {e}")))?;
    let config = ProxyConfig {
        upstream: origin.url(),
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        admin: None,
        ..ProxyConfig::default()
    };
    let store = crate::commands::serve::memory_store(&config)?;
    let server = Server::bind(config, store, Arc::new(SystemClock)).map_err(|e| Failure::input(e.to_string()))?;
    let larder = server.local_addr().ok_or_else(|| Failure::input("larder has no address"))?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(server.run(async move {
        let _ = stopped.await;
    }));

    let mut text = String::new();
    let _ = writeln!(
        text,
        "larder demo: an app with {} workers taking {} ms per request, and larder in front of it; {} concurrent clients, one {}-byte page\n",
        args.workers, args.delay_ms, args.concurrency, args.page_bytes
    );
    let _ = writeln!(text, "{:>10} {:>14} {:>16} {:>10}", "requests", "direct (s)", "via larder (s)", "speedup");
    write_stdout(text.as_bytes())?;
    for &n in &args.requests {
        let direct = timed(origin.addr, "/page", n, args.concurrency).await?;
        let via = timed(larder, "/page", n, args.concurrency).await?;
        let line = format!(
            "{:>10} {:>14.2} {:>16.3} {:>9.1}x\n",
            group(n),
            direct.as_secs_f64(),
            via.as_secs_f64(),
            direct.as_secs_f64() / via.as_secs_f64().max(1e-9)
        );
        write_stdout(line.as_bytes())?;
    }
    let _ = stop.send(());
    let _ = running.await;
    let note = format!(
        "\nThe app answered {} requests in all; larder asked it once per page and served the rest from memory.\n",
        group(origin.requests() as usize)
    );
    write_stdout(note.as_bytes())
}

/// Sends `n` GETs for `path` to `addr` from `concurrency` clients over keep-alive connections; returns the time.
async fn timed(addr: SocketAddr, path: &str, n: usize, concurrency: usize) -> Result<Duration, Failure> {
    let client: Client<_, Empty<Bytes>> =
        Client::builder(TokioExecutor::new()).pool_max_idle_per_host(concurrency).build_http();
    let uri: http::Uri = format!("http://{addr}{path}").parse().map_err(|e| Failure::input(format!("{e}")))?;
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency.max(1))
        .map(|_| {
            let (client, uri, next) = (client.clone(), uri.clone(), next.clone());
            tokio::spawn(async move {
                while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < n {
                    let response = client.get(uri.clone()).await.map_err(|e| format!("request failed: {e}"))?;
                    if !response.status().is_success() {
                        return Err(format!("status {}", response.status()));
                    }
                    response.into_body().collect().await.map_err(|e| format!("body: {e}"))?;
                }
                Ok::<(), String>(())
            })
        })
        .collect();
    for worker in workers {
        worker.await.map_err(|e| Failure::input(e.to_string()))?.map_err(Failure::input)?;
    }
    Ok(started.elapsed())
}

/// 10000 -> "10,000".
fn group(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
