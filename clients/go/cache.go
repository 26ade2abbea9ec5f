// Package larder is the Go client of larder: entries in the shared format (spec/FORMAT.md) over any store
// (spec/STORES.md), read and written by every other language. Cache is what a program calls: Get, Set, Fetch
// with in-process coalescing and the one lock policy across processes (STORES.md §3), namespaces, versions,
// tags and purges. Reads absorb store failures (a miss, counted); Fetch absorbs failed writes too. While the store
// fails, what was loaded meanwhile is kept in the cache's outage memory (STORES.md §3, "When the store fails").
package larder

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"sync/atomic"
	"time"

	"github.com/larder-cache/larder/clients/go/format"
	"github.com/larder-cache/larder/clients/go/keys"
	"github.com/larder-cache/larder/clients/go/stores"
)

// Cache reads and writes values over a store. Safe for concurrent use; copies made by WithNamespace share the
// store, the in-flight table and the stats.
type Cache struct {
	store     stores.Store
	namespace string
	opts      format.Options
	maxSize   int
	lockTTL   time.Duration
	outageCap int64
	shared    *shared
}

type shared struct {
	mu      sync.Mutex
	flights map[string]*flight
	stats   statCounters
	// outage is the outage memory (nil when off): values whose write to the store failed, read when the store
	// fails; failing is set after a store failure and cleared, with outage emptied, by a good answer once no
	// failure has been seen for a second; lastFailure is the monotonic time of the last failure (monoNow).
	outage      *stores.Memory
	failing     atomic.Bool
	lastFailure atomic.Int64
}

// DefaultOutageMemory is the outage memory's default size (STORES.md §3: 16M in the libraries).
const DefaultOutageMemory int64 = 16 << 20

// Option configures a Cache.
type Option func(*Cache)

// WithNamespace prefixes every key as "namespace:key" (FORMAT.md §5.2).
func WithNamespace(ns string) Option { return func(c *Cache) { c.namespace = ns } }

// WithSerializer chooses how values are serialized (default msgpack).
func WithSerializer(s format.Serializer) Option { return func(c *Cache) { c.opts.Serializer = s } }

// WithCompressor chooses the compressor tried on payloads of at least threshold bytes (default lz4, 1024; none on
// memory://, whose bytes never leave the process: spec/STORES.md §8).
func WithCompressor(comp format.Compressor, threshold int) Option {
	return func(c *Cache) { c.opts.Compressor, c.opts.Threshold = comp, threshold }
}

// WithMaxSize bounds a decompressed payload read back (default 64 MiB).
func WithMaxSize(n int) Option { return func(c *Cache) { c.maxSize = n } }

// WithOutageMemory sizes the outage memory, in bytes (default 16 MiB; 0 turns it off; stores.ParseSize reads
// "16M" as the store URLs' sizes). While the store fails (no connection, a timeout, a broken reply, or refused at
// once while its server is ejected), a value whose write to it fails is kept there with the expiry the store
// would have given it, and a read the store fails is answered from it; deletes and purges apply to it; the first
// good answer from the store once no failure has been seen for a second empties it, and nothing in it is ever
// written back (STORES.md §3).
func WithOutageMemory(bytes int64) Option { return func(c *Cache) { c.outageCap = bytes } }

// WithLockTTL is how long a fetch may hold the store lock, and how long others wait for it (default 10 s).
func WithLockTTL(d time.Duration) Option { return func(c *Cache) { c.lockTTL = d } }

// New makes a Cache over store.
func New(store stores.Store, options ...Option) *Cache {
	c := &Cache{store: store, opts: format.DefaultOptions(), maxSize: format.DefaultMaxSize, lockTTL: 10 * time.Second,
		outageCap: DefaultOutageMemory, shared: &shared{flights: map[string]*flight{}}}
	if _, inProcess := store.(*stores.Memory); inProcess {
		c.opts.Compressor = format.None
	}
	for _, o := range options {
		o(c)
	}
	if c.outageCap > 0 {
		c.shared.outage = stores.NewMemory(c.outageCap, 0)
	}
	return c
}

// Open opens the store a URL names and makes a Cache over it.
func Open(ctx context.Context, url string, options ...Option) (*Cache, error) {
	s, err := stores.Open(ctx, url)
	if err != nil {
		return nil, err
	}
	return New(s, options...), nil
}

// WithNamespace returns a Cache on the same store under another namespace.
func (c *Cache) WithNamespace(ns string) *Cache {
	cp := *c
	cp.namespace = ns
	return &cp
}

// Store is the cache's store.
func (c *Cache) Store() stores.Store { return c.store }

// Close closes the store.
func (c *Cache) Close() error { return c.store.Close() }

// StoreKey is the key a cache key is stored under: namespaced and made safe.
func (c *Cache) StoreKey(key string) string { return keys.NamespacedKey(c.namespace, key) }

// EntryOption says how one value is written (TTL, stale window, version, tags) or which version a read wants.
type EntryOption func(*entryOpts)

type entryOpts struct {
	ttl     time.Duration
	stale   time.Duration
	version *string
	tags    []string
}

// TTL: the entry expires this long after it is written (0 = never).
func TTL(d time.Duration) EntryOption { return func(o *entryOpts) { o.ttl = d } }

// Stale: how long past expiry the entry may be served while it is recomputed.
func Stale(d time.Duration) EntryOption { return func(o *entryOpts) { o.stale = d } }

// Version: written into the entry; a read with a version treats an entry of another version as a miss.
func Version(v string) EntryOption { return func(o *entryOpts) { o.version = &v } }

// Tags: the entry's tags, for PurgeTag.
func Tags(tags ...string) EntryOption { return func(o *entryOpts) { o.tags = tags } }

func collect(options []EntryOption) entryOpts {
	var o entryOpts
	for _, f := range options {
		f(&o)
	}
	return o
}

// encode writes value as an entry with these options.
func (c *Cache) encode(value any, o entryOpts) ([]byte, error) {
	opts := c.opts
	now := format.NowMs()
	opts.CreatedAt = &now
	opts.TTLMs = uint64(o.ttl.Milliseconds())
	opts.StaleMs = uint64(o.stale.Milliseconds())
	opts.Version = o.version
	opts.Tags = o.tags
	if b, ok := value.([]byte); ok && opts.Serializer == format.Msgpack {
		return format.Encode(b, opts) // bytes as msgpack bin
	}
	return format.Encode(value, opts)
}

type verdict int

const (
	miss verdict = iota
	fresh
	stale
)

// decode judges the bytes a store returned: a miss for another version, a response entry, a corrupt entry or
// past the hard expiry; else fresh or stale. A counter (ASCII decimal) reads as int64.
func (c *Cache) decode(data []byte, version *string) (any, verdict) {
	e, err := format.Decode(data, c.maxSize)
	if err != nil {
		if n, ok := parseCounter(data); ok && version == nil {
			return n, fresh
		}
		c.shared.stats.corrupt.Add(1)
		return nil, miss
	}
	if e.Kind != format.KindValue {
		c.shared.stats.corrupt.Add(1)
		return nil, miss
	}
	if version != nil && (e.Version == nil || *e.Version != *version) {
		return nil, miss
	}
	now := format.NowMs()
	if e.ExpiresAt == 0 || now < e.ExpiresAt {
		return e.Value, fresh
	}
	if hard, _ := e.HardExpiry(); now >= hard {
		return nil, miss
	}
	return e.Value, stale
}

// getRaw reads storeKey from the store; when the store fails, from the outage memory.
func (c *Cache) getRaw(ctx context.Context, storeKey string) []byte {
	v, err := c.store.Get(ctx, storeKey)
	if err == nil {
		c.answered()
		return v
	}
	c.shared.stats.storeErrors.Add(1)
	if !c.failed(err) {
		return nil
	}
	return c.fromOutage(storeKey)
}

func (c *Cache) lookup(ctx context.Context, storeKey string, version *string) (any, verdict) {
	raw := c.getRaw(ctx, storeKey)
	if raw == nil {
		return nil, miss
	}
	return c.decode(raw, version)
}

// Get returns a fresh value for key, and whether there was one. Store failures read as a miss.
func (c *Cache) Get(ctx context.Context, key string, options ...EntryOption) (any, bool) {
	v, verdict := c.lookup(ctx, c.StoreKey(key), collect(options).version)
	if verdict == fresh {
		c.shared.stats.hits.Add(1)
		return v, true
	}
	c.shared.stats.misses.Add(1)
	return nil, false
}

// GetMulti returns the fresh values found, by key.
func (c *Cache) GetMulti(ctx context.Context, keyList []string, options ...EntryOption) map[string]any {
	version := collect(options).version
	storeKeys := make([]string, len(keyList))
	for i, k := range keyList {
		storeKeys[i] = c.StoreKey(k)
	}
	out := map[string]any{}
	raws, err := c.store.GetMulti(ctx, storeKeys)
	if err == nil {
		c.answered()
	} else {
		c.shared.stats.storeErrors.Add(1)
		if !c.failed(err) {
			c.shared.stats.misses.Add(int64(len(keyList)))
			return out
		}
		raws = make([][]byte, len(storeKeys))
		for i, k := range storeKeys {
			raws[i] = c.fromOutage(k)
		}
	}
	for i, raw := range raws {
		if raw == nil {
			c.shared.stats.misses.Add(1)
			continue
		}
		if v, verdict := c.decode(raw, version); verdict == fresh {
			out[keyList[i]] = v
			c.shared.stats.hits.Add(1)
		} else {
			c.shared.stats.misses.Add(1)
		}
	}
	return out
}

// Set writes value under key.
func (c *Cache) Set(ctx context.Context, key string, value any, options ...EntryOption) error {
	data, err := c.encode(value, collect(options))
	if err != nil {
		return err
	}
	storeKey := c.StoreKey(key)
	err = c.setEntry(ctx, storeKey, data)
	c.wrote(err, storeKey, data)
	return err
}

// SetMulti writes several values with the same options.
func (c *Cache) SetMulti(ctx context.Context, values map[string]any, options ...EntryOption) error {
	o := collect(options)
	items := make([]stores.Item, 0, len(values))
	for k, v := range values {
		data, err := c.encode(v, o)
		if err != nil {
			return err
		}
		items = append(items, stores.Item{Key: c.StoreKey(k), Value: data})
	}
	err := c.store.SetMulti(ctx, items, 0)
	if err == nil {
		c.answered()
	} else {
		for _, it := range items {
			c.wrote(err, it.Key, it.Value)
		}
	}
	return err
}

// Add writes value only when key holds nothing; it reports whether it wrote.
func (c *Cache) Add(ctx context.Context, key string, value any, options ...EntryOption) (bool, error) {
	data, err := c.encode(value, collect(options))
	if err != nil {
		return false, err
	}
	storeKey := c.StoreKey(key)
	added, err := c.store.Add(ctx, storeKey, data, 0)
	if err == nil {
		c.answered()
	} else if c.keep(err) {
		c.shared.lastFailure.Store(monoNow())
		// Whether the store held the key is unknown: the outage memory adds only where it holds nothing itself.
		if added, _ := c.shared.outage.Add(ctx, storeKey, data, 0); added {
			c.shared.stats.outageKept.Add(1)
		}
		c.failedNow()
	}
	return added, err
}

// Delete removes key.
func (c *Cache) Delete(ctx context.Context, key string) (bool, error) {
	storeKey := c.StoreKey(key)
	if c.shared.outage != nil {
		_, _ = c.shared.outage.Delete(ctx, storeKey)
	}
	ok, err := c.store.Delete(ctx, storeKey)
	c.observe(err)
	return ok, err
}

// DeleteMulti removes keys and returns how many were there.
func (c *Cache) DeleteMulti(ctx context.Context, keyList []string) (int, error) {
	sk := make([]string, len(keyList))
	for i, k := range keyList {
		sk[i] = c.StoreKey(k)
	}
	if c.shared.outage != nil {
		_, _ = c.shared.outage.DeleteMulti(ctx, sk)
	}
	n, err := c.store.DeleteMulti(ctx, sk)
	c.observe(err)
	return n, err
}

// Incr adds delta to the counter under key (created holding delta, with ttl, when missing and create is true).
func (c *Cache) Incr(ctx context.Context, key string, delta int64, ttl time.Duration, create bool) (int64, bool, error) {
	n, ok, err := c.store.Incr(ctx, c.StoreKey(key), delta, ttl, create)
	c.observe(err)
	return n, ok, err
}

// Decr subtracts delta.
func (c *Cache) Decr(ctx context.Context, key string, delta int64, ttl time.Duration, create bool) (int64, bool, error) {
	return c.Incr(ctx, key, -delta, ttl, create)
}

// PurgeTag removes (or, on memcached, hides) every entry with the tag, in every language's view.
func (c *Cache) PurgeTag(ctx context.Context, tag string) (stores.Purged, error) {
	if c.shared.outage != nil {
		_, _ = c.shared.outage.PurgeTag(ctx, tag)
	}
	p, err := c.store.PurgeTag(ctx, tag)
	c.observe(err)
	return p, err
}

// PurgePrefix removes every entry whose key (within this cache's namespace) starts with prefix.
func (c *Cache) PurgePrefix(ctx context.Context, prefix string) (stores.Purged, error) {
	if c.namespace != "" {
		prefix = c.namespace + ":" + prefix
	}
	if c.shared.outage != nil {
		_, _ = c.shared.outage.PurgePrefix(ctx, prefix)
	}
	p, err := c.store.PurgePrefix(ctx, prefix)
	c.observe(err)
	return p, err
}

// Clear empties the store (within its prefix), and the outage memory.
func (c *Cache) Clear(ctx context.Context) error {
	if c.shared.outage != nil {
		_ = c.shared.outage.Clear(ctx)
	}
	err := c.store.Clear(ctx)
	c.observe(err)
	return err
}

func parseCounter(v []byte) (int64, bool) {
	end := len(v)
	for end > 0 && v[end-1] == ' ' {
		end--
	}
	s := v[:end]
	if len(s) == 0 || len(s) > 20 {
		return 0, false
	}
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	if len(s) == 0 {
		return 0, false
	}
	var n uint64
	for _, ch := range s {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		n = n*10 + uint64(ch-'0')
		if n > 1<<63 {
			return 0, false
		}
	}
	if neg {
		return -int64(n), true
	}
	if n > 1<<63-1 {
		return 0, false
	}
	return int64(n), true
}

func token() []byte {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return []byte(hex.EncodeToString(b[:]))
}

// setEntry writes an entry this cache has just encoded (and never touches again): over the memory store, handed
// over without the store's defensive copy.
func (c *Cache) setEntry(ctx context.Context, storeKey string, data []byte) error {
	if m, ok := c.store.(*stores.Memory); ok {
		return m.SetOwned(ctx, storeKey, data, 0)
	}
	return c.store.Set(ctx, storeKey, data, 0)
}
