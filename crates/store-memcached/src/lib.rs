//! larder's memcached store: a pool over the ketama ring (spec/STORES.md), meta protocol, pipelined multi-get, failover.
