// Package stores is larder's Store interface and its backends (spec/STORES.md), with the same URLs as every
// other language: memory, memcached, Redis (and Cluster), SQLite, PostgreSQL and files. A store knows bytes:
// entries go in and out unchanged; every call takes a context.Context whose deadline is honoured, and remote
// stores also bound each operation by their own `timeout`.
package stores

import (
	"context"
	"time"
)

// Item is one key and value of a multi-set.
type Item struct {
	Key   string
	Value []byte
}

// Purged is what a purge answers: the number of entries removed, or Recorded (memcached: a record that readers
// check, which cannot count what it hides).
type Purged struct {
	Count    int64
	Recorded bool
}

// Stats are a store's counters.
type Stats struct {
	Entries      int64
	Bytes        int64
	ServerErrors map[string]int64
	ForeignFiles int64
}

// Store is what every backend implements. A nil value with a nil error is a miss. A ttl of 0 means none (the
// entry's own hard expiry still applies, STORES.md §2). Values a store returns are read-only: they may share
// memory with the store (memory) or the client library (Redis); copy one before changing it.
type Store interface {
	Backend() string
	// MaxValue is the longest value the store accepts.
	MaxValue() int
	Get(ctx context.Context, key string) ([]byte, error)
	GetMulti(ctx context.Context, keys []string) ([][]byte, error)
	Set(ctx context.Context, key string, value []byte, ttl time.Duration) error
	SetMulti(ctx context.Context, items []Item, ttl time.Duration) error
	Add(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error)
	// Incr adds delta and returns the new value; ok is false for a missing key when create is false.
	Incr(ctx context.Context, key string, delta int64, ttl time.Duration, create bool) (value int64, ok bool, err error)
	DeleteIf(ctx context.Context, key string, expected []byte) (bool, error)
	Delete(ctx context.Context, key string) (bool, error)
	DeleteMulti(ctx context.Context, keys []string) (int, error)
	Clear(ctx context.Context) error
	PurgePrefix(ctx context.Context, prefix string) (Purged, error)
	PurgeTag(ctx context.Context, tag string) (Purged, error)
	Stats(ctx context.Context) (Stats, error)
	Close() error
}

// Open opens the store a URL names (spec/STORES.md §1).
func Open(ctx context.Context, rawURL string) (Store, error) {
	u, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	switch u.Scheme {
	case "memory":
		return openMemory(u)
	case "memcached":
		return openMemcached(u)
	case "redis":
		return openRedis(ctx, u, false)
	case "redis+cluster":
		return openRedis(ctx, u, true)
	case "sqlite":
		return openSQLite(ctx, u)
	case "postgres", "postgresql":
		return openPostgres(ctx, u)
	case "file":
		return openFile(u)
	}
	return nil, u.errorf("unknown store scheme %q (expected memory, memcached, redis, redis+cluster, sqlite, postgres or file)", u.Scheme)
}
