//! Time for expiry decisions, behind a trait so tests move time by hand instead of sleeping.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + 'static {
    fn now_ms(&self) -> u64;
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        larder_format::now_ms()
    }
}

/// A clock that moves only when told to: for tests of expiry and staleness.
#[derive(Debug, Default)]
pub struct ManualClock {
    now: AtomicU64,
}

impl ManualClock {
    pub fn new(start_ms: u64) -> Arc<ManualClock> {
        Arc::new(ManualClock { now: AtomicU64::new(start_ms) })
    }

    pub fn advance_ms(&self, ms: u64) {
        self.now.fetch_add(ms, Ordering::SeqCst);
    }

    pub fn set_ms(&self, ms: u64) {
        self.now.store(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }
}

/// Reads a clock at most once, and only if asked: most entries have no expiry, and a clock read costs more than
/// the rest of a cache hit.
pub(crate) struct LazyNow<'a> {
    clock: &'a dyn Clock,
    cached: std::cell::Cell<Option<u64>>,
}

impl<'a> LazyNow<'a> {
    pub(crate) fn new(clock: &'a dyn Clock) -> Self {
        LazyNow { clock, cached: std::cell::Cell::new(None) }
    }

    pub(crate) fn get(&self) -> u64 {
        match self.cached.get() {
            Some(now) => now,
            None => {
                let now = self.clock.now_ms();
                self.cached.set(Some(now));
                now
            }
        }
    }
}
