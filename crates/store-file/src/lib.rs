//! larder's file store: hash-sharded files written atomically, safe for several processes (spec/STORES.md).
