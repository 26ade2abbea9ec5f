//! Reference eviction policies for `larder bench hit-ratio`: the published algorithms larder's store is measured
//! against, replayed in the same harness on the same requests. Each follows libCacheSim's implementation (the
//! simulator whose published miss counts on its cloudPhysics sample check them) and is byte-aware: an entry
//! occupies its size, and the capacity is in the same unit (bytes for sized traces, 1 per entry otherwise).

mod arc;
mod list;
mod published;
mod s3fifo;
mod sieve;

use std::str::FromStr;

pub use arc::Arc;
pub use s3fifo::S3Fifo;
pub use sieve::Sieve;

/// A cache policy replayed request by request.
pub trait Policy {
    /// Looks `key` up; on a miss, admits it (if it fits) and evicts what it must. True on a hit.
    fn access(&mut self, key: u64, size: u64) -> bool;
}

/// The reference policies `larder bench hit-ratio` can print beside larder (exact LRU is always printed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reference {
    Arc,
    S3Fifo,
    Sieve,
}

impl Reference {
    pub const ALL: [Reference; 3] = [Reference::Arc, Reference::S3Fifo, Reference::Sieve];

    pub fn name(self) -> &'static str {
        match self {
            Reference::Arc => "arc",
            Reference::S3Fifo => "s3fifo",
            Reference::Sieve => "sieve",
        }
    }

    pub fn build(self, capacity: u64) -> Box<dyn Policy> {
        match self {
            Reference::Arc => Box::new(Arc::new(capacity)),
            Reference::S3Fifo => Box::new(S3Fifo::new(capacity)),
            Reference::Sieve => Box::new(Sieve::new(capacity)),
        }
    }
}

impl FromStr for Reference {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "arc" => Ok(Reference::Arc),
            "s3fifo" | "s3-fifo" => Ok(Reference::S3Fifo),
            "sieve" => Ok(Reference::Sieve),
            other => Err(format!("unknown policy {other:?} (expected lru, arc, s3fifo or sieve)")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn misses(policy: &mut dyn Policy, keys: &[u64]) -> usize {
        keys.iter().filter(|&&k| !policy.access(k, 1)).count()
    }

    #[test]
    fn every_policy_hits_what_fits_and_refuses_what_does_not() {
        let trace: Vec<u64> = (0..300).map(|i| i % 3).collect();
        for reference in Reference::ALL {
            let mut policy = reference.build(100);
            assert_eq!(misses(policy.as_mut(), &trace), 3, "{reference:?}");
            assert!(!policy.access(99, 101), "{reference:?} admits an entry larger than the cache");
            assert!(!policy.access(99, 101));
        }
    }

    #[test]
    fn scan_resistant_policies_keep_a_hot_set_through_scans() {
        // A hot set read three times per round, then a scan of new keys longer than the cache.
        let mut trace = Vec::new();
        let mut cold = 1_000;
        for _ in 0..20 {
            for _ in 0..3 {
                trace.extend(0..10);
            }
            trace.extend(cold..cold + 50);
            cold += 50;
        }
        for reference in Reference::ALL {
            let mut policy = reference.build(20);
            let hits = trace.len() - misses(policy.as_mut(), &trace);
            // LRU hits 20 of every 80 requests (the second and third read of the hot set, 400 in all).
            assert!(hits > 450, "{reference:?}: {hits} hits");
        }
    }

    #[test]
    fn sieve_evicts_the_first_unvisited_entry_from_the_oldest() {
        let mut sieve = Sieve::new(3);
        for k in [1, 2, 3] {
            assert!(!sieve.access(k, 1));
        }
        assert!(sieve.access(1, 1));
        assert!(!sieve.access(4, 1)); // 1 is visited: the hand clears it and evicts 2
        assert!(sieve.access(1, 1));
        assert!(sieve.access(3, 1));
        assert!(!sieve.access(2, 1));
    }

    #[test]
    fn s3fifo_sends_a_quick_return_to_main() {
        // Capacity 20: small holds 2 bytes, main 18, the ghost 18. As in libCacheSim, an entry as large as small is
        // not admitted.
        let mut s3 = S3Fifo::new(20);
        assert!(!s3.access(7, 2));
        assert!(!s3.access(7, 2));
        // 40 keys read once: the first 20 leave small unread and the last 18 of those are ghosts.
        for k in 0..40 {
            assert!(!s3.access(k, 1));
        }
        assert!(!s3.access(19, 1), "a ghost is not a hit");
        for k in 100..140 {
            s3.access(k, 1);
        }
        assert!(s3.access(19, 1), "an entry admitted from the ghost survives a scan through small");
        assert!(!s3.access(0, 1), "a key evicted before the ghost's window is a plain miss");
    }
}
