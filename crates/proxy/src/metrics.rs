//! Counters the proxy keeps, and their Prometheus text form for `GET /metrics`. Plain atomics: a metric must
//! never slow a cache hit down.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use larder_cache::CacheStats;
use larder_store::StoreStats;

use crate::cache_status::Outcome;

/// Upstream latency bucket bounds, in seconds.
const BUCKETS: [f64; 12] = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

#[derive(Debug, Default)]
pub struct Metrics {
    /// Requests by outcome: every request is counted once, so these add up to the requests answered.
    requests: [AtomicU64; Outcome::ALL.len()],
    pub revalidations: AtomicU64,
    pub upstream_errors: AtomicU64,
    pub purged: AtomicU64,
    pub stored: AtomicU64,
    /// Cacheable responses streamed through uncached because they were too large or the fill budget was spent.
    pub streamed_uncached: AtomicU64,
    /// Stored responses transformed into another coding (decoded or compressed) and kept.
    pub transformed: AtomicU64,
    /// Misses answered from a response another process on the shared store fetched (its store lock was held).
    pub coalesced_across_processes: AtomicU64,
    upstream_buckets: [AtomicU64; BUCKETS.len()],
    upstream_count: AtomicU64,
    upstream_sum_micros: AtomicU64,
}

impl Metrics {
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one request under its outcome.
    pub fn count(&self, outcome: Outcome) {
        Metrics::bump(&self.requests[outcome as usize]);
    }

    /// Requests counted under `outcome` so far.
    pub fn requests(&self, outcome: Outcome) -> u64 {
        self.requests[outcome as usize].load(Ordering::Relaxed)
    }

    /// Records one upstream round trip.
    pub fn observe_upstream(&self, elapsed: Duration) {
        let secs = elapsed.as_secs_f64();
        for (bound, bucket) in BUCKETS.iter().zip(&self.upstream_buckets) {
            if secs <= *bound {
                bucket.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.upstream_count.fetch_add(1, Ordering::Relaxed);
        self.upstream_sum_micros.fetch_add(elapsed.as_micros() as u64, Ordering::Relaxed);
    }

    /// The Prometheus text exposition of these counters, the cache layer's and the store's.
    /// `access_log_dropped`: lines the access log's writer could not keep up with, when it is on.
    pub fn render(
        &self,
        store: &StoreStats,
        cache: &CacheStats,
        upstream_up: Option<bool>,
        access_log_dropped: Option<u64>,
    ) -> String {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP larder_requests_total Requests answered, by what larder did (each request counted once).\n# TYPE larder_requests_total counter"
        );
        for outcome in Outcome::ALL {
            let _ = writeln!(out, "larder_requests_total{{cache=\"{}\"}} {}", outcome.name(), self.requests(outcome));
        }
        let mut counter = |name: &str, help: &str, value: u64| {
            let _ = writeln!(out, "# HELP larder_{name} {help}\n# TYPE larder_{name} counter\nlarder_{name} {value}");
        };
        counter(
            "revalidations_total",
            "Conditional requests sent upstream to revalidate stale responses.",
            load(&self.revalidations),
        );
        counter("upstream_errors_total", "Upstream requests that failed or timed out.", load(&self.upstream_errors));
        counter("purged_total", "Entries removed by purge requests.", load(&self.purged));
        counter("stored_total", "Responses stored.", load(&self.stored));
        counter(
            "streamed_uncached_total",
            "Cacheable responses streamed through uncached (too large, or the fill buffer budget was spent).",
            load(&self.streamed_uncached),
        );
        counter(
            "transformed_total",
            "Stored responses decoded or compressed into another coding and kept beside the original.",
            load(&self.transformed),
        );
        counter(
            "coalesced_across_processes_total",
            "Misses answered with the response another process sharing the store fetched while holding its lock.",
            load(&self.coalesced_across_processes),
        );
        counter(
            "store_errors_total",
            "Store operations that failed and were absorbed (reads as misses, writes skipped).",
            cache.store_errors,
        );
        counter(
            "corrupt_entries_total",
            "Stored entries that failed to decode and were treated as misses.",
            cache.corrupt_entries,
        );
        if let Some(dropped) = access_log_dropped {
            counter("access_log_dropped_total", "Access log lines dropped because the writer fell behind.", dropped);
        }
        counter("store_evictions_total", "Entries evicted by the store to stay within its bound.", store.evictions);
        counter("store_expirations_total", "Entries removed after their hard expiry.", store.expirations);
        let mut gauge = |name: &str, help: &str, value: u64| {
            let _ = writeln!(out, "# HELP larder_{name} {help}\n# TYPE larder_{name} gauge\nlarder_{name} {value}");
        };
        gauge("store_entries", "Entries in the store.", store.entries);
        gauge("store_bytes", "Bytes the entries weigh.", store.bytes);
        gauge("store_capacity_bytes", "The store's byte bound.", store.capacity_bytes);
        if let Some(up) = upstream_up {
            gauge("upstream_up", "1 if the last upstream request got an answer, 0 if it failed.", u64::from(up));
        }
        let _ = writeln!(
            out,
            "# HELP larder_upstream_latency_seconds Time to the upstream's response head.\n# TYPE larder_upstream_latency_seconds histogram"
        );
        for (bound, bucket) in BUCKETS.iter().zip(&self.upstream_buckets) {
            let _ = writeln!(out, "larder_upstream_latency_seconds_bucket{{le=\"{bound}\"}} {}", load(bucket));
        }
        let count = load(&self.upstream_count);
        let _ = writeln!(out, "larder_upstream_latency_seconds_bucket{{le=\"+Inf\"}} {count}");
        let _ = writeln!(out, "larder_upstream_latency_seconds_sum {}", load(&self.upstream_sum_micros) as f64 / 1e6);
        let _ = writeln!(out, "larder_upstream_latency_seconds_count {count}");
        out
    }
}

/// `larder_store_server_errors_total` per server of a shared store (none for the memory store).
pub fn render_server_errors(backend: &str, errors: &[(String, u64)]) -> String {
    if errors.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "# HELP larder_store_server_errors_total Failed requests to each server of the shared store.\n# TYPE larder_store_server_errors_total counter\n",
    );
    for (server, count) in errors {
        let server = server.replace(['\\', '"', '\n'], "_");
        let _ = writeln!(out, "larder_store_server_errors_total{{backend=\"{backend}\",server=\"{server}\"}} {count}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_a_cumulative_histogram() {
        let m = Metrics::default();
        m.count(Outcome::Hit);
        m.count(Outcome::Collapsed);
        m.count(Outcome::Collapsed);
        m.observe_upstream(Duration::from_millis(30));
        m.observe_upstream(Duration::from_secs(20));
        let cache = CacheStats { store_errors: 4, ..CacheStats::default() };
        let text = m.render(&StoreStats { entries: 3, ..StoreStats::default() }, &cache, Some(false), Some(5));
        assert!(text.contains("larder_requests_total{cache=\"hit\"} 1\n"));
        assert!(text.contains("larder_requests_total{cache=\"collapsed\"} 2\n"));
        assert!(text.contains("larder_requests_total{cache=\"miss\"} 0\n"));
        assert!(text.contains("larder_store_errors_total 4\n"));
        assert!(text.contains("larder_upstream_up 0\n"));
        assert!(text.contains("larder_access_log_dropped_total 5\n"));
        assert!(text.contains("larder_store_entries 3\n"));
        assert!(text.contains("larder_upstream_latency_seconds_bucket{le=\"0.025\"} 0\n"));
        assert!(text.contains("larder_upstream_latency_seconds_bucket{le=\"0.05\"} 1\n"));
        assert!(text.contains("larder_upstream_latency_seconds_bucket{le=\"+Inf\"} 2\n"));
    }
}
