// Whole replies are bounded, on every command (spec/STORES.md §2 "Whole reply", issue 32 finding 4): a hostile
// Redis answers every command larder sends (INCR's and delete_if's scripts, DEL, SCAN, SSCAN, FLUSHDB, DBSIZE,
// GET, MGET, SET and the tag script) with 1,000 strings of 64 MiB, each within max_value; every operation fails
// as malformed (protocol) at once, and the process allocates next to nothing for it (the issue measured 1.1 GB in
// one 2-second call). A hostile memcached streams `stats` lines without end: refused past the reply's bound.
package stores_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/larder-cache/larder/clients/go/stores"
)

// fakeServer answers on a loopback port: each connection's commands are read by readCommand and answered by
// answer (which may write without end: it stops when the client hangs up). It returns the address.
func fakeServer(t *testing.T, readCommand func(r *bufio.Reader) ([]string, error), answer func(cmd []string, w io.Writer) error) string {
	t.Helper()
	return serveLoopback(t, func(c net.Conn) {
		r := bufio.NewReader(c)
		w := bufio.NewWriterSize(c, 256<<10)
		for {
			cmd, err := readCommand(r)
			if err != nil || answer(cmd, w) != nil || w.Flush() != nil {
				return
			}
		}
	})
}

// serveLoopback listens on a free loopback port and runs serve on each connection in a goroutine of its own (the
// connection is closed when serve returns); the test's cleanup closes the listener and every connection and waits
// for them. It returns the address.
func serveLoopback(t *testing.T, serve func(c net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return l.Addr().String()
}

// readRESPCommand reads one command a Redis client writes (an array of bulk strings).
func readRESPCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "*")))
	if err != nil {
		return nil, err
	}
	cmd := make([]string, 0, n)
	for range n {
		head, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		size, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "$")))
		if err != nil {
			return nil, err
		}
		arg := make([]byte, size+2)
		if _, err := io.ReadFull(r, arg); err != nil {
			return nil, err
		}
		cmd = append(cmd, string(arg[:size]))
	}
	return cmd, nil
}

// thousandHugeStrings writes *1000 and then 1,000 bulk strings of 64 MiB (within max_value each), as fast as the
// client reads.
func thousandHugeStrings(w io.Writer) error {
	const size = 64 << 20
	chunk := []byte(strings.Repeat("x", 256<<10))
	if _, err := io.WriteString(w, "*1000\r\n"); err != nil {
		return err
	}
	for range 1000 {
		if _, err := io.WriteString(w, "$"+strconv.Itoa(size)+"\r\n"); err != nil {
			return err
		}
		for left := size; left > 0; left -= len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return err
			}
		}
		if _, err := io.WriteString(w, "\r\n"); err != nil {
			return err
		}
	}
	return nil
}

// allocatedDuring is how many bytes the process allocated while fn ran (TotalAlloc counts every allocation, freed
// or not, so a reply read and dropped still shows).
func allocatedDuring(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// everyOperation is each operation of the Store interface, on keys k and l.
func everyOperation(t *testing.T, s stores.Store) map[string]func() error {
	ctx := context.Background()
	tagged := entry(t, "v", time.Minute, "t")
	return map[string]func() error{
		"incr":         func() error { _, _, err := s.Incr(ctx, "k", 1, time.Minute, true); return err },
		"decr":         func() error { _, _, err := s.Incr(ctx, "k", -1, 0, false); return err },
		"delete_if":    func() error { _, err := s.DeleteIf(ctx, "k", []byte("v")); return err },
		"delete":       func() error { _, err := s.Delete(ctx, "k"); return err },
		"delete_multi": func() error { _, err := s.DeleteMulti(ctx, []string{"k", "l"}); return err },
		"purge_prefix": func() error { _, err := s.PurgePrefix(ctx, "p"); return err },
		"purge_tag":    func() error { _, err := s.PurgeTag(ctx, "t"); return err },
		"clear":        func() error { return s.Clear(ctx) },
		"stats":        func() error { _, err := s.Stats(ctx); return err },
		"get":          func() error { _, err := s.Get(ctx, "k"); return err },
		"get_multi":    func() error { _, err := s.GetMulti(ctx, []string{"k", "l"}); return err },
		"set":          func() error { return s.Set(ctx, "k", []byte("v"), time.Minute) },
		"set_tagged":   func() error { return s.Set(ctx, "k", tagged, 0) },
		"set_multi":    func() error { return s.SetMulti(ctx, []stores.Item{{Key: "k", Value: []byte("v")}}, time.Minute) },
		"add":          func() error { _, err := s.Add(ctx, "k", []byte("v"), time.Minute); return err },
	}
}

func TestRedisWholeRepliesAreBoundedOnEveryCommand(t *testing.T) {
	addr := fakeServer(t, readRESPCommand, func(cmd []string, w io.Writer) error {
		switch strings.ToLower(cmd[0]) {
		case "hello":
			_, err := io.WriteString(w, "-ERR unknown command 'HELLO'\r\n")
			return err
		case "auth", "select", "client", "ping", "readonly":
			_, err := io.WriteString(w, "+OK\r\n")
			return err
		}
		return thousandHugeStrings(w)
	})
	s := openURL(t, "redis://"+addr+"/0?timeout=2s&failures=1000")
	ops := everyOperation(t, s)
	for name, op := range ops {
		var err error
		start := time.Now()
		allocated := allocatedDuring(func() { err = op() })
		took := time.Since(start)
		if k := stores.KindOf(err); k != stores.Protocol {
			t.Errorf("%s: %q (%v), want a protocol error: the reply is malformed for its command", name, k, err)
		}
		// Refused at its first line or its first string's header: nothing like one 64 MiB string is taken in.
		if allocated > 16<<20 {
			t.Errorf("%s: %d MiB allocated for a refused reply", name, allocated>>20)
		}
		if took > 1500*time.Millisecond {
			t.Errorf("%s: took %v: the reply should be refused as it starts, not read until the 2 s timeout", name, took)
		}
	}
}

func TestMemcachedStatsRepliesAreBounded(t *testing.T) {
	readLine := func(r *bufio.Reader) ([]string, error) {
		line, err := r.ReadString('\n')
		return strings.Fields(line), err
	}
	addr := fakeServer(t, readLine, func(cmd []string, w io.Writer) error {
		if len(cmd) == 0 || cmd[0] != "stats" {
			_, err := io.WriteString(w, "SERVER_ERROR no\r\n")
			return err
		}
		line := "STAT filler " + strings.Repeat("9", 8000) + "\r\n"
		for {
			if _, err := io.WriteString(w, line); err != nil {
				return err
			}
		}
	})
	s := openURL(t, "memcached://"+addr+"?timeout=2s&failures=1000")
	var err error
	allocated := allocatedDuring(func() { _, err = s.Stats(context.Background()) })
	if stores.KindOf(err) != stores.Protocol {
		t.Fatalf("%v, want a protocol error", err)
	}
	if allocated > 4<<20 {
		t.Errorf("%d KiB allocated for a refused stats reply", allocated>>10)
	}
}
