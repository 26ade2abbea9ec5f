// Typed[T]: a typed view of a Cache for Go structs and other concrete types, serialized with
// vmihailenco/msgpack in larder's compact form (a struct is a map of its fields, as rmp_serde::to_vec_named and
// Python's msgpack write the same value), so other languages read the same bytes as maps.
package larder

import (
	"context"
	"errors"
	"time"

	"github.com/larder-cache/larder/clients/go/format"
)

// Typed reads and writes values of type T.
type Typed[T any] struct {
	C *Cache
}

// ErrNotMsgpack: a typed read of an entry that is not msgpack.
var ErrNotMsgpack = errors.New("larder: a typed read needs a msgpack entry")

func (t Typed[T]) decode(data []byte, version *string) (T, verdict) {
	var zero T
	h, payload, err := format.DecodePayload(data, t.C.maxSize)
	if err != nil || h.Kind != format.KindValue || h.Serializer != format.Msgpack {
		t.C.shared.stats.corrupt.Add(1)
		return zero, miss
	}
	if version != nil && (h.Version == nil || *h.Version != *version) {
		return zero, miss
	}
	var v T
	if err := format.UnmarshalTyped(payload, &v); err != nil {
		t.C.shared.stats.corrupt.Add(1)
		return zero, miss
	}
	now := format.NowMs()
	if h.ExpiresAt == 0 || now < h.ExpiresAt {
		return v, fresh
	}
	if hard, _ := h.HardExpiry(); now >= hard {
		return zero, miss
	}
	return v, stale
}

// Get returns the fresh value under key.
func (t Typed[T]) Get(ctx context.Context, key string, options ...EntryOption) (T, bool) {
	raw := t.C.getRaw(ctx, t.C.StoreKey(key))
	if raw != nil {
		if v, verdict := t.decode(raw, collect(options).version); verdict == fresh {
			t.C.shared.stats.hits.Add(1)
			return v, true
		}
	}
	t.C.shared.stats.misses.Add(1)
	var zero T
	return zero, false
}

// Set writes value under key.
func (t Typed[T]) Set(ctx context.Context, key string, value T, options ...EntryOption) error {
	return t.C.Set(ctx, key, value, options...)
}

// Fetch is Cache.Fetch for T: the loader's value is stored and returned typed; a cached value is decoded into T.
func (t Typed[T]) Fetch(ctx context.Context, key string, ttl time.Duration, loader func(ctx context.Context) (T, error), options ...EntryOption) (T, error) {
	var zero T
	raw := t.C.getRaw(ctx, t.C.StoreKey(key))
	if raw != nil {
		if v, verdict := t.decode(raw, collect(options).version); verdict == fresh {
			t.C.shared.stats.hits.Add(1)
			return v, nil
		}
	}
	v, err := t.C.Fetch(ctx, key, ttl, func(ctx context.Context) (any, error) { return loader(ctx) }, options...)
	if err != nil {
		return zero, err
	}
	if typed, ok := v.(T); ok {
		return typed, nil
	}
	// The value came from the store (another process wrote it): re-encode the generic value and decode it as T.
	data, err := format.AppendMsgpack(nil, v)
	if err != nil {
		return zero, err
	}
	var out T
	if err := format.UnmarshalTyped(data, &out); err != nil {
		return zero, err
	}
	return out, nil
}
