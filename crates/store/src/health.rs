//! A remote server's health as every remote store keeps it (spec/STORES.md §2 "Failure and recovery"): consecutive
//! failures, ejection until a time after `failures` of them, probation after the ejection (one failure ejects
//! again), and the count of errors since start that `/metrics` shows. One bookkeeping for memcached's ring members,
//! a Redis server and an SQL database, so "a store that fails is invisible" means the same thing on each.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

/// How many consecutive failures eject a server, and for how long.
#[derive(Debug, Clone, Copy)]
pub struct FailurePolicy {
    pub failures: u32,
    pub retry_after: Duration,
}

impl FailurePolicy {
    /// Reads `failures` and `retry_after` from a store URL, with the given defaults.
    pub fn from_url(
        url: &mut crate::StoreUrl,
        failures: u32,
        retry_after: Duration,
    ) -> Result<FailurePolicy, crate::UrlError> {
        Ok(FailurePolicy {
            failures: url.take_number("failures", u64::from(failures), 1..=1000)? as u32,
            retry_after: url.take_duration("retry_after", retry_after)?,
        })
    }
}

#[derive(Debug, Default)]
pub struct Health {
    /// `backend server`, as log lines name it (empty for a health made with `default`, which logs nothing).
    name: String,
    consecutive_failures: AtomicU32,
    /// When ejected: the time (ms) it may be tried again; 0 = in use.
    ejected_until: AtomicU64,
    /// Put back after an ejection and not yet answered: one failure ejects it again.
    on_probation: AtomicBool,
    /// On probation: when (ms) the one request allowed to try it (the probe) was let through; 0 = none out.
    probe_since: AtomicU64,
    /// How long a probe may be out before another is let through (its caller may have gone away): `retry_after`.
    probe_limit_ms: AtomicU64,
    /// Failed since its last good answer: what the log lines and the health report follow.
    failing: AtomicBool,
    errors: AtomicU64,
    /// The latest failure: when (ms) and why.
    last_failure: Mutex<Option<(u64, String)>>,
}

/// One server as `/health` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerReport {
    /// `host:port` (or a database's redacted URL).
    pub server: String,
    /// `up`, `failing` (failed since its last good answer) or `ejected` (not tried until `retry_after` has passed).
    pub state: &'static str,
    pub consecutive_failures: u32,
    /// Errors since start.
    pub errors: u64,
    /// The latest failure: when (ms) and why.
    pub last_failure: Option<(u64, String)>,
}

impl Health {
    /// A server's health that logs its changes (a failure after good answers, an ejection, a recovery) once each,
    /// so an outage shows in the log as a few lines, not one per request.
    pub fn named(backend: &str, server: &str) -> Health {
        Health { name: format!("{backend} server {server}"), ..Health::default() }
    }

    /// Records the outcome of one request; `true` when this failure ejects the server.
    pub fn record(&self, ok: bool, policy: FailurePolicy, now_ms: u64) -> bool {
        if ok {
            self.succeeded();
            false
        } else {
            self.failed("failed", policy, now_ms)
        }
    }

    /// A good answer: ends a failure streak (and probation).
    pub fn succeeded(&self) {
        self.consecutive_failures.store(0, Ordering::Relaxed);
        self.on_probation.store(false, Ordering::Relaxed);
        self.probe_since.store(0, Ordering::Relaxed);
        if self.failing.swap(false, Ordering::Relaxed) && !self.name.is_empty() {
            tracing::info!("{}: answering again", self.name);
        }
    }

    /// A failure (`why` for the log and the report); `true` when it ejects the server.
    pub fn failed(&self, why: &str, policy: FailurePolicy, now_ms: u64) -> bool {
        self.errors.fetch_add(1, Ordering::Relaxed);
        *self.last_failure.lock() = Some((now_ms, why.to_owned()));
        let first = !self.failing.swap(true, Ordering::Relaxed);
        if first && !self.name.is_empty() {
            tracing::warn!("{}: {why}", self.name);
        }
        let failures = self.consecutive_failures.fetch_add(1, Ordering::Relaxed) + 1;
        self.probe_since.store(0, Ordering::Relaxed);
        if failures >= policy.failures || self.on_probation.load(Ordering::Relaxed) {
            let again = self.on_probation.load(Ordering::Relaxed);
            self.probe_limit_ms.store(policy.retry_after.as_millis() as u64, Ordering::Relaxed);
            self.ejected_until.store(now_ms + policy.retry_after.as_millis() as u64, Ordering::Relaxed);
            self.consecutive_failures.store(0, Ordering::Relaxed);
            self.on_probation.store(false, Ordering::Relaxed);
            if !again && !self.name.is_empty() {
                tracing::warn!(
                    "{}: ejected after {failures} failures in a row; tried again every {} ms until it answers",
                    self.name,
                    policy.retry_after.as_millis()
                );
            }
            return true;
        }
        false
    }

    /// This server as `/health` shows it.
    pub fn report(&self, server: &str) -> ServerReport {
        let state = if self.is_ejected() {
            "ejected"
        } else if self.failing.load(Ordering::Relaxed) {
            "failing"
        } else {
            "up"
        };
        ServerReport {
            server: server.to_owned(),
            state,
            consecutive_failures: self.consecutive_failures.load(Ordering::Relaxed),
            errors: self.errors(),
            last_failure: self.last_failure.lock().clone(),
        }
    }

    /// Puts the server back (on probation) if its ejection is over; `true` if it changed.
    pub fn readmit_if_due(&self, now_ms: u64) -> bool {
        let until = self.ejected_until.load(Ordering::Relaxed);
        if until != 0 && until <= now_ms {
            self.ejected_until.store(0, Ordering::Relaxed);
            self.on_probation.store(true, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// Whether a request may be sent now (readmitting the server when its ejection is over); a store with a single
    /// server fails at once, without waiting, while this is false. On probation, one request at a time is admitted
    /// (the probe, a half-open circuit): the others fail at once until it answers, so a server that is still
    /// frozen costs one timeout per `retry_after`, not one per request that arrives meanwhile.
    pub fn admits(&self, now_ms: u64) -> bool {
        self.readmit_if_due(now_ms);
        if self.is_ejected() {
            return false;
        }
        if !self.on_probation.load(Ordering::Relaxed) {
            return true;
        }
        let since = self.probe_since.load(Ordering::Relaxed);
        let lost = since != 0 && now_ms.saturating_sub(since) >= self.probe_limit_ms.load(Ordering::Relaxed).max(1);
        if since != 0 && !lost {
            return false;
        }
        self.probe_since.compare_exchange(since, now_ms.max(1), Ordering::Relaxed, Ordering::Relaxed).is_ok()
    }

    pub fn is_ejected(&self) -> bool {
        self.ejected_until.load(Ordering::Relaxed) != 0
    }

    /// Counts an error that is not a failure of the server (a request refused at once while it is ejected).
    pub fn count_error(&self) {
        self.errors.fetch_add(1, Ordering::Relaxed);
    }

    /// Errors since start.
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: FailurePolicy = FailurePolicy { failures: 2, retry_after: Duration::from_millis(1000) };

    #[test]
    fn ejects_after_consecutive_failures_only() {
        let health = Health::default();
        assert!(!health.record(false, POLICY, 0));
        assert!(!health.record(true, POLICY, 0), "a success resets the count");
        assert!(!health.record(false, POLICY, 0));
        assert!(health.record(false, POLICY, 10), "the second failure in a row ejects");
        assert!(!health.admits(500));
        assert_eq!(health.errors(), 3);
    }

    #[test]
    fn on_probation_one_probe_at_a_time() {
        let health = Health::default();
        health.record(false, POLICY, 0);
        health.record(false, POLICY, 0);
        assert!(health.admits(1000), "the probe");
        assert!(!health.admits(1001), "a second request while the probe is out fails at once");
        assert!(!health.admits(1500));
        assert!(health.admits(2000), "a probe out for retry_after is presumed lost: another may try");
        health.record(true, POLICY, 2001);
        assert!(health.admits(2002) && health.admits(2002), "answered: every request goes again");
        health.record(false, POLICY, 3000);
        health.record(false, POLICY, 3000);
        assert!(health.admits(4000), "the next probe");
        health.record(false, POLICY, 4100);
        assert!(!health.admits(4200), "a failed probe ejects again");
        assert!(health.admits(5100));
    }

    #[test]
    fn one_failure_on_probation_ejects_again_and_a_success_ends_it() {
        let health = Health::default();
        health.record(false, POLICY, 0);
        health.record(false, POLICY, 0);
        assert!(health.admits(1000), "readmitted once retry_after has passed");
        assert!(health.record(false, POLICY, 1000), "on probation, one failure ejects");
        assert!(!health.admits(1999));
        assert!(health.admits(2000));
        health.record(true, POLICY, 2000);
        assert!(!health.record(false, POLICY, 2001), "probation ended with the success");
    }
}
