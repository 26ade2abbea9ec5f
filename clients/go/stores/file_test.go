// The file store on a real directory: the shared behaviour, the capacity bound, and that it never deletes or
// reads what it did not write (foreign files, links).
package stores_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/larder-cache/larder/clients/go/stores"
)

func TestFileStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	behave(t, func(t *testing.T) stores.Store { return openURL(t, "file://"+dir) }, false)
}

func TestFileStoreLeavesForeignFilesAlone(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(outside, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := openURL(t, "file://"+dir+"?capacity=64K")
	ctx := context.Background()
	// Foreign things under the root: a file of the layout's shape with another content, a link to a file outside.
	_ = os.MkdirAll(filepath.Join(dir, "ab", "cd"), 0o755)
	foreign := filepath.Join(dir, "ab", "cd", "abcd"+fmt.Sprintf("%060d", 0))
	_ = os.WriteFile(foreign, []byte("not larder's"), 0o644)
	link := filepath.Join(dir, "ab", "cd", "abcd"+fmt.Sprintf("%060d", 1))
	_ = os.Symlink(outside, link)
	_ = os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("operator's"), 0o644)
	for i := range 200 {
		_ = s.Set(ctx, fmt.Sprintf("k%d", i), make([]byte, 1000), time.Minute)
	}
	_ = s.Clear(ctx)
	if _, err := s.PurgePrefix(ctx, ""); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{foreign, link, outside, filepath.Join(dir, "notes.txt")} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was deleted", p)
		}
	}
	st, _ := s.Stats(ctx)
	if st.ForeignFiles < 3 {
		t.Errorf("foreign files counted: %d", st.ForeignFiles)
	}
}

func TestFileStoreCapacity(t *testing.T) {
	dir := t.TempDir()
	s := openURL(t, "file://"+dir+"?capacity=100K")
	ctx := context.Background()
	for i := range 300 {
		_ = s.Set(ctx, fmt.Sprintf("k%d", i), make([]byte, 1000), 0)
	}
	st, _ := s.Stats(ctx)
	if st.Bytes > 100<<10 {
		t.Fatalf("%d bytes past the 100K capacity", st.Bytes)
	}
	if v, _ := s.Get(ctx, "k299"); v == nil {
		t.Fatal("the newest file was evicted")
	}
}
