// The outage memory (STORES.md §3, "When the store fails"): over a store that fails on demand, a value whose write
// fails is kept with its expiry and answers the reads the store fails; the store is always asked first; the first
// good answer once no failure has been seen for a second empties it (one within that second keeps it) and nothing
// is written back; deletes and purges apply; its size is bounded; 0 is off; and Fetch callers of one key share one
// load while the lock and the write fail.
package larder_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	larder "github.com/larder-cache/larder/clients/go"
	"github.com/larder-cache/larder/clients/go/format"
	"github.com/larder-cache/larder/clients/go/stores"
)

// flakyStore is a memory store that fails every call with fail's kind while fail is set (after delay, as a
// server's timeout would).
type flakyStore struct {
	*stores.Memory
	fail  atomic.Value // stores.ErrorKind; "" = answer
	delay time.Duration
	calls atomic.Int64
}

// pastTheQuietSecond waits until no failure has been seen for more than a second (STORES.md §3 rule 4): only a
// good answer after that empties the outage memory.
func pastTheQuietSecond() { time.Sleep(1100 * time.Millisecond) }

func newFlaky() *flakyStore {
	f := &flakyStore{Memory: stores.NewMemory(64<<20, 0)}
	f.fail.Store(stores.ErrorKind(""))
	return f
}

func (f *flakyStore) down(kind stores.ErrorKind) { f.fail.Store(kind) }
func (f *flakyStore) up()                        { f.fail.Store(stores.ErrorKind("")) }

func (f *flakyStore) err() error {
	f.calls.Add(1)
	kind := f.fail.Load().(stores.ErrorKind)
	if kind == "" {
		return nil
	}
	time.Sleep(f.delay)
	return &stores.Error{Kind: kind, Backend: "flaky", Server: "127.0.0.1:1", Msg: "failing on purpose"}
}

func (f *flakyStore) Backend() string { return "flaky" }

func (f *flakyStore) Get(ctx context.Context, key string) ([]byte, error) {
	if err := f.err(); err != nil {
		return nil, err
	}
	return f.Memory.Get(ctx, key)
}

func (f *flakyStore) GetMulti(ctx context.Context, keys []string) ([][]byte, error) {
	if err := f.err(); err != nil {
		return nil, err
	}
	return f.Memory.GetMulti(ctx, keys)
}

func (f *flakyStore) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if err := f.err(); err != nil {
		return err
	}
	return f.Memory.Set(ctx, key, value, ttl)
}

func (f *flakyStore) SetMulti(ctx context.Context, items []stores.Item, ttl time.Duration) error {
	if err := f.err(); err != nil {
		return err
	}
	return f.Memory.SetMulti(ctx, items, ttl)
}

func (f *flakyStore) Add(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	if err := f.err(); err != nil {
		return false, err
	}
	return f.Memory.Add(ctx, key, value, ttl)
}

func (f *flakyStore) DeleteIf(ctx context.Context, key string, expected []byte) (bool, error) {
	if err := f.err(); err != nil {
		return false, err
	}
	return f.Memory.DeleteIf(ctx, key, expected)
}

func (f *flakyStore) Delete(ctx context.Context, key string) (bool, error) {
	if err := f.err(); err != nil {
		return false, err
	}
	return f.Memory.Delete(ctx, key)
}

func (f *flakyStore) DeleteMulti(ctx context.Context, keys []string) (int, error) {
	if err := f.err(); err != nil {
		return 0, err
	}
	return f.Memory.DeleteMulti(ctx, keys)
}

func (f *flakyStore) Incr(ctx context.Context, key string, delta int64, ttl time.Duration, create bool) (int64, bool, error) {
	if err := f.err(); err != nil {
		return 0, false, err
	}
	return f.Memory.Incr(ctx, key, delta, ttl, create)
}

func (f *flakyStore) Clear(ctx context.Context) error {
	if err := f.err(); err != nil {
		return err
	}
	return f.Memory.Clear(ctx)
}

func (f *flakyStore) PurgeTag(ctx context.Context, tag string) (stores.Purged, error) {
	if err := f.err(); err != nil {
		return stores.Purged{}, err
	}
	return f.Memory.PurgeTag(ctx, tag)
}

func (f *flakyStore) PurgePrefix(ctx context.Context, prefix string) (stores.Purged, error) {
	if err := f.err(); err != nil {
		return stores.Purged{}, err
	}
	return f.Memory.PurgePrefix(ctx, prefix)
}

func TestOutageMemoryKeepsAFailedWriteWithItsTTLAndAnswersFailedReads(t *testing.T) {
	ctx := context.Background()
	f := newFlaky()
	c := larder.New(f)
	f.down(stores.Unavailable)
	if err := c.Set(ctx, "k", "v", larder.TTL(300*time.Millisecond)); stores.KindOf(err) != stores.Unavailable {
		t.Fatalf("a failed write is not reported to Set's caller: %v", err)
	}
	if got, ok := c.Get(ctx, "k"); !ok || got != "v" {
		t.Fatalf("a read the store fails: %#v %v, want the value kept", got, ok)
	}
	if got := c.GetMulti(ctx, []string{"k", "none"}); len(got) != 1 || got["k"] != "v" {
		t.Fatalf("a multi-read the store fails: %#v", got)
	}
	if st := c.Stats(); st.OutageKept != 1 || st.OutageServed != 2 || st.OutageEntries != 1 {
		t.Fatalf("stats %+v", st)
	}
	time.Sleep(350 * time.Millisecond)
	if got, ok := c.Get(ctx, "k"); ok {
		t.Fatalf("read past its TTL: %#v", got)
	}
	// Timeouts and broken replies are failures too; an answer refusing the value is not.
	for _, kind := range []stores.ErrorKind{stores.Timeout, stores.Protocol} {
		f.down(kind)
		_ = c.Set(ctx, "k-"+string(kind), 1, larder.TTL(time.Minute))
		if _, ok := c.Get(ctx, "k-"+string(kind)); !ok {
			t.Fatalf("a write failed by %s was not kept", kind)
		}
	}
	for _, kind := range []stores.ErrorKind{stores.TooLarge, stores.InvalidKey, stores.NotACounter, stores.Other} {
		f.down(kind)
		_ = c.Set(ctx, "refused-"+string(kind), 1, larder.TTL(time.Minute))
		f.down(stores.Unavailable)
		if _, ok := c.Get(ctx, "refused-"+string(kind)); ok {
			t.Fatalf("a write the store answered with %s was kept", kind)
		}
	}
}

func TestOutageMemoryKeepsTheStaleWindow(t *testing.T) {
	ctx := context.Background()
	f := newFlaky()
	c := larder.New(f)
	f.down(stores.Timeout)
	_ = c.Set(ctx, "k", "old", larder.TTL(100*time.Millisecond), larder.Stale(time.Minute))
	time.Sleep(150 * time.Millisecond)
	// Past its TTL, within its stale window: one caller recomputes while another is served the stale value.
	release := make(chan struct{})
	started := make(chan struct{})
	done := make(chan any)
	go func() {
		v, _ := c.Fetch(ctx, "k", time.Minute, func(context.Context) (any, error) {
			close(started)
			<-release
			return "new", nil
		})
		done <- v
	}()
	<-started
	v, err := c.Fetch(ctx, "k", time.Minute, func(context.Context) (any, error) { return "second loader", nil })
	close(release)
	if err != nil || v != "old" {
		t.Fatalf("within the stale window: %#v %v, want the stale value at once", v, err)
	}
	if v := <-done; v != "new" {
		t.Fatalf("the refresh returned %#v", v)
	}
	if got, _ := c.Get(ctx, "k"); got != "new" {
		t.Fatalf("the refreshed value is not kept while the store fails: %#v", got)
	}
}

func TestOutageMemoryReadsTheStoreFirstAndIsEmptiedByTheFirstGoodAnswerPastAQuietSecond(t *testing.T) {
	ctx := context.Background()
	f := newFlaky()
	c := larder.New(f)
	f.down(stores.Unavailable)
	_ = c.Set(ctx, "k", "during the outage", larder.TTL(time.Minute))
	_ = c.Set(ctx, "other", "during the outage", larder.TTL(time.Minute))
	f.up()
	pastTheQuietSecond()
	// Another process wrote a newer value meanwhile: the store's answer wins.
	writer := larder.New(f.Memory)
	if err := writer.Set(ctx, "k", "newer", larder.TTL(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Get(ctx, "k"); got != "newer" {
		t.Fatalf("read %#v, want the store's value", got)
	}
	if st := c.Stats(); st.OutageEntries != 0 {
		t.Fatalf("the outage memory holds %d entries after a good answer", st.OutageEntries)
	}
	// Nothing was written back, and a later failure finds it empty.
	if got, ok := writer.Get(ctx, "other"); ok {
		t.Fatalf("the outage memory's value was written back: %#v", got)
	}
	f.down(stores.Unavailable)
	if got, ok := c.Get(ctx, "other"); ok {
		t.Fatalf("after a good answer the outage memory still answers: %#v", got)
	}

	// A miss is a good answer too.
	_ = c.Set(ctx, "again", 1, larder.TTL(time.Minute))
	f.up()
	pastTheQuietSecond()
	if _, ok := c.Get(ctx, "nothing here"); ok {
		t.Fatal("a hit on an empty key")
	}
	f.down(stores.Unavailable)
	if _, ok := c.Get(ctx, "again"); ok {
		t.Fatal("a miss from the store did not empty the outage memory")
	}
}

// With several servers the others answer while one fails: a good answer within a second of the last failure keeps
// the outage memory (rule 4); every failure starts the second again, and the first good answer after it empties it.
func TestOutageMemoryIsKeptByAGoodAnswerWithinASecondOfAFailure(t *testing.T) {
	ctx := context.Background()
	f := newFlaky()
	c := larder.New(f)
	writer := larder.New(f.Memory)
	if err := writer.Set(ctx, "answered", "x", larder.TTL(time.Minute)); err != nil {
		t.Fatal(err)
	}
	f.down(stores.Unavailable)
	_ = c.Set(ctx, "k", "during the outage", larder.TTL(time.Minute))
	f.up()
	// Good answers right after the failure: a hit, a miss, a write, a delete.
	if got, ok := c.Get(ctx, "answered"); !ok || got != "x" {
		t.Fatalf("read %#v %v, want the store's value", got, ok)
	}
	_, _ = c.Get(ctx, "nothing here")
	_ = c.Set(ctx, "written", 1, larder.TTL(time.Minute))
	_, _ = c.Delete(ctx, "nothing here")
	if st := c.Stats(); st.OutageEntries != 1 {
		t.Fatalf("good answers within a second of a failure left %d entries in the outage memory, want 1",
			st.OutageEntries)
	}
	f.down(stores.Unavailable)
	if got, ok := c.Get(ctx, "k"); !ok || got != "during the outage" {
		t.Fatalf("after a good answer within the second the outage memory answers %#v %v, want its value", got, ok)
	}
	// Every failure starts the second again: one 600 ms later, then a good answer 600 ms after that (over a second
	// since the first failure, not since the last) keeps it.
	f.up()
	time.Sleep(600 * time.Millisecond)
	f.down(stores.Unavailable)
	_, _ = c.Get(ctx, "k")
	f.up()
	time.Sleep(600 * time.Millisecond)
	_, _ = c.Get(ctx, "answered")
	if st := c.Stats(); st.OutageEntries != 1 {
		t.Fatalf("a good answer within a second of the last failure emptied the outage memory: %+v", st)
	}
	pastTheQuietSecond()
	_, _ = c.Get(ctx, "answered")
	if st := c.Stats(); st.OutageEntries != 0 {
		t.Fatalf("the first good answer past the quiet second left %d entries", st.OutageEntries)
	}
	f.down(stores.Unavailable)
	if got, ok := c.Get(ctx, "k"); ok {
		t.Fatalf("after the quiet second's good answer the outage memory still answers %#v", got)
	}
}

func TestOutageMemoryDeletesAndPurgesApply(t *testing.T) {
	ctx := context.Background()
	f := newFlaky()
	c := larder.New(f, larder.WithNamespace("ns"))
	f.down(stores.Unavailable)
	_ = c.Set(ctx, "a", 1, larder.TTL(time.Minute))
	_ = c.Set(ctx, "b", 2, larder.TTL(time.Minute))
	_ = c.SetMulti(ctx, map[string]any{"c": 3, "d": 4}, larder.TTL(time.Minute))
	_ = c.Set(ctx, "tagged", 5, larder.TTL(time.Minute), larder.Tags("t"))
	_ = c.Set(ctx, "user:1", 6, larder.TTL(time.Minute))
	_ = c.Set(ctx, "user:2", 7, larder.TTL(time.Minute))
	if got := c.GetMulti(ctx, []string{"a", "b", "c", "d", "tagged", "user:1", "user:2"}); len(got) != 7 {
		t.Fatalf("kept %#v", got)
	}
	if _, err := c.Delete(ctx, "a"); err == nil {
		t.Fatal("a delete the store failed reported no error")
	}
	_, _ = c.DeleteMulti(ctx, []string{"b", "c"})
	_, _ = c.PurgeTag(ctx, "t")
	_, _ = c.PurgePrefix(ctx, "user:")
	got := c.GetMulti(ctx, []string{"a", "b", "c", "d", "tagged", "user:1", "user:2"})
	if len(got) != 1 || got["d"] != int64(4) {
		t.Fatalf("after deletes and purges the outage memory answers %#v, want only d", got)
	}
	_ = c.Clear(ctx)
	if _, ok := c.Get(ctx, "d"); ok {
		t.Fatal("clear left the outage memory's value")
	}
}

func TestOutageMemoryIsBoundedAndZeroTurnsItOff(t *testing.T) {
	ctx := context.Background()
	f := newFlaky()
	const size = 64 << 10
	c := larder.New(f, larder.WithOutageMemory(size), larder.WithCompressor(format.None, 0))
	f.down(stores.Unavailable)
	value := strings.Repeat("x", 1000)
	for i := range 300 {
		_ = c.Set(ctx, fmt.Sprintf("k%d", i), fmt.Sprintf("%d%s", i, value), larder.TTL(time.Minute))
	}
	st := c.Stats()
	if st.OutageBytes > size || st.OutageEntries >= 300 || st.OutageEntries == 0 {
		t.Fatalf("outage memory of %d bytes holds %d bytes in %d entries", size, st.OutageBytes, st.OutageEntries)
	}
	if _, ok := c.Get(ctx, "k299"); !ok {
		t.Fatal("the newest value was evicted")
	}
	if _, ok := c.Get(ctx, "k0"); ok {
		t.Fatal("the oldest value was kept past the bound")
	}

	off := larder.New(f, larder.WithOutageMemory(0))
	_ = off.Set(ctx, "k", "v", larder.TTL(time.Minute))
	if got, ok := off.Get(ctx, "k"); ok {
		t.Fatalf("outage memory 0 answered %#v", got)
	}
	var loads atomic.Int64
	for range 3 {
		v, err := off.Fetch(ctx, "f", time.Minute, func(context.Context) (any, error) { loads.Add(1); return "v", nil })
		if err != nil || v != "v" {
			t.Fatalf("fetch %#v %v", v, err)
		}
	}
	if st := off.Stats(); loads.Load() != 3 || st.OutageKept != 0 || st.OutageEntries != 0 {
		t.Fatalf("outage memory 0: %d loads, stats %+v", loads.Load(), st)
	}
}

// Fetch callers of one key share one load while the store fails: the lock cannot be taken and the write fails,
// and the waiters get the leader's value in memory (rule 1); later rounds are answered from the outage memory.
func TestFetchWhileTheStoreFailsLoadsOnce(t *testing.T) {
	ctx := context.Background()
	f := newFlaky()
	f.delay = 30 * time.Millisecond // each failure waits, as a timeout would: the callers overlap
	c := larder.New(f)
	f.down(stores.Timeout)
	var loads atomic.Int64
	loader := func(context.Context) (any, error) {
		loads.Add(1)
		time.Sleep(20 * time.Millisecond)
		return "loaded", nil
	}
	for round := range 3 {
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				v, err := c.Fetch(ctx, "k", time.Minute, loader)
				if err != nil || v != "loaded" {
					errs <- fmt.Errorf("round %d: %#v %v", round, v, err)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	if loads.Load() != 1 {
		t.Fatalf("the loader ran %d times over 3 rounds of 16 callers, want once", loads.Load())
	}
	if st := c.Stats(); st.CoalescedWaits == 0 || st.OutageServed == 0 {
		t.Fatalf("stats %+v", st)
	}
	// The store answers again: once no failure has been seen for a second, its miss empties the outage memory and
	// the value is loaded once more, and stored.
	f.up()
	pastTheQuietSecond()
	v, err := c.Fetch(ctx, "k", time.Minute, loader)
	if err != nil || v != "loaded" || loads.Load() != 2 {
		t.Fatalf("after recovery: %#v %v, %d loads", v, err, loads.Load())
	}
	if got, ok := larder.New(f.Memory).Get(ctx, "k"); !ok || got != "loaded" {
		t.Fatalf("not stored after recovery: %#v", got)
	}
}
