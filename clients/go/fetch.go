// Fetch: the value for a key, computed on a miss by one caller of the process while the others wait for it
// (in-process coalescing), under the store lock across processes (STORES.md §3: one lock policy), serving a
// stale value at once while one caller recomputes it.
package larder

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/larder-cache/larder/clients/go/stores"
)

// Lock polling (STORES.md §3): first after 5 ms, each pause doubling up to 50 ms.
const (
	lockPollFirst = 5 * time.Millisecond
	lockPollMost  = 50 * time.Millisecond
)

// flight is one in-process computation that callers of the same key wait for.
type flight struct {
	done  chan struct{}
	value any
	err   error
}

// joinOrLead returns the key's flight and whether this caller leads it.
func (s *shared) joinOrLead(key string) (*flight, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.flights[key]; ok {
		return f, false
	}
	f := &flight{done: make(chan struct{})}
	s.flights[key] = f
	return f, true
}

// tryLead leads the key's flight if no one does.
func (s *shared) tryLead(key string) *flight {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.flights[key]; ok {
		return nil
	}
	f := &flight{done: make(chan struct{})}
	s.flights[key] = f
	return f
}

func (s *shared) finish(key string, f *flight, value any, err error) {
	s.mu.Lock()
	delete(s.flights, key)
	s.mu.Unlock()
	f.value, f.err = value, err
	close(f.done)
}

// Loader computes a value on a miss.
type Loader func(ctx context.Context) (any, error)

// ErrLoaderPanicked is what waiting callers get when the leader's loader panicked.
var ErrLoaderPanicked = errors.New("larder: the loader panicked")

// Fetch returns the value for key; on a miss loader computes it (once per process however many goroutines ask,
// once across processes under the store lock) and it is stored with ttl and options. Within the stale window
// one caller recomputes while the others get the stale value. The loader's error reaches every waiting caller
// and nothing is cached; store failures are absorbed.
func (c *Cache) Fetch(ctx context.Context, key string, ttl time.Duration, loader Loader, options ...EntryOption) (any, error) {
	o := collect(options)
	o.ttl = ttl
	storeKey := c.StoreKey(key)
	value, verdict := c.lookup(ctx, storeKey, o.version)
	switch verdict {
	case fresh:
		c.shared.stats.hits.Add(1)
		return value, nil
	case stale:
		f := c.shared.tryLead(storeKey)
		if f == nil {
			c.shared.stats.staleServed.Add(1)
			return value, nil
		}
		return c.lead(ctx, storeKey, f, value, true, loader, o)
	}
	c.shared.stats.misses.Add(1)
	f, leads := c.shared.joinOrLead(storeKey)
	if !leads {
		c.shared.stats.coalescedWaits.Add(1)
		select {
		case <-f.done:
			return f.value, f.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return c.lead(ctx, storeKey, f, nil, false, loader, o)
}

type lockState int

const (
	lockTaken    lockState = iota
	lockHeld               // by another process
	lockNoAnswer           // the store did not answer: go on without a lock
)

func (c *Cache) lead(ctx context.Context, storeKey string, f *flight, staleValue any, isStale bool, loader Loader, o entryOpts) (value any, err error) {
	var lockKey string
	var tok []byte
	finished := false
	defer func() {
		if lockKey != "" {
			c.unlock(lockKey, tok)
		}
		if p := recover(); p != nil {
			if !finished {
				c.shared.finish(storeKey, f, nil, fmt.Errorf("%w: %v", ErrLoaderPanicked, p))
			}
			panic(p)
		}
		if !finished {
			c.shared.finish(storeKey, f, value, err)
		}
	}()
	var waitedSince time.Time
	for {
		state, k, t := c.tryLock(ctx, storeKey)
		if state == lockTaken {
			lockKey, tok = k, t
			if v, ok := c.peek(ctx, storeKey, o.version); ok {
				c.shared.stats.coalescedAcross.Add(1)
				return v, nil
			}
		}
		if state == lockNoAnswer {
			// The store fails: a flight that ended just before this one led may have kept the value in the
			// outage memory after this caller's read missed it.
			if v, ok := c.peekOutage(storeKey, o.version); ok {
				return v, nil
			}
		}
		if state != lockHeld {
			break
		}
		if isStale {
			c.shared.stats.staleServed.Add(1)
			return staleValue, nil
		}
		if waitedSince.IsZero() {
			waitedSince = time.Now()
		}
		v, outcome := c.awaitOther(ctx, storeKey, o.version, waitedSince.Add(c.lockTTL))
		if outcome == awaitValue {
			c.shared.stats.coalescedAcross.Add(1)
			return v, nil
		}
		if outcome == awaitCancelled {
			return nil, ctx.Err()
		}
		if outcome == awaitLockTTL {
			break
		}
		// the lock went away without a value: try to take it
	}
	c.shared.stats.loads.Add(1)
	loaded, err := loader(ctx)
	if err != nil {
		return nil, err
	}
	c.storeQuietly(ctx, storeKey, loaded, o)
	return loaded, nil
}

func (c *Cache) storeQuietly(ctx context.Context, storeKey string, value any, o entryOpts) {
	data, err := c.encode(value, o)
	if err != nil {
		c.shared.stats.storeErrors.Add(1)
		return
	}
	err = c.setEntry(ctx, storeKey, data)
	if err != nil {
		c.shared.stats.storeErrors.Add(1)
	}
	c.wrote(err, storeKey, data)
}

func (c *Cache) tryLock(ctx context.Context, storeKey string) (lockState, string, []byte) {
	key := stores.InternalKey("", "lock", storeKey)
	t := token()
	ok, err := c.store.Add(ctx, key, t, c.lockTTL)
	c.observe(err)
	if err != nil {
		c.shared.stats.storeErrors.Add(1)
		return lockNoAnswer, "", nil
	}
	if ok {
		return lockTaken, key, t
	}
	return lockHeld, "", nil
}

func (c *Cache) unlock(key string, t []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := c.store.DeleteIf(ctx, key, t)
	if err != nil {
		c.shared.stats.storeErrors.Add(1)
	}
	c.observe(err)
}

// peek is the fresh value under storeKey, without counting a hit or a miss.
func (c *Cache) peek(ctx context.Context, storeKey string, version *string) (any, bool) {
	v, verdict := c.lookup(ctx, storeKey, version)
	return v, verdict == fresh
}

type awaitOutcome int

const (
	awaitValue awaitOutcome = iota
	awaitLockGone
	awaitLockTTL
	awaitCancelled
)

// awaitOther polls for the value another process computes under the lock.
func (c *Cache) awaitOther(ctx context.Context, storeKey string, version *string, deadline time.Time) (any, awaitOutcome) {
	pause := lockPollFirst
	lockKey := stores.InternalKey("", "lock", storeKey)
	for {
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, awaitCancelled
		}
		pause = min(pause*2, lockPollMost)
		if v, ok := c.peek(ctx, storeKey, version); ok {
			return v, awaitValue
		}
		if !time.Now().Before(deadline) {
			return nil, awaitLockTTL
		}
		if c.getRaw(ctx, lockKey) == nil {
			// Looked for once more after the lock went: the holder may have written just before releasing.
			if v, ok := c.peek(ctx, storeKey, version); ok {
				return v, awaitValue
			}
			return nil, awaitLockGone
		}
	}
}
