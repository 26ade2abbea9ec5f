// The memory store (STORES.md §8): the process's own bounded store, concurrent through shards, each an LRU
// bounded by bytes (and optionally entries). Not shared with other processes; purges are exact. A value handed
// to Set is copied; the slice Get returns is shared with the store and must not be modified.
package stores

import (
	"container/list"
	"context"
	"hash/maphash"
	"strings"
	"sync"
	"time"
)

const memoryShards = 16

// itemOverhead approximates the bookkeeping bytes of one item (map slot, list element, struct).
const itemOverhead = 96

type memItem struct {
	key     string
	value   []byte
	expires int64 // ms; 0 = never
	elem    *list.Element
}

type memShard struct {
	mu    sync.Mutex
	items map[string]*memItem
	lru   list.List
	bytes int64
}

// Memory is the memory store.
type Memory struct {
	shards     [memoryShards]memShard
	seed       maphash.Seed
	capacity   int64 // per shard
	maxEntries int   // per shard; 0 = unbounded
	maxValue   int
}

// NewMemory makes a memory store of capacity bytes (and at most maxEntries entries, 0 = unbounded).
func NewMemory(capacity int64, maxEntries int) *Memory {
	m := &Memory{seed: maphash.MakeSeed(), capacity: max(capacity/memoryShards, 1), maxValue: int(capacity / 16)}
	if maxEntries > 0 {
		m.maxEntries = max(maxEntries/memoryShards, 1)
	}
	for i := range m.shards {
		m.shards[i].items = map[string]*memItem{}
	}
	return m
}

func openMemory(u *URL) (Store, error) {
	if len(u.Hosts) > 0 || u.Username != nil {
		return nil, u.errorf("memory:// takes no host")
	}
	capacity, err := u.size("capacity", 256<<20)
	if err != nil {
		return nil, err
	}
	maxEntries, err := u.number("max_entries", 0, 0, 1<<30)
	if err != nil {
		return nil, err
	}
	if err := u.finish(); err != nil {
		return nil, err
	}
	return NewMemory(capacity, maxEntries), nil
}

func (m *Memory) shard(key string) *memShard {
	return &m.shards[maphash.String(m.seed, key)%memoryShards]
}

func (m *Memory) Backend() string { return "memory" }
func (m *Memory) MaxValue() int   { return m.maxValue }
func (m *Memory) Close() error    { return nil }

func keyError(backend string, err error) error {
	if e, ok := err.(*Error); ok {
		e.Backend = backend
	}
	return err
}

func (m *Memory) Get(ctx context.Context, key string) ([]byte, error) {
	if err := CheckKey(key); err != nil {
		return nil, keyError("memory", err)
	}
	s := m.shard(key)
	s.mu.Lock()
	it, ok := s.items[key]
	if !ok {
		s.mu.Unlock()
		return nil, nil
	}
	if it.expires != 0 && it.expires <= nowMs() {
		s.remove(it)
		s.mu.Unlock()
		return nil, nil
	}
	s.lru.MoveToFront(it.elem)
	v := it.value
	s.mu.Unlock()
	return v, nil
}

func (m *Memory) GetMulti(ctx context.Context, keys []string) ([][]byte, error) {
	if err := checkKeys(keys); err != nil {
		return nil, keyError("memory", err)
	}
	out := make([][]byte, len(keys))
	for i, k := range keys {
		out[i], _ = m.Get(ctx, k)
	}
	return out, nil
}

func (s *memShard) remove(it *memItem) {
	s.lru.Remove(it.elem)
	delete(s.items, it.key)
	s.bytes -= int64(len(it.key) + len(it.value) + itemOverhead)
}

// SetOwned is Set for a caller that hands value over: the store keeps value itself rather than a copy, so the
// caller must never modify it afterwards. larder's Cache writes the entries it has just encoded this way (issue 34:
// the copy of a 64 KiB entry was a third of a write's cost over this store).
func (m *Memory) SetOwned(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	_, err := m.store(key, value, ttl, false, false)
	return err
}

func (m *Memory) put(key string, value []byte, ttl time.Duration, onlyIfAbsent bool) (bool, error) {
	return m.store(key, value, ttl, onlyIfAbsent, true)
}

// store puts value under key: a copy of it (copied) or value itself.
func (m *Memory) store(key string, value []byte, ttl time.Duration, onlyIfAbsent, copied bool) (bool, error) {
	if err := CheckKey(key); err != nil {
		return false, keyError("memory", err)
	}
	if len(value) > m.maxValue {
		return false, &Error{Kind: TooLarge, Backend: "memory", Msg: "value of " + itoa(len(value)) + " bytes for key " + key + " exceeds the " + itoa(m.maxValue) + "-byte limit (a sixteenth of capacity)"}
	}
	now := nowMs()
	exp := expiresAt(value, ttl, now)
	s := m.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	old, exists := s.items[key]
	if exists && old.expires != 0 && old.expires <= now {
		s.remove(old)
		exists = false
	}
	if onlyIfAbsent && exists {
		return false, nil
	}
	if exp != 0 && exp <= now {
		if exists {
			s.remove(old)
		}
		return false, nil
	}
	if exists {
		s.remove(old)
	}
	if copied {
		value = append([]byte(nil), value...)
	}
	it := &memItem{key: key, value: value, expires: exp}
	it.elem = s.lru.PushFront(it)
	s.items[key] = it
	s.bytes += int64(len(key) + len(value) + itemOverhead)
	for s.bytes > m.capacity || (m.maxEntries > 0 && len(s.items) > m.maxEntries) {
		s.remove(s.lru.Back().Value.(*memItem))
	}
	return true, nil
}

func (m *Memory) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	_, err := m.put(key, value, ttl, false)
	return err
}

func (m *Memory) SetMulti(ctx context.Context, items []Item, ttl time.Duration) error {
	for _, it := range items {
		if err := m.Set(ctx, it.Key, it.Value, ttl); err != nil {
			return err
		}
	}
	return nil
}

func (m *Memory) Add(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	return m.put(key, value, ttl, true)
}

func (m *Memory) Incr(ctx context.Context, key string, delta int64, ttl time.Duration, create bool) (int64, bool, error) {
	if err := CheckKey(key); err != nil {
		return 0, false, keyError("memory", err)
	}
	s := m.shard(key)
	s.mu.Lock()
	it, ok := s.items[key]
	now := nowMs()
	if ok && it.expires != 0 && it.expires <= now {
		s.remove(it)
		ok = false
	}
	if ok {
		n, isCounter := parseCounter(it.value)
		if !isCounter {
			s.mu.Unlock()
			return 0, false, &Error{Kind: NotACounter, Backend: "memory", Msg: "key " + key + " holds a value that is not a counter"}
		}
		n = saturatingAdd(n, delta)
		s.bytes -= int64(len(it.value))
		it.value = []byte(itoa64(n))
		s.bytes += int64(len(it.value))
		s.lru.MoveToFront(it.elem)
		s.mu.Unlock()
		return n, true, nil
	}
	s.mu.Unlock()
	if !create {
		return 0, false, nil
	}
	if _, err := m.put(key, []byte(itoa64(delta)), ttl, false); err != nil {
		return 0, false, err
	}
	return delta, true, nil
}

func (m *Memory) DeleteIf(ctx context.Context, key string, expected []byte) (bool, error) {
	if err := CheckKey(key); err != nil {
		return false, keyError("memory", err)
	}
	s := m.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.items[key]
	if !ok || string(it.value) != string(expected) {
		return false, nil
	}
	s.remove(it)
	return true, nil
}

func (m *Memory) Delete(ctx context.Context, key string) (bool, error) {
	if err := CheckKey(key); err != nil {
		return false, keyError("memory", err)
	}
	s := m.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.items[key]
	if !ok {
		return false, nil
	}
	live := it.expires == 0 || it.expires > nowMs()
	s.remove(it)
	return live, nil
}

func (m *Memory) DeleteMulti(ctx context.Context, keys []string) (int, error) {
	if err := checkKeys(keys); err != nil {
		return 0, keyError("memory", err)
	}
	n := 0
	for _, k := range keys {
		if ok, _ := m.Delete(ctx, k); ok {
			n++
		}
	}
	return n, nil
}

func (m *Memory) Clear(ctx context.Context) error {
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		s.items = map[string]*memItem{}
		s.lru.Init()
		s.bytes = 0
		s.mu.Unlock()
	}
	return nil
}

// purge removes every live item match says yes to.
func (m *Memory) purge(match func(*memItem) bool) int64 {
	var n int64
	now := nowMs()
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		for _, it := range s.items {
			if match(it) {
				if it.expires == 0 || it.expires > now {
					n++
				}
				s.remove(it)
			}
		}
		s.mu.Unlock()
	}
	return n
}

func (m *Memory) PurgePrefix(ctx context.Context, prefix string) (Purged, error) {
	if err := CheckPrefix(prefix); err != nil {
		return Purged{}, keyError("memory", err)
	}
	return Purged{Count: m.purge(func(it *memItem) bool { return strings.HasPrefix(it.key, prefix) })}, nil
}

func (m *Memory) PurgeTag(ctx context.Context, tag string) (Purged, error) {
	return Purged{Count: m.purge(func(it *memItem) bool {
		for _, t := range entryTags(it.value) {
			if t == tag {
				return true
			}
		}
		return false
	})}, nil
}

func (m *Memory) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		st.Entries += int64(len(s.items))
		st.Bytes += s.bytes
		s.mu.Unlock()
	}
	return st, nil
}
