//! Coalescing: while one caller computes a key, the others wait for its result instead of computing it again.
//! `fetch` uses it for values; the proxy uses it for upstream requests.
//!
//! The leader holds a [`Lead`]; finishing it hands the result to every waiter. If the leader goes away without
//! finishing (its task was cancelled, or the loader panicked past us), dropping the `Lead` wakes the waiters with
//! nothing, and they start over: one of them becomes the new leader. No waiter can hang on a leader that is gone.

use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::watch;

use crate::error::CacheError;

/// A computed value (type-erased: different keys hold different types) or the error that every waiter gets.
pub type Outcome = Result<Arc<dyn Any + Send + Sync>, CacheError>;

type Slot = Option<Outcome>;

/// Keys being computed now, in this process.
#[derive(Default)]
pub struct InFlight {
    flights: Mutex<HashMap<String, watch::Receiver<Slot>>>,
}

/// What a caller is to do for a key.
pub enum Role<'a> {
    /// Compute it and call [`Lead::finish`].
    Lead(Lead<'a>),
    /// Wait for the leader.
    Wait(watch::Receiver<Slot>),
}

impl InFlight {
    /// Leads the computation of `key` if nobody is, else joins the one under way.
    pub fn join_or_lead(&self, key: &str) -> Role<'_> {
        let mut flights = self.flights.lock();
        if let Some(rx) = flights.get(key) {
            return Role::Wait(rx.clone());
        }
        let (tx, rx) = watch::channel(None);
        flights.insert(key.to_owned(), rx);
        Role::Lead(Lead { owner: self, key: key.to_owned(), tx: Some(tx) })
    }

    /// Leads only if nobody is computing `key` (stale-while-recompute: the others serve the stale value).
    pub fn try_lead(&self, key: &str) -> Option<Lead<'_>> {
        match self.join_or_lead(key) {
            Role::Lead(lead) => Some(lead),
            Role::Wait(_) => None,
        }
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
pub struct Lead<'a> {
    owner: &'a InFlight,
    key: String,
    tx: Option<watch::Sender<Slot>>,
}

impl Lead<'_> {
    /// Hands `outcome` to every waiter and ends the flight.
    pub fn finish(mut self, outcome: Outcome) {
        self.owner.flights.lock().remove(&self.key);
        if let Some(tx) = self.tx.take() {
            // Waiters that already gave up are not an error.
            let _ = tx.send(Some(outcome));
        }
    }
}

impl Drop for Lead<'_> {
    fn drop(&mut self) {
        if self.tx.is_some() {
            // Abandoned: remove the flight; dropping the sender wakes the waiters empty-handed.
            self.owner.flights.lock().remove(&self.key);
        }
    }
}

/// Waits for the leader; `None` if it went away without a result.
pub async fn wait(mut rx: watch::Receiver<Slot>) -> Option<Outcome> {
    match rx.wait_for(Option::is_some).await {
        Ok(slot) => slot.clone(),
        Err(_) => None,
    }
}
