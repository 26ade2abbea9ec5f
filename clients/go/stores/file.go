// The file store (STORES.md §7): one file per key under <root>/<h[0..2]>/<h[2..4]>/<h>, a small header
// (magic LDR1, expiry, key) then the value; writes go to a temporary file renamed over the final name; add,
// incr and delete_if hold a flock on the directory's .lock. A file store deletes only files it wrote: scans look
// only at names of the layout, never follow a link, and check magic, key length and that the key hashes to the
// name; anything else is foreign, left alone and counted.
package stores

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const fileMagic = "LDR1"

// File is the file store.
type File struct {
	root     string
	prefix   string
	capacity int64 // 0 = unbounded
	total    atomic.Int64
	scanMu   sync.Mutex
	scanned  atomic.Int64 // ms of the last scan
}

func openFile(u *URL) (Store, error) {
	if len(u.Hosts) > 0 || u.Username != nil {
		return nil, u.errorf("file:// takes a path, not a host (write file:///var/cache/larder)")
	}
	if len(u.Path) < 2 {
		return nil, u.errorf("file:// needs a directory: file:///var/cache/larder")
	}
	prefix, _ := u.take("prefix")
	if err := CheckPrefix(prefix); err != nil {
		return nil, u.errorf("option prefix: %v", err)
	}
	capacity, err := u.size("capacity", 0)
	if err != nil {
		return nil, err
	}
	if err := u.finish(); err != nil {
		return nil, err
	}
	return NewFile(u.Path, prefix, capacity)
}

// NewFile opens (creating) a directory as a file store.
func NewFile(root, prefix string, capacity int64) (*File, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, &Error{Kind: Other, Backend: "file", Server: root, Err: err}
	}
	f := &File{root: root, prefix: prefix, capacity: capacity}
	if capacity > 0 {
		f.rescan()
	}
	return f, nil
}

func (f *File) Backend() string { return "file" }
func (f *File) MaxValue() int   { return 64 << 20 } // the format's default max_size
func (f *File) Close() error    { return nil }

func (f *File) errf(err error) error {
	return &Error{Kind: Other, Backend: "file", Server: f.root, Err: err}
}

func hashName(stored string) string {
	s := sha256.Sum256([]byte(stored))
	return hex.EncodeToString(s[:])
}

func (f *File) dir(h string) string  { return filepath.Join(f.root, h[0:2], h[2:4]) }
func (f *File) path(h string) string { return filepath.Join(f.dir(h), h) }

func (f *File) stored(key string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", keyError("file", err)
	}
	return StoredKey(f.prefix, key), nil
}

// readFile reads one file without following a link: its key, expiry and value, ok=false when it is not ours.
func readFile(path string) (key string, expires int64, value []byte, ok bool, err error) {
	fd, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ELOOP) {
			return "", 0, nil, false, nil
		}
		return "", 0, nil, false, err
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() > 64<<20+1<<16 {
		return "", 0, nil, false, err
	}
	data, err := io.ReadAll(io.LimitReader(fd, st.Size()+1))
	if err != nil {
		return "", 0, nil, false, err
	}
	if len(data) < 14 || string(data[:4]) != fileMagic {
		return "", 0, nil, false, nil
	}
	expires = int64(binary.LittleEndian.Uint64(data[4:12]))
	kl := int(binary.LittleEndian.Uint16(data[12:14]))
	if 14+kl > len(data) {
		return "", 0, nil, false, nil
	}
	key = string(data[14 : 14+kl])
	if hashName(key) != filepath.Base(path) {
		return "", 0, nil, false, nil
	}
	return key, expires, data[14+kl:], true, nil
}

func (f *File) get(stored string) ([]byte, error) {
	h := hashName(stored)
	key, exp, v, ok, err := readFile(f.path(h))
	if err != nil {
		return nil, f.errf(err)
	}
	if !ok || key != stored {
		return nil, nil
	}
	if exp != 0 && exp <= nowMs() {
		_ = os.Remove(f.path(h))
		return nil, nil
	}
	return v, nil
}

func (f *File) Get(ctx context.Context, key string) ([]byte, error) {
	st, err := f.stored(key)
	if err != nil {
		return nil, err
	}
	return f.get(st)
}

func (f *File) GetMulti(ctx context.Context, keys []string) ([][]byte, error) {
	if err := checkKeys(keys); err != nil {
		return nil, keyError("file", err)
	}
	out := make([][]byte, len(keys))
	for i, k := range keys {
		v, err := f.get(StoredKey(f.prefix, k))
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// write puts a file in place atomically (temporary file, rename).
func (f *File) write(stored string, value []byte, exp int64) error {
	h := hashName(stored)
	dir := f.dir(h)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return f.errf(err)
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(dir, "."+h+"."+hex.EncodeToString(rnd[:])+".tmp")
	buf := make([]byte, 14, 14+len(stored)+len(value))
	copy(buf, fileMagic)
	binary.LittleEndian.PutUint64(buf[4:], uint64(exp))
	binary.LittleEndian.PutUint16(buf[12:], uint16(len(stored)))
	buf = append(append(buf, stored...), value...)
	if err := os.WriteFile(tmp, buf, 0o644); err != nil {
		return f.errf(err)
	}
	old := int64(0)
	if st, err := os.Lstat(f.path(h)); err == nil && st.Mode().IsRegular() {
		old = st.Size()
	}
	if err := os.Rename(tmp, f.path(h)); err != nil {
		_ = os.Remove(tmp)
		return f.errf(err)
	}
	f.total.Add(int64(len(buf)) - old)
	f.enforceCapacity()
	return nil
}

// lock holds the flock of the key's directory for add, incr and delete_if.
func (f *File) lock(stored string) (func(), error) {
	h := hashName(stored)
	if err := os.MkdirAll(f.dir(h), 0o755); err != nil {
		return nil, f.errf(err)
	}
	fd, err := os.OpenFile(filepath.Join(f.dir(h), ".lock"), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, f.errf(err)
	}
	if err := syscall.Flock(int(fd.Fd()), syscall.LOCK_EX); err != nil {
		fd.Close()
		return nil, f.errf(err)
	}
	return func() { _ = syscall.Flock(int(fd.Fd()), syscall.LOCK_UN); fd.Close() }, nil
}

func (f *File) set(stored string, value []byte, ttl time.Duration) (bool, error) {
	now := nowMs()
	exp := expiresAt(value, ttl, now)
	if exp != 0 && exp <= now {
		_ = os.Remove(f.path(hashName(stored)))
		return false, nil
	}
	return true, f.write(stored, value, exp)
}

func (f *File) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	st, err := f.stored(key)
	if err != nil {
		return err
	}
	if len(value) > f.MaxValue() {
		return &Error{Kind: TooLarge, Backend: "file", Msg: fmt.Sprintf("value of %d bytes for key %s exceeds the %d-byte limit", len(value), key, f.MaxValue())}
	}
	_, err = f.set(st, value, ttl)
	return err
}

func (f *File) SetMulti(ctx context.Context, items []Item, ttl time.Duration) error {
	for _, it := range items {
		if err := f.Set(ctx, it.Key, it.Value, ttl); err != nil {
			return err
		}
	}
	return nil
}

func (f *File) Add(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	st, err := f.stored(key)
	if err != nil {
		return false, err
	}
	unlock, err := f.lock(st)
	if err != nil {
		return false, err
	}
	defer unlock()
	if v, err := f.get(st); err != nil || v != nil {
		return false, err
	}
	return f.set(st, value, ttl)
}

func (f *File) Incr(ctx context.Context, key string, delta int64, ttl time.Duration, create bool) (int64, bool, error) {
	st, err := f.stored(key)
	if err != nil {
		return 0, false, err
	}
	unlock, err := f.lock(st)
	if err != nil {
		return 0, false, err
	}
	defer unlock()
	h := hashName(st)
	k, exp, v, ok, err := readFile(f.path(h))
	if err != nil {
		return 0, false, f.errf(err)
	}
	if !ok || k != st || (exp != 0 && exp <= nowMs()) {
		if !create {
			return 0, false, nil
		}
		_, err := f.set(st, []byte(itoa64(delta)), ttl)
		return delta, err == nil, err
	}
	n, isCounter := parseCounter(v)
	if !isCounter {
		return 0, false, &Error{Kind: NotACounter, Backend: "file", Msg: "key " + key + " holds a value that is not a counter"}
	}
	n = saturatingAdd(n, delta)
	return n, true, f.write(st, []byte(itoa64(n)), exp)
}

func (f *File) DeleteIf(ctx context.Context, key string, expected []byte) (bool, error) {
	st, err := f.stored(key)
	if err != nil {
		return false, err
	}
	unlock, err := f.lock(st)
	if err != nil {
		return false, err
	}
	defer unlock()
	v, err := f.get(st)
	if err != nil || v == nil || string(v) != string(expected) {
		return false, err
	}
	return true, f.remove(f.path(hashName(st)))
}

func (f *File) remove(path string) error {
	st, err := os.Lstat(path)
	if err != nil {
		return nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return f.errf(err)
	}
	f.total.Add(-st.Size())
	return nil
}

func (f *File) Delete(ctx context.Context, key string) (bool, error) {
	st, err := f.stored(key)
	if err != nil {
		return false, err
	}
	v, err := f.get(st)
	if err != nil || v == nil {
		return false, err
	}
	return true, f.remove(f.path(hashName(st)))
}

func (f *File) DeleteMulti(ctx context.Context, keys []string) (int, error) {
	if err := checkKeys(keys); err != nil {
		return 0, keyError("file", err)
	}
	n := 0
	for _, k := range keys {
		if ok, err := f.Delete(ctx, k); err != nil {
			return n, err
		} else if ok {
			n++
		}
	}
	return n, nil
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < n; i++ {
		c := s[i]
		if !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) {
			return false
		}
	}
	return true
}

// ourFile is one file of the store found by a scan.
type ourFile struct {
	path    string
	key     string
	value   []byte
	expires int64
	size    int64
	mtime   time.Time
}

// walk visits the store's own files (and counts foreign ones): <root>/<2 hex>/<2 hex>/<64 hex>, regular files
// only, links neither followed nor touched.
func (f *File) walk(visit func(o ourFile)) (foreign int64) {
	level1, _ := os.ReadDir(f.root)
	for _, d1 := range level1 {
		p1 := filepath.Join(f.root, d1.Name())
		if !d1.IsDir() || !isHex(d1.Name(), 2) {
			if d1.Type()&fs.ModeSymlink != 0 || !strings.HasPrefix(d1.Name(), ".") {
				foreign++
			}
			continue
		}
		level2, _ := os.ReadDir(p1)
		for _, d2 := range level2 {
			p2 := filepath.Join(p1, d2.Name())
			if !d2.IsDir() || !isHex(d2.Name(), 2) {
				foreign++
				continue
			}
			files, _ := os.ReadDir(p2)
			for _, fe := range files {
				name := fe.Name()
				if strings.HasPrefix(name, ".") {
					continue
				}
				if !fe.Type().IsRegular() || !isHex(name, 64) || name[0:2] != d1.Name() || name[2:4] != d2.Name() {
					foreign++
					continue
				}
				path := filepath.Join(p2, name)
				key, exp, value, ok, err := readFile(path)
				if err != nil || !ok {
					foreign++
					continue
				}
				info, err := fe.Info()
				if err != nil {
					continue
				}
				visit(ourFile{path, key, value, exp, info.Size(), info.ModTime()})
			}
		}
	}
	return foreign
}

func (f *File) rescan() {
	f.scanMu.Lock()
	defer f.scanMu.Unlock()
	var total int64
	f.walk(func(o ourFile) { total += o.size })
	f.total.Store(total)
	f.scanned.Store(nowMs())
}

// enforceCapacity deletes the oldest files once the total passes capacity, down to 90% of it.
func (f *File) enforceCapacity() {
	if f.capacity <= 0 {
		return
	}
	if nowMs()-f.scanned.Load() > 60_000 {
		f.rescan()
	}
	if f.total.Load() <= f.capacity {
		return
	}
	f.scanMu.Lock()
	defer f.scanMu.Unlock()
	var files []ourFile
	var total int64
	f.walk(func(o ourFile) { o.value = nil; files = append(files, o); total += o.size })
	sort.Slice(files, func(i, j int) bool { return files[i].mtime.Before(files[j].mtime) })
	for _, o := range files {
		if total <= f.capacity*9/10 {
			break
		}
		if os.Remove(o.path) == nil {
			total -= o.size
		}
	}
	f.total.Store(total)
}

func (f *File) purge(match func(o ourFile) bool) Purged {
	var n int64
	now := nowMs()
	f.walk(func(o ourFile) {
		if !strings.HasPrefix(o.key, f.prefix) || !match(o) {
			return
		}
		if os.Remove(o.path) == nil {
			f.total.Add(-o.size)
			if o.expires == 0 || o.expires > now {
				n++
			}
		}
	})
	return Purged{Count: n}
}

func (f *File) Clear(ctx context.Context) error {
	f.purge(func(ourFile) bool { return true })
	return nil
}

func (f *File) PurgePrefix(ctx context.Context, prefix string) (Purged, error) {
	if err := CheckPrefix(prefix); err != nil {
		return Purged{}, keyError("file", err)
	}
	return f.purge(func(o ourFile) bool { return strings.HasPrefix(o.key, f.prefix+prefix) }), nil
}

func (f *File) PurgeTag(ctx context.Context, tag string) (Purged, error) {
	return f.purge(func(o ourFile) bool {
		for _, t := range entryTags(o.value) {
			if t == tag {
				return true
			}
		}
		return false
	}), nil
}

func (f *File) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	now := nowMs()
	st.ForeignFiles = f.walk(func(o ourFile) {
		if o.expires == 0 || o.expires > now {
			st.Entries++
			st.Bytes += o.size
		}
	})
	return st, nil
}
