//! larder's SQL stores: SQLite and PostgreSQL, a Solid-Cache-like table (spec/STORES.md).
