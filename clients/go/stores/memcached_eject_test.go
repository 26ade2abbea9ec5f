// A multi-get whose server dies mid-run (STORES.md §4.3): the failure that ejects the server is retried once,
// each of its keys on the key's own new server on the rebuilt ring, while the other servers' replies stand.
package stores_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/larder-cache/larder/clients/go/internal/testservers"
	"github.com/larder-cache/larder/clients/go/ring"
	"github.com/larder-cache/larder/clients/go/stores"
)

func TestMemcachedMultiGetRetriesAnEjectedServersKeysOnTheirNewServers(t *testing.T) {
	a, _ := testservers.KillableMemcached(t)
	b, _ := testservers.KillableMemcached(t)
	c, killC := testservers.KillableMemcached(t)
	defer killC()
	addrs := []string{a, b, c}
	ctx := context.Background()
	s := openURL(t, "memcached://"+a+","+b+","+c+"?failures=2&retry_after=30s&timeout=500ms&prefix_purge=false")

	specs := make([]ring.Server, len(addrs))
	for i, addr := range addrs {
		host, port, _ := net.SplitHostPort(addr)
		specs[i] = ring.Server{Host: host, Port: atoi(port), Weight: 1}
	}
	full, withoutC := ring.Build(specs, nil), ring.Build(specs, map[int]bool{2: true})
	// Keys on every server, and enough of c's that they move to both a and b once c is ejected: a retry that
	// sent the whole batch to one server would miss some of them.
	var keys []string
	movedTo := map[int]int{}
	for i := 0; len(keys) < 60 || movedTo[0] < 3 || movedTo[1] < 3; i++ {
		k := fmt.Sprintf("mgeject-%d", i)
		keys = append(keys, k)
		if full.Pick(k) == 2 {
			movedTo[withoutC.Pick(k)]++
		}
	}
	for _, k := range keys {
		if err := s.Set(ctx, k, []byte("v:"+k), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	// Where c's keys go after its ejection, a different value, written straight to that server.
	direct := []stores.Store{openURL(t, "memcached://"+a), openURL(t, "memcached://"+b)}
	for _, k := range keys {
		if full.Pick(k) == 2 {
			if err := direct[withoutC.Pick(k)].Set(ctx, k, []byte("moved:"+k), time.Minute); err != nil {
				t.Fatal(err)
			}
		}
	}
	vals, err := s.GetMulti(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if string(vals[i]) != "v:"+k {
			t.Fatalf("%s before the kill: %q", k, vals[i])
		}
	}

	killC()
	// failures=2: the first multi-get's failure is counted, not yet an ejection, and is reported.
	if _, err := s.GetMulti(ctx, keys); stores.KindOf(err) != stores.Unavailable {
		t.Fatalf("first multi-get after the kill: %v (kind %s), want an Unavailable error", err, stores.KindOf(err))
	}
	// The second failure ejects c; the same call retries c's keys on their new servers and succeeds.
	vals, err = s.GetMulti(ctx, keys)
	if err != nil {
		t.Fatalf("the multi-get that ejected c was not retried: %v", err)
	}
	check := func(when string, vals [][]byte) {
		t.Helper()
		for i, k := range keys {
			want := "v:" + k
			if full.Pick(k) == 2 {
				want = "moved:" + k
			}
			if string(vals[i]) != want {
				t.Fatalf("%s, %s (server %d, now %d): %q, want %q", when, k, full.Pick(k), withoutC.Pick(k), vals[i], want)
			}
		}
	}
	check("the ejecting multi-get", vals)
	st, _ := s.Stats(ctx)
	if st.ServerErrors[c] != 2 {
		t.Fatalf("c's errors: %v, want 2 (two failures, then ejected)", st.ServerErrors)
	}
	// Later multi-gets never wait on c.
	start := time.Now()
	vals, err = s.GetMulti(ctx, keys)
	if err != nil || time.Since(start) > 250*time.Millisecond {
		t.Fatalf("after ejection: %v in %v", err, time.Since(start))
	}
	check("after ejection", vals)
}

func TestMemcachedSingleGetRetriedWhenItEjectsTheServer(t *testing.T) {
	a, _ := testservers.KillableMemcached(t)
	b, killB := testservers.KillableMemcached(t)
	defer killB()
	ctx := context.Background()
	s := openURL(t, "memcached://"+a+","+b+"?failures=1&retry_after=30s&timeout=500ms&prefix_purge=false")
	ha, pa, _ := net.SplitHostPort(a)
	hb, pb, _ := net.SplitHostPort(b)
	r := ring.Build([]ring.Server{{Host: ha, Port: atoi(pa), Weight: 1}, {Host: hb, Port: atoi(pb), Weight: 1}}, nil)
	k := ""
	for i := 0; k == ""; i++ {
		if c := fmt.Sprintf("single-%d", i); r.Pick(c) == 1 {
			k = c
		}
	}
	if err := openURL(t, "memcached://"+a).Set(ctx, k, []byte("on a"), time.Minute); err != nil {
		t.Fatal(err)
	}
	killB()
	// failures=1: this get's failure ejects b, and the get is retried on a.
	if v, err := s.Get(ctx, k); err != nil || string(v) != "on a" {
		t.Fatalf("get that ejected b: %q %v", v, err)
	}
}
