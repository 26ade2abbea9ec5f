// hostile_keys.json (spec/STORES.md §2, "Wire bytes are the checked bytes"): every hostile key, as the bytes of
// key_hex (a Go string is its bytes), through the stores opened from their URLs, memory, file, SQLite, memcached
// and Redis; a refused key fails every operation with invalid_key and leaves the server as it was, a stored key
// is found by the runner's raw probe (hostile.go) under exactly the bytes of wire_hex.
package conformance

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/larder-cache/larder/clients/go/stores"
)

type hostileKeysDoc struct {
	EntryHex string `json:"entry_hex"`
	Sentinel *struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	} `json:"sentinel"`
	Cases []hostileKeyCase `json:"cases"`
}

type hostileKeyCase struct {
	Name    string          `json:"name"`
	Class   string          `json:"class"`
	KeyHex  *string         `json:"key_hex"`
	Outcome json.RawMessage `json:"outcome"`
	WireHex *string         `json:"wire_hex"`
}

// hostileStores are the stores every case runs on, in order.
var hostileStores = []string{"memory", "file", "sqlite", "memcached", "redis"}

// outcomeOn is the case's outcome on store: one word for every store, or an object of one per store.
func (c hostileKeyCase) outcomeOn(store string) (string, error) {
	var one string
	if err := json.Unmarshal(c.Outcome, &one); err == nil {
		return one, nil
	}
	var per map[string]string
	if err := json.Unmarshal(c.Outcome, &per); err != nil {
		return "", fmt.Errorf("outcome is neither a word nor an object of words: %s", c.Outcome)
	}
	o, ok := per[store]
	if !ok {
		return "", fmt.Errorf("outcome names no outcome for %s", store)
	}
	return o, nil
}

type hostileKeysEnv struct {
	entry, sentinelKey, sentinelValue []byte
	memcached, redis                  string
}

func hostileKeysCases(_ string, data []byte) ([]Case, error) {
	var doc hostileKeysDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Cases == nil || doc.Sentinel == nil || doc.EntryHex == "" {
		return nil, errors.New("no entry_hex, sentinel or cases")
	}
	entry, err := unhex("entry_hex", doc.EntryHex)
	if err != nil {
		return nil, err
	}
	env := hostileKeysEnv{entry: entry, sentinelKey: []byte(doc.Sentinel.Key), sentinelValue: []byte(doc.Sentinel.Value)}
	if env.memcached, err = needEnv("LARDER_CONFORMANCE_MEMCACHED", "the 127.0.0.1:PORT of a memcached the runner may flush"); err != nil {
		return nil, err
	}
	if env.redis, err = needEnv("LARDER_CONFORMANCE_REDIS", "the 127.0.0.1:PORT of a redis-server the runner may flush"); err != nil {
		return nil, err
	}
	var out []Case
	for _, c := range doc.Cases {
		if c.Name == "" || c.KeyHex == nil {
			return nil, fmt.Errorf("a case without a name or key_hex: %+v", c)
		}
		out = append(out, Case{c.Name, func() error { return env.check(c) }})
	}
	return out, nil
}

func (env hostileKeysEnv) check(c hostileKeyCase) error {
	key, err := unhex("key_hex", *c.KeyHex)
	if err != nil {
		return err
	}
	wire := key
	if c.WireHex != nil {
		if wire, err = unhex("wire_hex", *c.WireHex); err != nil {
			return err
		}
	}
	for _, store := range hostileStores {
		outcome, err := c.outcomeOn(store)
		if err == nil {
			err = env.checkOn(store, string(key), wire, outcome)
		}
		if err != nil {
			return fmt.Errorf("%s: %v", store, err)
		}
	}
	return nil
}

// checkOn runs one case on a fresh store of one kind.
func (env hostileKeysEnv) checkOn(kind, key string, wire []byte, outcome string) error {
	dir, err := os.MkdirTemp("", "larder-go-hostile-keys-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	url := map[string]string{
		"memory":    "memory://",
		"file":      "file://" + filepath.Join(dir, "files"),
		"sqlite":    "sqlite://" + filepath.Join(dir, "store.db"),
		"memcached": "memcached://" + env.memcached,
		"redis":     "redis://" + env.redis,
	}[kind]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := stores.Open(ctx, url)
	if err != nil {
		return fmt.Errorf("open %s: %v", url, err)
	}
	defer s.Close()
	remote := kind == "memcached" || kind == "redis"
	if remote {
		flush := mcFlush
		if kind == "redis" {
			flush = redisFlush
		}
		if err := flush(map[string]string{"memcached": env.memcached, "redis": env.redis}[kind]); err != nil {
			return err
		}
		if err := s.Set(ctx, string(env.sentinelKey), env.sentinelValue, 0); err != nil {
			return fmt.Errorf("writing the sentinel: %v", err)
		}
	}
	switch outcome {
	case "refused":
		if err := env.refused(ctx, s, key); err != nil {
			return err
		}
		if remote {
			return env.sentinelIntact(kind, 1)
		}
		return nil
	case "stored":
		return env.stored(ctx, s, kind, key, wire, filepath.Join(dir, "files"))
	}
	return fmt.Errorf("unknown outcome %q", outcome)
}

func (env hostileKeysEnv) refused(ctx context.Context, s stores.Store, key string) error {
	ops := []struct {
		name string
		call func() error
	}{
		{"get", func() error { _, err := s.Get(ctx, key); return err }},
		{"get_many", func() error { _, err := s.GetMulti(ctx, []string{key}); return err }},
		{"set", func() error { return s.Set(ctx, key, env.entry, 0) }},
		{"add", func() error { _, err := s.Add(ctx, key, env.entry, 0); return err }},
		{"delete", func() error { _, err := s.Delete(ctx, key); return err }},
	}
	if key != "" {
		ops = append(ops, struct {
			name string
			call func() error
		}{"purge_prefix", func() error { _, err := s.PurgePrefix(ctx, key); return err }})
	}
	for _, op := range ops {
		if err := op.call(); stores.KindOf(err) != stores.InvalidKey {
			return fmt.Errorf("%s of a refused key answered %v, not invalid_key", op.name, err)
		}
	}
	return nil
}

// sentinelIntact: the raw probe still finds the sentinel's value and, on Redis, DBSIZE is entries.
func (env hostileKeysEnv) sentinelIntact(kind string, entries int64) error {
	if kind == "memcached" {
		v, err := mcGet(env.memcached, env.sentinelKey)
		if err != nil || !bytes.Equal(v, env.sentinelValue) {
			return fmt.Errorf("the sentinel is no longer there (raw mg answered %q %v)", v, err)
		}
		return nil
	}
	v, err := redisGet(env.redis, env.sentinelKey)
	if err != nil || !bytes.Equal(v, env.sentinelValue) {
		return fmt.Errorf("the sentinel is no longer there (raw GET answered %q %v)", v, err)
	}
	n, err := redisDBSize(env.redis)
	if err != nil || n != entries {
		return fmt.Errorf("DBSIZE is %d (%v), not %d", n, err, entries)
	}
	return nil
}

func (env hostileKeysEnv) stored(ctx context.Context, s stores.Store, kind, key string, wire []byte, root string) error {
	if err := s.Set(ctx, key, env.entry, 0); err != nil {
		return fmt.Errorf("set: %v", err)
	}
	if v, err := s.Get(ctx, key); err != nil || !bytes.Equal(v, env.entry) {
		return fmt.Errorf("get after set answered %d bytes, %v", len(v), err)
	}
	if err := env.probe(kind, wire, root, true); err != nil {
		return err
	}
	if ok, err := s.Delete(ctx, key); !ok || err != nil {
		return fmt.Errorf("delete answered %v %v", ok, err)
	}
	if err := env.probe(kind, wire, root, false); err != nil {
		return err
	}
	if v, err := s.Get(ctx, key); v != nil || err != nil {
		return fmt.Errorf("get after delete answered %d bytes, %v", len(v), err)
	}
	return nil
}

// probe looks under the wire bytes with the runner's own code: present, the entry and nothing else; absent,
// nothing. Memory and SQLite have nothing to probe.
func (env hostileKeysEnv) probe(kind string, wire []byte, root string, present bool) error {
	switch kind {
	case "memcached", "redis":
		get, what := mcGet, "mg"
		addr := env.memcached
		if kind == "redis" {
			get, what, addr = redisGet, "GET", env.redis
		}
		v, err := get(addr, wire)
		if err != nil {
			return err
		}
		if present && !bytes.Equal(v, env.entry) {
			return fmt.Errorf("raw %s of the wire bytes %x answered %d bytes, not the entry", what, wire, len(v))
		}
		if !present && v != nil {
			return fmt.Errorf("raw %s of the wire bytes still answers after delete", what)
		}
		entries := int64(1)
		if present {
			entries = 2
		}
		return env.sentinelIntact(kind, entries)
	case "file":
		sum := sha256.Sum256(wire)
		h := hex.EncodeToString(sum[:])
		path := filepath.Join(root, h[0:2], h[2:4], h)
		data, err := os.ReadFile(path)
		if !present {
			if !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("%s after delete: %v", path, err)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("no file named for the wire bytes: %v", err)
		}
		if len(data) < 14 || string(data[:4]) != "LDR1" {
			return fmt.Errorf("%s has no LDR1 header", path)
		}
		n := int(binary.LittleEndian.Uint16(data[12:14]))
		if len(data) < 14+n || !bytes.Equal(data[14:14+n], wire) || !bytes.Equal(data[14+n:], env.entry) {
			return fmt.Errorf("%s holds key %x and %d value bytes, not the wire bytes and the entry", path, data[14:min(14+n, len(data))], len(data)-14-n)
		}
	}
	return nil
}
