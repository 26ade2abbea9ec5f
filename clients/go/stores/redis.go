// The Redis store (STORES.md §5), standalone or Cluster, on go-redis v9: SET with PXAT, NX for add, the Lua
// scripts of spec/redis loaded byte for byte (EVALSHA, EVAL when the server lacks them), a set per tag, SCAN
// purges on every master. A standalone server's GET, MGET and SET go over larder's own connections
// (redis_wire.go); every reply go-redis reads passes through respGuard (bounded sizes and nesting); every
// operation runs under one deadline (`timeout`); a standalone server is ejected after `failures` failures. The
// Cluster client keeps go-redis's legacy routing (by key slot; DisableRoutingPolicies): its routing policies
// would ask a node for COMMAND's whole table (11,000 elements, 90 KB) on first use, past any bound a command of
// larder's needs.
package stores

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/redis/go-redis/v9"

	"github.com/larder-cache/larder/clients/go/stores/redisscripts"
)

var (
	scriptDeleteIf = redis.NewScript(redisscripts.DeleteIf)
	scriptIncr     = redis.NewScript(redisscripts.Incr)
	scriptTag      = redis.NewScript(redisscripts.Tag)
)

// Redis is the Redis store.
type Redis struct {
	client   redis.UniversalClient
	cluster  *redis.ClusterClient
	opts     remoteOptions
	maxValue int64
	server   string
	health   health
	wire     *redisWire // a standalone server's GET, MGET and SET; nil on a Cluster
}

func openRedis(ctx context.Context, u *URL, cluster bool) (Store, error) {
	if len(u.Hosts) == 0 {
		return nil, u.errorf("%s:// needs at least one host", u.Scheme)
	}
	o, err := u.remote(4, time.Second)
	if err != nil {
		return nil, err
	}
	maxValue, err := u.size("max_value", 64<<20)
	if err != nil {
		return nil, err
	}
	db := 0
	if p := strings.Trim(u.Path, "/"); p != "" {
		if cluster {
			return nil, u.errorf("redis+cluster:// has only database 0: no path")
		}
		if db, err = strconv.Atoi(p); err != nil || db < 0 || db > 1<<20 {
			return nil, u.errorf("the path is a database number, not %q", p)
		}
	}
	if err := u.finish(); err != nil {
		return nil, err
	}
	r := &Redis{opts: o, maxValue: maxValue}
	dialer := func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := net.Dialer{Timeout: o.connectTimeout}
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &respGuard{Conn: c, maxBulk: maxValue}, nil
	}
	user, pass := "", ""
	if u.Username != nil {
		user = *u.Username
	}
	if u.Password != nil {
		pass = *u.Password
	}
	if cluster {
		var addrs []string
		for _, h := range u.Hosts {
			addrs = append(addrs, h.Address(6379))
		}
		r.server = strings.Join(addrs, ",")
		r.cluster = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, Username: user, Password: pass,
			Dialer: dialer, DialTimeout: o.connectTimeout, ReadTimeout: o.timeout, WriteTimeout: o.timeout,
			ContextTimeoutEnabled: true, PoolSize: o.pool, MaxRetries: -1, Protocol: 2, DisableIdentity: true,
			MaxRedirects: 3, DisableRoutingPolicies: true})
		r.client = r.cluster
	} else {
		if len(u.Hosts) != 1 {
			return nil, u.errorf("redis:// takes one host (redis+cluster:// takes several)")
		}
		r.server = u.Hosts[0].Address(6379)
		r.client = redis.NewClient(&redis.Options{Addr: r.server, Username: user, Password: pass, DB: db,
			Dialer: dialer, DialTimeout: o.connectTimeout, ReadTimeout: o.timeout, WriteTimeout: o.timeout,
			ContextTimeoutEnabled: true, PoolSize: o.pool, MaxRetries: -1, Protocol: 2, DisableIdentity: true,
			PoolTimeout: o.timeout, DialerRetries: 1})
		r.wire = newRedisWire(r.server, o, user, pass, db, maxValue)
	}
	return r, nil
}

func (r *Redis) Backend() string { return "redis" }
func (r *Redis) MaxValue() int   { return int(min(r.maxValue, 512<<20)) }
func (r *Redis) Close() error {
	if r.wire != nil {
		r.wire.conns.close()
	}
	return r.client.Close()
}

// run bounds one operation by `timeout` and turns errors into the store's, recording the server's health.
func (r *Redis) run(ctx context.Context, fn func(ctx context.Context) error) error {
	if err := r.admit(); err != nil {
		return err
	}
	if r.cluster == nil {
		return r.outcome(fn(&opContext{Context: ctx, deadline: deadline(ctx, r.opts.timeout)}))
	}
	dctx, cancel := context.WithDeadline(ctx, deadline(ctx, r.opts.timeout))
	defer cancel()
	return r.outcome(fn(dctx))
}

// runWire is run for an operation on larder's own connections (standalone only), given its total deadline.
func (r *Redis) runWire(ctx context.Context, fn func(dl time.Time) error) error {
	if err := r.admit(); err != nil {
		return err
	}
	return r.outcome(fn(deadline(ctx, r.opts.timeout)))
}

// admit refuses an operation while a standalone server is ejected.
func (r *Redis) admit() error {
	if r.cluster == nil && !r.health.admits() {
		r.health.countError()
		return &Error{Kind: Unavailable, Backend: "redis", Server: r.server, Msg: "ejected after failures; retrying later"}
	}
	return nil
}

// outcome records an operation's result in the server's health and turns its error into the store's: an answer
// (an error reply, or a miss) is not a failure of the server.
func (r *Redis) outcome(err error) error {
	var answer redis.Error
	if err == nil || errors.Is(err, redis.Nil) || answerOf(err) != nil || errors.As(err, &answer) {
		if r.cluster == nil {
			r.health.record(true, r.opts.failures, r.opts.retryAfter)
		}
		if err != nil && !errors.Is(err, redis.Nil) {
			if strings.Contains(err.Error(), "not an integer") {
				return &Error{Kind: NotACounter, Backend: "redis", Server: r.server, Err: err}
			}
			return &Error{Kind: Other, Backend: "redis", Server: r.server, Err: err}
		}
		return err
	}
	if errors.Is(err, context.Canceled) {
		if r.cluster == nil {
			r.health.abandon()
		}
		return err
	}
	if r.cluster == nil {
		r.health.record(false, r.opts.failures, r.opts.retryAfter)
	} else {
		r.health.countError()
	}
	kind := Unavailable
	var pe *protocolError
	switch {
	case errors.As(err, &pe):
		kind = Protocol
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, redis.ErrPoolTimeout):
		kind = Timeout
	}
	return &Error{Kind: kind, Backend: "redis", Server: r.server, Err: err}
}

// opContext carries one standalone operation's total deadline to go-redis without a timer (context.WithDeadline
// cost 5 allocations and ~1.2 us an operation, ~4% of a loopback round trip). The deadline still bounds
// everything: go-redis sets every socket deadline from Deadline() (ContextTimeoutEnabled), the dialer's
// net.Dialer stops at it, the wait for a pooled connection is bounded by PoolTimeout = timeout (a wait that used
// it all leaves the reads no time), and a failed dial is not retried (DialerRetries = 1). Cancellation is the
// caller's context's own. The cluster client, whose redirects and retries wait on Done(), keeps a real deadline.
type opContext struct {
	context.Context
	deadline time.Time
}

func (c *opContext) Deadline() (time.Time, bool) { return c.deadline, true }

func (r *Redis) stored(key string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", keyError("redis", err)
	}
	return StoredKey(r.opts.prefix, key), nil
}

// Get is one GET (MGET of one key would build a slice of interfaces for its single reply), on larder's own
// connections to a standalone server.
func (r *Redis) Get(ctx context.Context, key string) ([]byte, error) {
	stored, err := r.stored(key)
	if err != nil {
		return nil, err
	}
	var out []byte
	if r.wire != nil {
		err = r.runWire(ctx, func(dl time.Time) error {
			out, err = r.wire.get(ctx, dl, stored)
			return err
		})
		return out, err
	}
	err = r.run(ctx, func(ctx context.Context) error {
		s, err := r.client.Get(ctx, stored).Result()
		if err == nil {
			out = stringBytes(s)
		}
		return err
	})
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return out, err
}

func (r *Redis) GetMulti(ctx context.Context, keys []string) ([][]byte, error) {
	stored := make([]string, len(keys))
	for i, k := range keys {
		s, err := r.stored(k)
		if err != nil {
			return nil, err
		}
		stored[i] = s
	}
	if r.wire != nil {
		var out [][]byte
		err := r.runWire(ctx, func(dl time.Time) error {
			var err error
			out, err = r.wire.mget(ctx, dl, stored)
			return err
		})
		return out, err
	}
	out := make([][]byte, len(keys))
	err := r.run(ctx, func(ctx context.Context) error {
		cmds := make([]*redis.StringCmd, len(stored))
		_, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, k := range stored {
				cmds[i] = p.Get(ctx, k)
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		for i, c := range cmds {
			if v, err := c.Bytes(); err == nil {
				out[i] = v
			}
		}
		return nil
	})
	return out, err
}

func (r *Redis) write(ctx context.Context, key string, value []byte, ttl time.Duration, nx bool) (bool, error) {
	stored, err := r.stored(key)
	if err != nil {
		return false, err
	}
	if len(value) > r.MaxValue() {
		return false, &Error{Kind: TooLarge, Backend: "redis", Msg: "value of " + itoa(len(value)) + " bytes for key " + key + " exceeds the " + itoa(r.MaxValue()) + "-byte limit"}
	}
	now := nowMs()
	exp := expiresAt(value, ttl, now)
	tags := entryTags(value)
	ok := false
	if r.wire != nil && len(tags) == 0 && (exp == 0 || exp > now) {
		err = r.runWire(ctx, func(dl time.Time) error {
			ok, err = r.wire.set(ctx, dl, stored, value, exp, nx)
			return err
		})
		return ok, err
	}
	err = r.run(ctx, func(ctx context.Context) error {
		if exp != 0 && exp <= now {
			if nx {
				return nil
			}
			return r.client.Del(ctx, stored).Err()
		}
		args := redis.SetArgs{}
		if exp != 0 {
			args.ExpireAt = time.UnixMilli(exp)
		}
		if nx {
			args.Mode = "NX"
		}
		if r.wire != nil {
			dl, _ := ctx.Deadline()
			if ok, err = r.wire.set(ctx, dl, stored, value, exp, nx); err != nil || !ok {
				return err
			}
		} else {
			res, err := r.client.SetArgs(ctx, stored, value, args).Result()
			if errors.Is(err, redis.Nil) {
				return nil
			}
			if err != nil {
				return err
			}
			ok = res == "OK"
		}
		for _, t := range tags {
			if err := scriptTag.Run(ctx, r.client, []string{InternalKey(r.opts.prefix, "tag", t)}, stored, exp).Err(); err != nil {
				return err
			}
		}
		return nil
	})
	return ok, err
}

func (r *Redis) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	_, err := r.write(ctx, key, value, ttl, false)
	return err
}

func (r *Redis) SetMulti(ctx context.Context, items []Item, ttl time.Duration) error {
	for _, it := range items {
		if err := r.Set(ctx, it.Key, it.Value, ttl); err != nil {
			return err
		}
	}
	return nil
}

func (r *Redis) Add(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	return r.write(ctx, key, value, ttl, true)
}

func (r *Redis) Incr(ctx context.Context, key string, delta int64, ttl time.Duration, create bool) (int64, bool, error) {
	stored, err := r.stored(key)
	if err != nil {
		return 0, false, err
	}
	var n int64
	found := false
	createArg := "0"
	if create {
		createArg = "1"
	}
	err = r.run(ctx, func(ctx context.Context) error {
		v, err := scriptIncr.Run(ctx, r.client, []string{stored}, delta, createArg, ttlMs(ttl)).Int64()
		if errors.Is(err, redis.Nil) {
			return nil
		}
		n, found = v, err == nil
		return err
	})
	return n, found, err
}

func (r *Redis) DeleteIf(ctx context.Context, key string, expected []byte) (bool, error) {
	stored, err := r.stored(key)
	if err != nil {
		return false, err
	}
	var n int64
	err = r.run(ctx, func(ctx context.Context) error {
		var err error
		n, err = scriptDeleteIf.Run(ctx, r.client, []string{stored}, expected).Int64()
		return err
	})
	return n == 1, err
}

func (r *Redis) Delete(ctx context.Context, key string) (bool, error) {
	n, err := r.DeleteMulti(ctx, []string{key})
	return n == 1, err
}

func (r *Redis) DeleteMulti(ctx context.Context, keys []string) (int, error) {
	stored := make([]string, len(keys))
	for i, k := range keys {
		s, err := r.stored(k)
		if err != nil {
			return 0, err
		}
		stored[i] = s
	}
	var n int64
	err := r.run(ctx, func(ctx context.Context) error {
		var err error
		n, err = r.delStored(ctx, stored)
		return err
	})
	return int(n), err
}

// delStored deletes stored keys (one DEL per key on a Cluster, where keys live in different slots).
func (r *Redis) delStored(ctx context.Context, stored []string) (int64, error) {
	if len(stored) == 0 {
		return 0, nil
	}
	if r.cluster == nil {
		return r.client.Del(ctx, stored...).Result()
	}
	cmds := make([]*redis.IntCmd, len(stored))
	_, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range stored {
			cmds[i] = p.Del(ctx, k)
		}
		return nil
	})
	var n int64
	for _, c := range cmds {
		n += c.Val()
	}
	return n, err
}

// globPrefix escapes SCAN's glob characters in a prefix and adds *, byte for byte (ranging over runes would
// write U+FFFD for a byte that is not UTF-8: bytes the check never saw).
func globPrefix(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if strings.IndexByte(`*?[]\`, p[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(p[i])
	}
	return b.String() + "*"
}

func (r *Redis) masters(ctx context.Context, fn func(ctx context.Context, c redis.Cmdable) error) error {
	if r.cluster == nil {
		return fn(ctx, r.client)
	}
	return r.cluster.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return fn(ctx, c) })
}

// scanTimeout bounds a whole purge (many pages); each page is still bounded by the client's timeouts.
const scanTimeout = 60 * time.Second

func (r *Redis) PurgePrefix(ctx context.Context, prefix string) (Purged, error) {
	if err := CheckPrefix(prefix); err != nil {
		return Purged{}, keyError("redis", err)
	}
	if err := r.admit(); err != nil {
		return Purged{}, err
	}
	pattern := globPrefix(r.opts.prefix + prefix)
	var total int64
	ctx, cancel := context.WithTimeout(ctx, scanTimeout)
	defer cancel()
	err := r.masters(ctx, func(ctx context.Context, c redis.Cmdable) error {
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, pattern, redisScanCount).Result()
			if err != nil {
				return err
			}
			if len(keys) > 0 {
				n, err := c.Del(ctx, keys...).Result()
				if err != nil {
					return err
				}
				total += n
			}
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	})
	if err := r.outcome(err); err != nil {
		return Purged{}, err
	}
	return Purged{Count: total}, nil
}

func (r *Redis) PurgeTag(ctx context.Context, tag string) (Purged, error) {
	if err := r.admit(); err != nil {
		return Purged{}, err
	}
	set := InternalKey(r.opts.prefix, "tag", tag)
	ctx, cancel := context.WithTimeout(ctx, scanTimeout)
	defer cancel()
	var total int64
	var cursor uint64
	err := func() error {
		for {
			members, next, err := r.client.SScan(ctx, set, cursor, "", redisScanCount).Result()
			if err != nil {
				return err
			}
			n, err := r.delStored(ctx, members)
			if err != nil {
				return err
			}
			total += n
			if cursor = next; cursor == 0 {
				return r.client.Del(ctx, set).Err()
			}
		}
	}()
	if err := r.outcome(err); err != nil {
		return Purged{}, err
	}
	return Purged{Count: total}, nil
}

func (r *Redis) Clear(ctx context.Context) error {
	if r.opts.prefix != "" {
		_, err := r.PurgePrefix(ctx, "")
		return err
	}
	return r.run(ctx, func(ctx context.Context) error {
		return r.masters(ctx, func(ctx context.Context, c redis.Cmdable) error { return c.FlushDB(ctx).Err() })
	})
}

func (r *Redis) Stats(ctx context.Context) (Stats, error) {
	st := Stats{ServerErrors: map[string]int64{r.server: r.health.errorCount()}}
	err := r.run(ctx, func(ctx context.Context) error {
		return r.masters(ctx, func(ctx context.Context, c redis.Cmdable) error {
			n, err := c.DBSize(ctx).Result()
			st.Entries += n
			return err
		})
	})
	return st, err
}

// stringBytes views a string go-redis decoded as bytes without copying it (a 100-key multi-get of 64 KiB values
// spent a third of its time copying). Values a store returns are read-only (see Store).
func stringBytes(s string) []byte {
	if s == "" {
		return []byte{}
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}
