//! Counters the proxy keeps, and their Prometheus text form for `GET /metrics`. Plain atomics: a metric must
//! never slow a cache hit down.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use larder_store::StoreStats;

/// Upstream latency bucket bounds, in seconds.
const BUCKETS: [f64; 12] = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

#[derive(Debug, Default)]
pub struct Metrics {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub stale_served: AtomicU64,
    pub bypasses: AtomicU64,
    pub coalesced_waits: AtomicU64,
    pub revalidations: AtomicU64,
    pub upstream_errors: AtomicU64,
    pub purged: AtomicU64,
    pub stored: AtomicU64,
    upstream_buckets: [AtomicU64; BUCKETS.len()],
    upstream_count: AtomicU64,
    upstream_sum_micros: AtomicU64,
}

impl Metrics {
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
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

    /// The Prometheus text exposition of these counters and the store's.
    pub fn render(&self, store: &StoreStats) -> String {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut out = String::new();
        let mut counter = |name: &str, help: &str, value: u64| {
            let _ = writeln!(out, "# HELP larder_{name} {help}\n# TYPE larder_{name} counter\nlarder_{name} {value}");
        };
        counter("cache_hits_total", "Requests answered from the cache.", load(&self.hits));
        counter("cache_misses_total", "Requests that went to the upstream after a cache lookup.", load(&self.misses));
        counter(
            "cache_stale_served_total",
            "Stale responses served (while revalidating or on upstream error).",
            load(&self.stale_served),
        );
        counter(
            "cache_bypass_total",
            "Requests not eligible for the cache (unsafe methods and the like).",
            load(&self.bypasses),
        );
        counter(
            "coalesced_waits_total",
            "Requests that waited for another request's upstream fetch.",
            load(&self.coalesced_waits),
        );
        counter(
            "revalidations_total",
            "Conditional requests sent upstream to revalidate stale responses.",
            load(&self.revalidations),
        );
        counter("upstream_errors_total", "Upstream requests that failed or timed out.", load(&self.upstream_errors));
        counter("purged_total", "Entries removed by purge requests.", load(&self.purged));
        counter("stored_total", "Responses stored.", load(&self.stored));
        counter("store_evictions_total", "Entries evicted by the store to stay within its bound.", store.evictions);
        counter("store_expirations_total", "Entries removed after their hard expiry.", store.expirations);
        let _ = writeln!(out, "# HELP larder_store_entries Entries in the store.\n# TYPE larder_store_entries gauge");
        let _ = writeln!(out, "larder_store_entries {}", store.entries);
        let _ = writeln!(out, "# HELP larder_store_bytes Bytes the entries weigh.\n# TYPE larder_store_bytes gauge");
        let _ = writeln!(out, "larder_store_bytes {}", store.bytes);
        let _ = writeln!(
            out,
            "# HELP larder_store_capacity_bytes The store's byte bound.\n# TYPE larder_store_capacity_bytes gauge"
        );
        let _ = writeln!(out, "larder_store_capacity_bytes {}", store.capacity_bytes);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_a_cumulative_histogram() {
        let m = Metrics::default();
        Metrics::bump(&m.hits);
        m.observe_upstream(Duration::from_millis(30));
        m.observe_upstream(Duration::from_secs(20));
        let text = m.render(&StoreStats { entries: 3, ..StoreStats::default() });
        assert!(text.contains("larder_cache_hits_total 1\n"));
        assert!(text.contains("larder_store_entries 3\n"));
        assert!(text.contains("larder_upstream_latency_seconds_bucket{le=\"0.025\"} 0\n"));
        assert!(text.contains("larder_upstream_latency_seconds_bucket{le=\"0.05\"} 1\n"));
        assert!(text.contains("larder_upstream_latency_seconds_bucket{le=\"+Inf\"} 2\n"));
    }
}
