//! Opens any larder store from its URL.
