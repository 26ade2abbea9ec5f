//! The `Vary` marker last seen for each URL, so that a lookup on a shared store can ask for the marker and the
//! variant it probably selects in one round trip (`get_many`) instead of two. A hint is only a guess: the marker is
//! always read fresh with it, and the variant read beside it is used only when that marker is the one the guess
//! was made from (same names, same generation), so a purge or a new marker is never missed. Bounded: when full,
//! it starts over.

use std::collections::HashMap;

use parking_lot::Mutex;

use larder_format::key::VaryMarker;

/// At most this many URLs are remembered.
const MAX_HINTS: usize = 10_000;

#[derive(Default)]
pub struct MarkerHints {
    markers: Mutex<HashMap<String, VaryMarker>>,
}

impl MarkerHints {
    pub fn get(&self, base_key: &str) -> Option<VaryMarker> {
        self.markers.lock().get(base_key).cloned()
    }

    pub fn remember(&self, base_key: &str, marker: &VaryMarker) {
        let mut markers = self.markers.lock();
        if markers.get(base_key) == Some(marker) {
            return;
        }
        if markers.len() >= MAX_HINTS {
            markers.clear();
        }
        markers.insert(base_key.to_owned(), marker.clone());
    }

    pub fn forget(&self, base_key: &str) {
        self.markers.lock().remove(base_key);
    }
}
