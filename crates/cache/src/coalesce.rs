//! Coalescing: while one caller computes a key, the others wait for its result instead of computing it again.
//! `fetch` uses it for values; the proxy uses it for upstream requests, with its own outcome type.
//!
//! The leader holds a [`Lead`]; finishing it hands the result to every waiter. If the leader goes away without
//! finishing (its task was cancelled, or the loader panicked past us), dropping the `Lead` wakes the waiters with
//! nothing, and they start over: one of them becomes the new leader. No waiter can hang on a leader that is gone.
//! A `Lead` owns its place in the table, so it can move into a task that outlives the caller that took it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::watch;

type Slot<T> = Option<T>;

/// One computation under way: its result channel and when it began.
struct Flight<T> {
    rx: watch::Receiver<Slot<T>>,
    started: Instant,
}

/// Keys being computed now, in this process. Cloning shares the table.
pub struct InFlight<T> {
    flights: Arc<Mutex<HashMap<String, Flight<T>>>>,
}

impl<T> Default for InFlight<T> {
    fn default() -> Self {
        InFlight { flights: Arc::new(Mutex::new(HashMap::new())) }
    }
}

impl<T> Clone for InFlight<T> {
    fn clone(&self) -> Self {
        InFlight { flights: self.flights.clone() }
    }
}

/// What a caller is to do for a key.
pub enum Role<T> {
    /// Compute it and call [`Lead::finish`].
    Lead(Lead<T>),
    /// Wait for the leader.
    Wait(Waiter<T>),
}

/// A place in the queue behind a leader.
pub struct Waiter<T> {
    rx: watch::Receiver<Slot<T>>,
    started: Instant,
}

impl<T: Clone> Waiter<T> {
    /// How long the leader has been computing.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Waits for the leader; `None` if it went away without a result.
    pub async fn wait(mut self) -> Option<T> {
        match self.rx.wait_for(Option::is_some).await {
            Ok(slot) => slot.clone(),
            Err(_) => None,
        }
    }
}

impl<T: Clone> InFlight<T> {
    /// Leads the computation of `key` if nobody is, else joins the one under way.
    pub fn join_or_lead(&self, key: &str) -> Role<T> {
        let mut flights = self.flights.lock();
        if let Some(flight) = flights.get(key) {
            return Role::Wait(Waiter { rx: flight.rx.clone(), started: flight.started });
        }
        let (tx, rx) = watch::channel(None);
        flights.insert(key.to_owned(), Flight { rx, started: Instant::now() });
        Role::Lead(Lead { flights: self.flights.clone(), key: key.to_owned(), tx: Some(tx) })
    }

    /// Leads only if nobody is computing `key` (stale-while-recompute: the others serve the stale value).
    pub fn try_lead(&self, key: &str) -> Option<Lead<T>> {
        match self.join_or_lead(key) {
            Role::Lead(lead) => Some(lead),
            Role::Wait(_) => None,
        }
    }

    /// Whether someone is computing `key` now.
    pub fn is_computing(&self, key: &str) -> bool {
        self.flights.lock().contains_key(key)
    }

    /// Number of keys being computed.
    pub fn len(&self) -> usize {
        self.flights.lock().len()
    }

    /// Whether no key is being computed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The right and duty to compute one key.
pub struct Lead<T> {
    flights: Arc<Mutex<HashMap<String, Flight<T>>>>,
    key: String,
    tx: Option<watch::Sender<Slot<T>>>,
}

impl<T> Lead<T> {
    /// The key being computed.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Hands `outcome` to every waiter and ends the flight.
    pub fn finish(mut self, outcome: T) {
        self.flights.lock().remove(&self.key);
        if let Some(tx) = self.tx.take() {
            // Waiters that already gave up are not an error.
            let _ = tx.send(Some(outcome));
        }
    }
}

impl<T> Drop for Lead<T> {
    fn drop(&mut self) {
        if self.tx.is_some() {
            // Abandoned: remove the flight; dropping the sender wakes the waiters empty-handed.
            self.flights.lock().remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waiters_get_the_leaders_outcome_and_an_abandoned_lead_wakes_them_empty() {
        let flights: InFlight<u32> = InFlight::default();
        let Role::Lead(lead) = flights.join_or_lead("k") else { panic!("the first caller leads") };
        let Role::Wait(waiter) = flights.join_or_lead("k") else { panic!("the second caller waits") };
        assert!(flights.is_computing("k"));
        let moved = tokio::spawn(async move { lead.finish(7) });
        assert_eq!(waiter.wait().await, Some(7));
        moved.await.expect("task");
        assert!(flights.is_empty());

        let Role::Lead(lead) = flights.join_or_lead("k") else { panic!("a new flight") };
        let Role::Wait(waiter) = flights.join_or_lead("k") else { panic!("waits") };
        drop(lead);
        assert_eq!(waiter.wait().await, None);
        assert!(flights.try_lead("k").is_some());
    }
}
