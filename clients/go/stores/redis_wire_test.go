// The Redis store's own GET/MGET/SET reader against servers that lie (a value past max_value, an MGET array of
// the wrong length, a reply cut off, garbage, an error where a value belongs) and its greeting (AUTH, SELECT)
// against a real redis-server: every lie ends as a typed error within the timeout, never a hang or a wrong value.
package stores_test

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/larder-cache/larder/clients/go/internal/testservers"
	"github.com/larder-cache/larder/clients/go/stores"
)

// lyingRedis answers every request on every connection with reply, then closes the connection when hangUp is
// set (else keeps it open, silent). It returns its address.
func lyingRedis(t *testing.T, reply string, hangUp bool) string {
	return serveLoopback(t, func(c net.Conn) {
		buf := make([]byte, 64<<10)
		if _, err := c.Read(buf); err != nil {
			return
		}
		_, _ = c.Write([]byte(reply))
		if hangUp {
			return
		}
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	})
}

func TestRedisReaderRefusesLies(t *testing.T) {
	t.Parallel()
	get := func(s stores.Store) error { _, err := s.Get(context.Background(), "k"); return err }
	mget := func(s stores.Store) error {
		vs, err := s.GetMulti(context.Background(), []string{"a", "b", "c"})
		if err == nil {
			return errors.New("no error, values " + strings.Repeat("x", len(vs)))
		}
		return err
	}
	set := func(s stores.Store) error { return s.Set(context.Background(), "k", []byte("v"), time.Minute) }
	cases := []struct {
		name   string
		reply  string
		hangUp bool
		op     func(stores.Store) error
		kind   stores.ErrorKind
	}{
		{"a value larger than max_value", "$2000\r\n", false, get, stores.Protocol},
		{"an MGET value larger than max_value", "*3\r\n$1\r\na\r\n$2000\r\n", false, mget, stores.Protocol},
		{"an MGET array of fewer values", "*2\r\n$1\r\na\r\n$1\r\nb\r\n", false, mget, stores.Protocol},
		{"an MGET array of more values", "*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n", false, mget, stores.Protocol},
		{"a nil array for MGET", "*-1\r\n", false, mget, stores.Protocol},
		{"an integer for GET", ":12\r\n", false, get, stores.Protocol},
		{"a nested array in MGET", "*3\r\n*1\r\n$1\r\na\r\n", false, mget, stores.Protocol},
		{"a negative length", "$-7\r\n", false, get, stores.Protocol},
		{"a length past 19 digits", "$99999999999999999999\r\n", false, get, stores.Protocol},
		{"garbage", "\x00\xff\x13garbage\r\n", false, get, stores.Protocol},
		{"a value without its CR LF", "$1\r\naXY", false, get, stores.Protocol},
		{"a value cut off, then silence", "$100\r\nabc", false, get, stores.Timeout},
		{"an MGET cut off, then silence", "*3\r\n$1\r\na\r\n", false, mget, stores.Timeout},
		{"a value cut off, then hang-up", "$100\r\nabc", true, get, stores.Unavailable},
		{"an MGET cut off, then hang-up", "*3\r\n$1\r\na\r\n$5\r\nab", true, mget, stores.Unavailable},
		{"a bulk string for SET", "$2\r\nOK\r\n", false, set, stores.Protocol},
		{"nothing for SET", "", false, set, stores.Timeout},
		{"an error for GET is an answer", "-WRONGTYPE not a string\r\n", false, get, stores.Other},
		{"an error for MGET is an answer", "-ERR no\r\n", false, mget, stores.Other},
		{"an error for SET is an answer", "-OOM no memory\r\n", false, set, stores.Other},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			addr := lyingRedis(t, c.reply, c.hangUp)
			s := openURL(t, "redis://"+addr+"/0?timeout=300ms&failures=100&max_value=1000")
			start := time.Now()
			err := c.op(s)
			if took := time.Since(start); took > 2*time.Second {
				t.Fatalf("took %v (timeout 300ms)", took)
			}
			if k := stores.KindOf(err); k != c.kind {
				t.Fatalf("kind %q, want %q: %v", k, c.kind, err)
			}
		})
	}
}

// A caller's cancellation ends a read mid-reply at once, and is not counted as the server's failure.
func TestRedisReaderHonoursCancellation(t *testing.T) {
	t.Parallel()
	addr := lyingRedis(t, "$100\r\nabc", false)
	s := openURL(t, "redis://"+addr+"/0?timeout=5s&failures=1")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	if _, err := s.Get(ctx, "a"); !errors.Is(err, context.Canceled) {
		t.Fatalf("not the caller's cancellation: %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("took %v after a cancel at 100ms", took)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	if _, err := s.Get(ctx2, "k"); stores.KindOf(err) != stores.Timeout {
		t.Fatalf("the next call found the server ejected or failed otherwise: %v", err)
	}
}

// AUTH and SELECT are each new connection's greeting: values land in the URL's database on a server that
// needs a password, and a wrong password or a database that does not exist is a clear error, not a hang.
func TestRedisGreeting(t *testing.T) {
	t.Parallel()
	url := testservers.Redis(t, "auth")
	hostPort := strings.TrimSuffix(strings.TrimPrefix(url, "redis://"), "/0")
	port := hostPort[strings.LastIndexByte(hostPort, ':')+1:]
	if out, err := exec.Command("redis-cli", "-p", port, "CONFIG", "SET", "requirepass", "s3cret").CombinedOutput(); err != nil {
		t.Fatalf("redis-cli: %v %s", err, out)
	}
	ctx := context.Background()
	for _, auth := range []string{":s3cret@", "default:s3cret@"} {
		s := openURL(t, "redis://"+auth+hostPort+"/3?timeout=2s")
		if err := s.Set(ctx, "greeted", []byte("in 3"), time.Minute); err != nil {
			t.Fatal(err)
		}
		if vs, err := s.GetMulti(ctx, []string{"greeted", "absent"}); err != nil || string(vs[0]) != "in 3" || vs[1] != nil {
			t.Fatalf("%q %v", vs, err)
		}
	}
	out, err := exec.Command("redis-cli", "-p", port, "-a", "s3cret", "--no-auth-warning", "-n", "3", "GET", "greeted").Output()
	if err != nil || strings.TrimSpace(string(out)) != "in 3" {
		t.Fatalf("not in database 3: %q %v", out, err)
	}
	zero := openURL(t, "redis://:s3cret@"+hostPort+"/0?timeout=2s")
	if v, err := zero.Get(ctx, "greeted"); err != nil || v != nil {
		t.Fatalf("database 0 has it: %q %v", v, err)
	}
	for _, bad := range []string{"redis://:wrong@" + hostPort + "/0", "redis://" + hostPort + "/0", "redis://:s3cret@" + hostPort + "/99999"} {
		s := openURL(t, bad+"?timeout=2s")
		start := time.Now()
		_, err := s.Get(ctx, "greeted")
		if err == nil || time.Since(start) > 2*time.Second {
			t.Fatalf("%s: %v after %v", bad, err, time.Since(start))
		}
		if err := s.Set(ctx, "greeted", []byte("x"), 0); err == nil {
			t.Fatalf("%s: a set went through", bad)
		}
	}
}
