//! What larder knows of the upstream's health, from the answers its requests get: `/health` reports it, `/ready`
//! fails while the upstream is down, and `/metrics` exports it as `larder_upstream_up`.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// The upstream as the last requests found it.
#[derive(Default)]
pub struct UpstreamHealth {
    answered: AtomicU64,
    failed: AtomicU64,
    consecutive_failures: AtomicU64,
    last_answer_ms: AtomicU64,
    last_failure: Mutex<Option<(u64, String)>>,
}

/// A snapshot, for the admin API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthReport {
    /// `None` before any upstream request; else whether the last one got an answer.
    pub up: Option<bool>,
    pub consecutive_failures: u64,
    pub last_answer_ms: Option<u64>,
    pub last_failure: Option<(u64, String)>,
}

impl UpstreamHealth {
    /// The upstream answered (any status: a 500 is an answer; the app is reachable).
    pub fn answered(&self, now_ms: u64) {
        self.answered.fetch_add(1, Ordering::Relaxed);
        self.consecutive_failures.store(0, Ordering::Relaxed);
        self.last_answer_ms.store(now_ms, Ordering::Relaxed);
    }

    /// The upstream could not be reached or did not answer in time.
    pub fn failed(&self, now_ms: u64, error: &str) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        self.consecutive_failures.fetch_add(1, Ordering::Relaxed);
        *self.last_failure.lock() = Some((now_ms, error.to_owned()));
    }

    pub fn report(&self) -> HealthReport {
        let consecutive_failures = self.consecutive_failures.load(Ordering::Relaxed);
        let any = self.answered.load(Ordering::Relaxed) + self.failed.load(Ordering::Relaxed) > 0;
        let last_answer = self.last_answer_ms.load(Ordering::Relaxed);
        HealthReport {
            up: any.then_some(consecutive_failures == 0),
            consecutive_failures,
            last_answer_ms: (last_answer > 0).then_some(last_answer),
            last_failure: self.last_failure.lock().clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_answer_decides() {
        let health = UpstreamHealth::default();
        assert_eq!(health.report().up, None);
        health.failed(10, "refused");
        health.failed(11, "refused");
        let report = health.report();
        assert_eq!((report.up, report.consecutive_failures), (Some(false), 2));
        assert_eq!(report.last_failure, Some((11, "refused".to_owned())));
        health.answered(12);
        assert_eq!(health.report().up, Some(true));
    }
}
