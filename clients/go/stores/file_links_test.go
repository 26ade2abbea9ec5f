// The file store never follows a link below its root (spec/STORES.md §7), whatever the operation, and creates
// what it writes with the URL's mode (0600 files, 0700 directories by default). Issue 32's attack: a writer of
// the cache directory links a shard directory (<root>/6a/b9, where "k1" lives) or an entry elsewhere, and the
// store must neither create a file there, nor read a planted one, nor delete one.
package stores_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/larder-cache/larder/clients/go/stores"
)

// k1Hash is sha256("k1"): its file is <root>/6a/b9/<k1Hash>.
var k1Hash = func() string { s := sha256.Sum256([]byte("k1")); return hex.EncodeToString(s[:]) }()

// storeFile is a file of the store's own form (STORES.md §7) holding key and value, never expiring.
func storeFile(key, value string) []byte {
	b := make([]byte, 14, 14+len(key)+len(value))
	copy(b, "LDR1")
	binary.LittleEndian.PutUint16(b[12:], uint16(len(key)))
	return append(append(b, key...), value...)
}

// fileOps runs every operation on "k1" and reports what each did.
func fileOps(t *testing.T, s stores.Store) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	errText := func(err error) string {
		if err != nil {
			return "error"
		}
		return "ok"
	}
	v, err := s.Get(ctx, "k1")
	out["get"] = errText(err) + " " + string(v)
	vs, err := s.GetMulti(ctx, []string{"k1"})
	if err == nil && vs[0] != nil {
		out["get_multi"] = "read " + string(vs[0])
	}
	deleted, err := s.Delete(ctx, "k1")
	out["delete"] = errText(err) + " " + strconv.FormatBool(deleted)
	deleted, err = s.DeleteIf(ctx, "k1", []byte("planted"))
	out["delete_if"] = errText(err) + " " + strconv.FormatBool(deleted)
	out["set"] = errText(s.Set(ctx, "k1", []byte("written"), time.Minute))
	added, err := s.Add(ctx, "k1", []byte("added"), time.Minute)
	out["add"] = errText(err) + " " + strconv.FormatBool(added)
	n, found, err := s.Incr(ctx, "k1", 1, time.Minute, true)
	out["incr"] = errText(err) + " " + strconv.FormatInt(n, 10) + " " + strconv.FormatBool(found)
	if _, err := s.PurgePrefix(ctx, ""); err != nil {
		out["purge_prefix"] = err.Error()
	}
	if _, err := s.PurgeTag(ctx, "t"); err != nil {
		out["purge_tag"] = err.Error()
	}
	if err := s.Clear(ctx); err != nil {
		out["clear"] = err.Error()
	}
	if _, err := s.Stats(ctx); err != nil {
		out["stats"] = err.Error()
	}
	return out
}

// entriesOf lists a directory's names (empty when it does not exist).
func entriesOf(t *testing.T, dir string) []string {
	t.Helper()
	es, _ := os.ReadDir(dir)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestFileStoreNeverFollowsALinkedShardDirectory(t *testing.T) {
	for _, level := range []string{"6a/b9", "6a"} {
		t.Run(strings.ReplaceAll(level, "/", "-"), func(t *testing.T) {
			root, elsewhere := t.TempDir(), t.TempDir()
			link := filepath.Join(root, level)
			if err := os.MkdirAll(filepath.Dir(link), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(elsewhere, link); err != nil {
				t.Fatal(err)
			}
			// What a file of the store's would be at the linked place: <elsewhere>/<k1Hash> for 6a/b9,
			// <elsewhere>/b9/<k1Hash> for 6a.
			plantedDir := elsewhere
			if level == "6a" {
				plantedDir = filepath.Join(elsewhere, "b9")
				if err := os.Mkdir(plantedDir, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			planted := filepath.Join(plantedDir, k1Hash)
			if err := os.WriteFile(planted, storeFile("k1", "planted"), 0o600); err != nil {
				t.Fatal(err)
			}
			before := entriesOf(t, plantedDir)
			s := openURL(t, "file://"+root+"?capacity=1M")
			out := fileOps(t, s)
			if out["get"] != "ok " || out["get_multi"] != "" {
				t.Errorf("a read went through the link: get %q, get_multi %q", out["get"], out["get_multi"])
			}
			if out["delete"] != "ok false" || out["delete_if"] != "ok false" {
				t.Errorf("delete %q, delete_if %q: a delete through a link is a no-op", out["delete"], out["delete_if"])
			}
			if out["set"] != "error" || !strings.HasPrefix(out["add"], "error") || !strings.HasPrefix(out["incr"], "error") {
				t.Errorf("writes through the link did not fail: set %q, add %q, incr %q", out["set"], out["add"], out["incr"])
			}
			if got, err := os.ReadFile(planted); err != nil || string(got) != string(storeFile("k1", "planted")) {
				t.Errorf("the planted file was touched: %q %v", got, err)
			}
			if after := entriesOf(t, plantedDir); strings.Join(after, ",") != strings.Join(before, ",") {
				t.Errorf("files appeared or vanished behind the link: %v, was %v", after, before)
			}
			if target, err := os.Readlink(link); err != nil || target != elsewhere {
				t.Errorf("the link itself was changed: %q %v", target, err)
			}
			st, err := s.Stats(context.Background())
			if err != nil || st.Entries != 0 || st.ForeignFiles < 1 {
				t.Errorf("stats: %+v %v (the link is foreign, nothing is the store's)", st, err)
			}
		})
	}
}

func TestFileStoreNeverFollowsALinkedEntry(t *testing.T) {
	root, elsewhere := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "6a", "b9"), 0o700); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(elsewhere, "secret")
	if err := os.WriteFile(target, storeFile("k1", "planted"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "6a", "b9", k1Hash)
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	s := openURL(t, "file://"+root)
	out := fileOps(t, s)
	if out["get"] != "ok " || out["get_multi"] != "" {
		t.Errorf("a read went through the link: get %q, get_multi %q", out["get"], out["get_multi"])
	}
	if out["delete"] != "ok false" || out["delete_if"] != "ok false" {
		t.Errorf("delete %q, delete_if %q", out["delete"], out["delete_if"])
	}
	if out["set"] != "error" || !strings.HasPrefix(out["incr"], "error") {
		t.Errorf("a write replaced or wrote through the link: set %q, incr %q", out["set"], out["incr"])
	}
	if got, err := os.ReadFile(target); err != nil || string(got) != string(storeFile("k1", "planted")) {
		t.Errorf("the link's target was touched: %q %v", got, err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced or deleted: %v %v", fi, err)
	}
	if names := entriesOf(t, filepath.Join(root, "6a", "b9")); len(names) > 2 { // the link and .lock
		t.Errorf("files left behind: %v", names)
	}
}

// A FIFO at an entry's name is foreign: reads neither block on it nor take it for a file.
func TestFileStoreReadsDoNotBlockOnAFIFO(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "6a", "b9"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(root, "6a", "b9", k1Hash), 0o600); err != nil {
		t.Fatal(err)
	}
	s := openURL(t, "file://"+root)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if v, err := s.Get(context.Background(), "k1"); v != nil || err != nil {
			t.Errorf("get: %q %v", v, err)
		}
		st, _ := s.Stats(context.Background())
		if st.ForeignFiles != 1 {
			t.Errorf("foreign files %d", st.ForeignFiles)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a read blocked on a FIFO")
	}
}

// umask is the process's file mode creation mask, read without changing it.
func umask(t *testing.T) uint32 {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status to read the umask from: %v", err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			if err != nil {
				t.Fatal(err)
			}
			return uint32(m)
		}
	}
	t.Skip("the kernel does not report the umask")
	return 0
}

func TestFileStoreCreatesWhatItWritesWithItsMode(t *testing.T) {
	mask := umask(t)
	for _, c := range []struct{ query, file, dir uint32 }{{0, 0o600, 0o700}, {0o640, 0o640, 0o750}, {0o644, 0o644, 0o755}} {
		t.Run(strconv.FormatUint(uint64(c.file), 8), func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "cache") // the store creates its root too
			url := "file://" + root
			if c.query != 0 {
				url += "?mode=0" + strconv.FormatUint(uint64(c.query), 8)
			}
			s := openURL(t, url)
			ctx := context.Background()
			if err := s.Set(ctx, "k1", []byte("v"), 0); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Add(ctx, "k2", []byte("v"), 0); err != nil { // takes the .lock
				t.Fatal(err)
			}
			want := func(path string, mode uint32) {
				t.Helper()
				fi, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				if got := uint32(fi.Mode().Perm()); got != mode&^mask {
					t.Errorf("%s: mode %04o, want %04o (umask %04o)", path, got, mode&^mask, mask)
				}
			}
			want(root, c.dir)
			want(filepath.Join(root, "6a"), c.dir)
			want(filepath.Join(root, "6a", "b9"), c.dir)
			want(filepath.Join(root, "6a", "b9", k1Hash), c.file)
			k2 := sha256.Sum256([]byte("k2"))
			h2 := hex.EncodeToString(k2[:])
			want(filepath.Join(root, h2[0:2], h2[2:4], ".lock"), c.file)
		})
	}
}

func TestFileStoreModeOption(t *testing.T) {
	dir := t.TempDir()
	for _, mode := range []string{"0400", "0200", "4600", "600x", "60", "06000", "-600", "0o600"} {
		_, err := stores.Open(context.Background(), "file://"+dir+"?mode="+mode)
		if stores.KindOf(err) != stores.BadURL || !strings.Contains(err.Error(), "mode") {
			t.Errorf("mode=%s: %v", mode, err)
		}
	}
	for _, mode := range []string{"600", "0600", "0640", "0666", "0777"} {
		s, err := stores.Open(context.Background(), "file://"+dir+"?mode="+mode)
		if err != nil {
			t.Errorf("mode=%s: %v", mode, err)
			continue
		}
		s.Close()
	}
}

// The root itself may be a link (operators move a cache to another disk that way) and is followed.
func TestFileStoreRootMayBeALink(t *testing.T) {
	real := t.TempDir()
	root := filepath.Join(t.TempDir(), "cache")
	if err := os.Symlink(real, root); err != nil {
		t.Fatal(err)
	}
	s := openURL(t, "file://"+root)
	ctx := context.Background()
	if err := s.Set(ctx, "k1", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Get(ctx, "k1"); string(v) != "v" || err != nil {
		t.Fatalf("get: %q %v", v, err)
	}
	if _, err := os.Stat(filepath.Join(real, "6a", "b9", k1Hash)); err != nil {
		t.Fatal(err)
	}
}
