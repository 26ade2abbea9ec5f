// Go and Rust (and Python, through the repository's .venv) through the same stores: memcached, Redis, Redis
// Cluster, SQLite, PostgreSQL and files, every one started for the test on loopback.
package interop

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	larder "github.com/larder-cache/larder/clients/go"
	"github.com/larder-cache/larder/clients/go/format"
	"github.com/larder-cache/larder/clients/go/internal/testenv"
	"github.com/larder-cache/larder/clients/go/internal/testservers"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testservers.StopAll()
	os.Exit(code)
}

func larderCmd(t *testing.T, stdin []byte, args ...string) run {
	t.Helper()
	return command(t, stdin, testenv.LarderBin(t), args...)
}

func sharedStores(t *testing.T) map[string]string {
	dir := t.TempDir()
	urls := map[string]string{
		"memcached": "memcached://" + testservers.Memcached(t, "interop"),
		"redis":     testservers.Redis(t, "interop"),
		"sqlite":    "sqlite://" + filepath.Join(dir, "cache.db"),
		"postgres":  testservers.Postgres(t),
		"file":      "file://" + filepath.Join(dir, "files"),
	}
	if !testing.Short() {
		urls["redis-cluster"] = testservers.RedisCluster(t)
	}
	return urls
}

func TestGoAndRustThroughEveryStore(t *testing.T) {
	for name, url := range sharedStores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			opened := url
			if !strings.HasPrefix(url, "sqlite") && !strings.HasPrefix(url, "file") {
				opened += map[bool]string{true: "&", false: "?"}[strings.Contains(url, "?")] + "timeout=2s"
			}
			c, id := openCache(t, opened)
			goKey, rustKey := fmt.Sprintf("go-wrote-%d", id), fmt.Sprintf("rust-wrote-%d", id)
			goTag, rustTag := fmt.Sprintf("go-tag-%d", id), fmt.Sprintf("rust-tag-%d", id)

			// Go writes, Rust reads the same value.
			if err := c.Set(ctx, goKey, goValue(), larder.TTL(time.Minute), larder.Tags(goTag)); err != nil {
				t.Fatal(err)
			}
			got := larderCmd(t, nil, "store", "get", "--store", url, "--inspect", goKey)
			if got.status != 0 || !bytes.Contains(got.stdout, []byte("value:       "+goValueJSON)) {
				t.Fatalf("Rust reads Go's entry: %d %s %s", got.status, got.stdout, got.stderr)
			}
			if !bytes.Contains(got.stdout, []byte("tags:        "+goTag)) {
				t.Fatalf("tags: %s", got.stdout)
			}

			// Rust writes, Go reads.
			entry := larderCmd(t, []byte(`{"from":"rust","n":[1,2,3]}`), "encode", "--ttl", "60", "--tag", rustTag)
			if set := larderCmd(t, entry.stdout, "store", "set", "--store", url, rustKey); set.status != 0 {
				t.Fatalf("larder store set: %s", set.stderr)
			}
			v, ok := c.Get(ctx, rustKey)
			if !ok {
				t.Fatal("Go does not read Rust's entry")
			}
			if from, _ := v.(*format.Map).Get("from"); from != "rust" {
				t.Fatalf("%#v", v)
			}

			// Go purges Rust's tag: Rust no longer finds it. Rust purges Go's: Go no longer finds it.
			time.Sleep(5 * time.Millisecond)
			if _, err := c.PurgeTag(ctx, rustTag); err != nil {
				t.Fatal(err)
			}
			if g := larderCmd(t, nil, "store", "get", "--store", url, rustKey); g.status != 1 {
				t.Fatalf("Rust still reads an entry Go purged: %d %s", g.status, g.stderr)
			}
			if p := larderCmd(t, nil, "store", "purge", "--store", url, "--tag", goTag); p.status != 0 {
				t.Fatalf("larder store purge: %s", p.stderr)
			}
			if _, ok := c.Get(ctx, goKey); ok {
				t.Fatal("Go still reads an entry Rust purged")
			}

			// Counters are shared too.
			if _, _, err := c.Incr(ctx, "count-"+goKey, 41, time.Minute, true); err != nil {
				t.Fatal(err)
			}
			if n, _, _ := c.Incr(ctx, "count-"+goKey, 1, 0, true); n != 42 {
				t.Fatalf("counter %d", n)
			}
			raw := larderCmd(t, nil, "store", "get", "--store", url, "count-"+goKey)
			if strings.TrimRight(string(raw.stdout), " \n") != "42" {
				t.Fatalf("Rust reads the counter as %q (%s)", raw.stdout, raw.stderr)
			}
		})
	}
}

// python is the repository's virtualenv interpreter, where `make test` installs the Python client.
func python(t *testing.T) string {
	p := os.Getenv("LARDER_PYTHON")
	if p == "" {
		p = filepath.Join(testenv.RepoRoot(), ".venv", "bin", "python")
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the Python client is needed (make venv, or LARDER_PYTHON): %v", err)
	}
	return p
}

const pythonReader = `
import sys, json, larder
from larder import Cache
from larder.stores import open_store
store = open_store(sys.argv[1])
cache = Cache(store)
print(json.dumps(cache.get(sys.argv[2]), ensure_ascii=False, sort_keys=True))
cache.set(sys.argv[3], {"from": "python", "list": [1, 2.5, None]}, ttl=60)
`

func TestGoAndPythonThroughSharedStores(t *testing.T) {
	py := python(t)
	urls := sharedStores(t)
	for _, name := range []string{"memcached", "redis", "postgres", "sqlite", "file"} {
		url := urls[name]
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c, id := openCache(t, url)
			goKey, pyKey := fmt.Sprintf("go-%d", id), fmt.Sprintf("py-%d", id)
			type Page struct {
				Title string   `msgpack:"title"`
				Views int64    `msgpack:"views"`
				Tags  []string `msgpack:"tags"`
			}
			if err := (larder.Typed[Page]{C: c}).Set(ctx, goKey, Page{"Grüße", 12, []string{"a"}}, larder.TTL(time.Minute)); err != nil {
				t.Fatal(err)
			}
			out := command(t, nil, py, "-c", pythonReader, url, goKey, pyKey)
			if out.status != 0 {
				t.Fatalf("python: exit %d: %s", out.status, out.stderr)
			}
			if strings.TrimSpace(string(out.stdout)) != `{"tags": ["a"], "title": "Grüße", "views": 12}` {
				t.Fatalf("Python reads Go's value as %s", out.stdout)
			}
			v, ok := c.Get(ctx, pyKey)
			if !ok {
				t.Fatal("Go does not read Python's value")
			}
			got, _ := format.DisplayJSON(v, -1)
			if got != `{"from":"python","list":[1,2.5,null]}` {
				t.Fatalf("Go reads Python's value as %s", got)
			}
		})
	}
}

const rubyReader = `
require "json"
require "larder"
cache = Larder::Cache.new(ARGV[0])
puts JSON.generate(cache.read(ARGV[1]))
cache.write(ARGV[2], {"from" => "ruby", "list" => [1, 2.5, nil]}, ttl: 60)
`

func TestGoAndRubyThroughSharedStores(t *testing.T) {
	ruby, err := exec.LookPath("ruby")
	if err != nil {
		t.Fatalf("ruby is needed (make ruby-packages): %v", err)
	}
	urls := sharedStores(t)
	lib := filepath.Join(testenv.RepoRoot(), "clients", "ruby", "lib")
	for _, name := range []string{"memcached", "redis", "postgres", "sqlite", "file"} {
		url := urls[name]
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c, id := openCache(t, url)
			goKey, rbKey := fmt.Sprintf("go-rb-%d", id), fmt.Sprintf("rb-%d", id)
			if err := c.Set(ctx, goKey, format.NewMap("title", "Grüße", "views", int64(12)), larder.TTL(time.Minute)); err != nil {
				t.Fatal(err)
			}
			out := command(t, nil, ruby, "-I", lib, "-e", rubyReader, url, goKey, rbKey)
			if out.status != 0 {
				t.Fatalf("ruby: exit %d: %s", out.status, out.stderr)
			}
			if strings.TrimSpace(string(out.stdout)) != `{"title":"Grüße","views":12}` {
				t.Fatalf("Ruby reads Go's value as %s", out.stdout)
			}
			v, ok := c.Get(ctx, rbKey)
			if !ok {
				t.Fatal("Go does not read Ruby's value")
			}
			if got, _ := format.DisplayJSON(v, -1); got != `{"from":"ruby","list":[1,2.5,null]}` {
				t.Fatalf("Go reads Ruby's value as %s", got)
			}
		})
	}
}
