// Go and TypeScript (clients/typescript's build, run by node) through memcached (two servers, so both rings must
// agree) and Redis: each reads what the other wrote, and a tag purged by one is gone for the other. TypeScript's
// build comes from its own test.sh (make test runs test-typescript first); without it this test fails, saying so.
package interop

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
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
	"github.com/larder-cache/larder/clients/go/stores"
)

// typescript returns node, the file URL of the TypeScript client's built entry point and the path of its CLI,
// larder-ts.
func typescript(t *testing.T) (string, string, string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is needed for the TypeScript interop test (Node ≥ 20): %v", err)
	}
	built := filepath.Join(testenv.RepoRoot(), "clients", "typescript", "build", "src")
	index, cli := filepath.Join(built, "index.js"), filepath.Join(built, "bin.js")
	for _, f := range []string{index, cli} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("TypeScript's build is missing (%v): run `bash clients/typescript/test.sh` (make test-typescript) before the Go tests", err)
		}
	}
	return node, (&url.URL{Scheme: "file", Path: index}).String(), cli
}

// tsScript: argv = lib, store URL, mode, key[, tag]. "read" prints the key's value as JSON (null on a miss);
// "write" stores a value under key with tag; "purge" purges the tag given as key.
const tsScript = `
const [lib, storeURL, mode, key, tag] = process.argv.slice(1);
const { Cache } = await import(lib);
const cache = new Cache(storeURL);
try {
  if (mode === "read") {
    const v = await cache.get(key);
    console.log(JSON.stringify(v === undefined ? null : v));
  } else if (mode === "write") {
    await cache.set(key, { from: "typescript", list: [1, 2.5, null], "ü": true }, { ttlMs: 60000, tags: [tag] });
  } else if (mode === "purge") {
    await cache.purge({ tag: key });
  } else {
    throw new Error("unknown mode " + mode);
  }
} finally {
  await cache.close();
}
`

func runTS(t *testing.T, node, lib, storeURL string, args ...string) string {
	t.Helper()
	r := command(t, nil, node, append([]string{"--input-type=module", "-e", tsScript, lib, storeURL}, args...)...)
	if r.status != 0 {
		t.Fatalf("TypeScript %v: exit %d: %s", args, r.status, r.stderr)
	}
	return strings.TrimSpace(string(r.stdout))
}

func TestGoAndTypeScriptThroughSharedStores(t *testing.T) {
	node, lib, larderTS := typescript(t)
	urls := map[string]string{
		"memcached": "memcached://" + testservers.Memcached(t, "interop") + "," + testservers.Memcached(t, "interop-ts"),
		"redis":     testservers.Redis(t, "interop"),
	}
	for name, storeURL := range urls {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c, id := openCache(t, storeURL)
			store, err := stores.Open(ctx, storeURL)
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			goKey, tsKey := fmt.Sprintf("go-ts-%d", id), fmt.Sprintf("ts-%d", id)
			goTag, tsTag := fmt.Sprintf("go-ts-tag-%d", id), fmt.Sprintf("ts-tag-%d", id)

			// Go writes, TypeScript reads the same value.
			if err := c.Set(ctx, goKey, goValue(), larder.TTL(time.Minute), larder.Tags(goTag)); err != nil {
				t.Fatal(err)
			}
			if got := runTS(t, node, lib, storeURL, "read", goKey); got != goValueJSON {
				t.Fatalf("TypeScript reads Go's value as %s", got)
			}

			// The bytes Go stored, as TypeScript's CLI (larder-ts inspect) reads them.
			raw, err := store.Get(ctx, goKey)
			if err != nil || raw == nil {
				t.Fatalf("raw get: %v", err)
			}
			insp := command(t, raw, node, larderTS, "inspect")
			if insp.status != 0 || !bytes.Contains(insp.stdout, []byte("value:       "+goValueJSON)) ||
				!bytes.Contains(insp.stdout, []byte("tags:        "+goTag)) {
				t.Fatalf("larder-ts inspect of Go's entry: exit %d: %s %s", insp.status, insp.stdout, insp.stderr)
			}

			// A value large enough to be compressed crosses too.
			big := strings.Repeat("é and ü, ", 2000)
			if err := c.Set(ctx, goKey+"-big", format.NewMap("text", big), larder.TTL(time.Minute)); err != nil {
				t.Fatal(err)
			}
			if got := runTS(t, node, lib, storeURL, "read", goKey+"-big"); got != `{"text":"`+big+`"}` {
				t.Fatalf("TypeScript reads Go's large value as %.200s…", got)
			}

			// TypeScript writes, Go reads.
			runTS(t, node, lib, storeURL, "write", tsKey, tsTag)
			v, ok := c.Get(ctx, tsKey)
			if !ok {
				t.Fatal("Go does not read TypeScript's value")
			}
			if got, _ := format.DisplayJSON(v, -1); got != `{"from":"typescript","list":[1,2.5,null],"ü":true}` {
				t.Fatalf("Go reads TypeScript's value as %s", got)
			}

			// TypeScript purges Go's tag: Go no longer finds it. Go purges TypeScript's: TypeScript no longer finds it.
			time.Sleep(5 * time.Millisecond)
			runTS(t, node, lib, storeURL, "purge", goTag)
			if _, ok := c.Get(ctx, goKey); ok {
				t.Fatal("Go still reads an entry TypeScript purged")
			}
			if _, err := c.PurgeTag(ctx, tsTag); err != nil {
				t.Fatal(err)
			}
			if got := runTS(t, node, lib, storeURL, "read", tsKey); got != "null" {
				t.Fatalf("TypeScript still reads an entry Go purged: %s", got)
			}
		})
	}
}
