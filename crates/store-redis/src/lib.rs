//! larder's Redis store: standalone and Cluster (spec/STORES.md).
