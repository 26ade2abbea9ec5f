// The file store (STORES.md §7): one file per key under <root>/<h[0..2]>/<h[2..4]>/<h>, a small header
// (magic LDR1, expiry, key) then the value; writes go to a temporary file renamed over the final name; add,
// incr and delete_if hold a flock on the directory's .lock. A file store deletes only files it wrote: scans look
// only at names of the layout and check magic, key length and that the key hashes to the name; anything else is
// foreign, left alone and counted.
//
// Links are never followed below the root, for any operation (§7, "Links are never followed below the root"):
// every path below the root is walked one component at a time, each directory opened relative to its parent
// with O_NOFOLLOW|O_DIRECTORY and each file with O_NOFOLLOW (file_dirs.go), because MkdirAll, open and rename
// follow a link in every component but the last. A linked shard directory or entry makes a read a miss, a
// delete a no-op and a write an error, and its target is never touched. Files are created with the URL's `mode`
// (default 0600), directories with it plus a search bit wherever it has a read bit (0700).
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
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

const fileMagic = "LDR1"

// maxFileSize bounds a file a read takes in: the format's default max_size, the header and the longest key.
const maxFileSize = 64<<20 + 1<<16

// File is the file store.
type File struct {
	root     string
	prefix   string
	capacity int64  // 0 = unbounded
	fileMode uint32 // value, temporary and lock files
	dirMode  uint32 // directories the store creates: fileMode plus x wherever it has r
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
	mode := uint32(DefaultFileMode)
	if text, ok := u.take("mode"); ok {
		if mode, err = ParseFileMode(text); err != nil {
			return nil, u.errorf("option mode=%q: %v", text, err)
		}
	}
	if err := u.finish(); err != nil {
		return nil, err
	}
	return NewFileMode(u.Path, prefix, capacity, mode)
}

// DefaultFileMode is the mode of the files a file store creates unless its URL says `mode=`: a cache holds
// private pages and values, so only the owner may read them.
const DefaultFileMode = 0o600

// ParseFileMode reads a `mode=` option: three or four octal digits, permission bits only, and the owner must
// be able to read and write.
func ParseFileMode(text string) (uint32, error) {
	if len(text) < 3 || len(text) > 4 || strings.Trim(text, "01234567") != "" {
		return 0, fmt.Errorf("three or four octal digits, such as 0600 or 0640")
	}
	var mode uint32
	for _, c := range text {
		mode = mode*8 + uint32(c-'0')
	}
	if mode > 0o777 {
		return 0, fmt.Errorf("only permission bits: no set-user-ID, set-group-ID or sticky bit")
	}
	if mode&0o600 != 0o600 {
		return 0, fmt.Errorf("the owner must be able to read and write (0600 at least)")
	}
	return mode, nil
}

// dirModeOf is a file mode plus a search bit wherever it has a read bit: 0600 gives 0700, 0640 gives 0750.
func dirModeOf(mode uint32) uint32 {
	return mode | (mode&0o444)>>2
}

// NewFile opens (creating) a directory as a file store whose files have the default mode (0600).
func NewFile(root, prefix string, capacity int64) (*File, error) {
	return NewFileMode(root, prefix, capacity, DefaultFileMode)
}

// NewFileMode opens (creating) a directory as a file store whose files are created with mode (ParseFileMode's
// rules) and directories with mode plus a search bit wherever it has a read bit. The root may be a link.
func NewFileMode(root, prefix string, capacity int64, mode uint32) (*File, error) {
	if mode > 0o777 || mode&0o600 != 0o600 {
		return nil, &Error{Kind: BadURL, Backend: "file", Server: root, Msg: fmt.Sprintf("mode %04o: only permission bits, and the owner must read and write", mode)}
	}
	f := &File{root: root, prefix: prefix, capacity: capacity, fileMode: mode, dirMode: dirModeOf(mode)}
	if err := os.MkdirAll(root, os.FileMode(f.dirMode)); err != nil {
		return nil, &Error{Kind: Other, Backend: "file", Server: root, Err: err}
	}
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

// path is where a key's file lives, for messages only: every operation walks the components itself.
func (f *File) path(h string) string { return filepath.Join(f.root, h[0:2], h[2:4], h) }

func (f *File) stored(key string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", keyError("file", err)
	}
	return StoredKey(f.prefix, key), nil
}

// fileData is one file of the store as read: its key, expiry and value, size and modification time.
type fileData struct {
	key     string
	expires int64
	value   []byte
	size    int64
	mtime   time.Time
}

// readAt reads the file name in the directory dirfd without following a link and without blocking on a FIFO;
// ok=false when it is missing, a link, not a regular file or not one of the store's.
func readAt(dirfd int, name string) (d fileData, ok bool, err error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		if notOurs(err) {
			return d, false, nil
		}
		return d, false, err
	}
	file := os.NewFile(uintptr(fd), name)
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		return d, false, err
	}
	if !st.Mode().IsRegular() || st.Size() > maxFileSize {
		return d, false, nil
	}
	data, err := io.ReadAll(io.LimitReader(file, st.Size()+1))
	if err != nil {
		return d, false, err
	}
	if len(data) < 14 || string(data[:4]) != fileMagic {
		return d, false, nil
	}
	kl := int(binary.LittleEndian.Uint16(data[12:14]))
	if 14+kl > len(data) {
		return d, false, nil
	}
	d = fileData{key: string(data[14 : 14+kl]), expires: int64(binary.LittleEndian.Uint64(data[4:12])),
		value: data[14+kl:], size: st.Size(), mtime: st.ModTime()}
	if hashName(d.key) != name {
		return fileData{}, false, nil
	}
	return d, true, nil
}

// read reads a key's file by its hash: ok=false for a miss, which a link anywhere below the root is.
func (f *File) read(h string) (fileData, bool, error) {
	dir, err := f.shard(h, false)
	if err != nil {
		if notOurs(err) {
			return fileData{}, false, nil
		}
		return fileData{}, false, f.errf(err)
	}
	defer unix.Close(dir)
	d, ok, err := readAt(dir, h)
	if err != nil {
		return fileData{}, false, f.errf(fmt.Errorf("%s: %w", f.path(h), err))
	}
	return d, ok, nil
}

func (f *File) get(stored string) ([]byte, error) {
	h := hashName(stored)
	d, ok, err := f.read(h)
	if err != nil || !ok || d.key != stored {
		return nil, err
	}
	if d.expires != 0 && d.expires <= nowMs() {
		_ = f.removeEntry(h)
		return nil, nil
	}
	return d.value, nil
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

// write puts a file in place atomically (temporary file, rename), in shard directories opened without
// following links; a link (or anything but a regular file) at the entry's name is an error and left in place.
func (f *File) write(stored string, value []byte, exp int64) error {
	h := hashName(stored)
	dir, err := f.shard(h, true)
	if err != nil {
		return f.errf(fmt.Errorf("%s: %w", filepath.Dir(f.path(h)), err))
	}
	defer unix.Close(dir)
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := "." + h + "." + hex.EncodeToString(rnd[:]) + ".tmp"
	buf := make([]byte, 14, 14+len(stored)+len(value))
	copy(buf, fileMagic)
	binary.LittleEndian.PutUint64(buf[4:], uint64(exp))
	binary.LittleEndian.PutUint16(buf[12:], uint16(len(stored)))
	buf = append(append(buf, stored...), value...)
	fd, err := unix.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, f.fileMode)
	if err != nil {
		return f.errf(err)
	}
	file := os.NewFile(uintptr(fd), tmp)
	_, err = file.Write(buf)
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = unix.Unlinkat(dir, tmp, 0)
		return f.errf(err)
	}
	old := int64(0)
	var st unix.Stat_t
	switch err := unix.Fstatat(dir, h, &st, unix.AT_SYMLINK_NOFOLLOW); {
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG:
		old = st.Size
	case err == nil:
		_ = unix.Unlinkat(dir, tmp, 0)
		return f.errf(fmt.Errorf("%s: %w", f.path(h), errNotFollowed))
	case err != unix.ENOENT:
		_ = unix.Unlinkat(dir, tmp, 0)
		return f.errf(err)
	}
	if err := unix.Renameat(dir, tmp, dir, h); err != nil {
		_ = unix.Unlinkat(dir, tmp, 0)
		return f.errf(err)
	}
	f.total.Add(int64(len(buf)) - old)
	f.enforceCapacity()
	return nil
}

// lock holds the flock of the key's directory for add, incr and delete_if.
func (f *File) lock(stored string) (func(), error) {
	h := hashName(stored)
	dir, err := f.shard(h, true)
	if err != nil {
		return nil, f.errf(fmt.Errorf("%s: %w", filepath.Dir(f.path(h)), err))
	}
	defer unix.Close(dir)
	fd, err := unix.Openat(dir, ".lock", unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, f.fileMode)
	if err != nil {
		if err == unix.ELOOP {
			err = errNotFollowed
		}
		return nil, f.errf(fmt.Errorf("%s: %w", filepath.Join(filepath.Dir(f.path(h)), ".lock"), err))
	}
	if err := flock(fd, unix.LOCK_EX); err != nil {
		unix.Close(fd)
		return nil, f.errf(err)
	}
	return func() { _ = flock(fd, unix.LOCK_UN); unix.Close(fd) }, nil
}

func flock(fd, how int) error {
	for {
		if err := unix.Flock(fd, how); err != unix.EINTR {
			return err
		}
	}
}

func (f *File) set(stored string, value []byte, ttl time.Duration) (bool, error) {
	now := nowMs()
	exp := expiresAt(value, ttl, now)
	if exp != 0 && exp <= now {
		return false, f.removeEntry(hashName(stored))
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
	d, ok, err := f.read(hashName(st))
	if err != nil {
		return 0, false, err
	}
	if !ok || d.key != st || (d.expires != 0 && d.expires <= nowMs()) {
		if !create {
			return 0, false, nil
		}
		_, err := f.set(st, []byte(itoa64(delta)), ttl)
		return delta, err == nil, err
	}
	n, isCounter := parseCounter(d.value)
	if !isCounter {
		return 0, false, &Error{Kind: NotACounter, Backend: "file", Msg: "key " + key + " holds a value that is not a counter"}
	}
	n = saturatingAdd(n, delta)
	return n, true, f.write(st, []byte(itoa64(n)), d.expires)
}

func (f *File) DeleteIf(ctx context.Context, key string, expected []byte) (bool, error) {
	st, err := f.stored(key)
	if err != nil {
		return false, err
	}
	unlock, err := f.lock(st)
	if err != nil {
		if notOurs(err) {
			return false, nil // a delete through a link is a no-op: nothing of the store's is there
		}
		return false, err
	}
	defer unlock()
	v, err := f.get(st)
	if err != nil || v == nil || string(v) != string(expected) {
		return false, err
	}
	return true, f.removeEntry(hashName(st))
}

// removeEntry deletes a key's file when it is a regular file reached without following a link; a link (as a
// shard directory or at the entry's name) is left alone, and so is what it points to.
func (f *File) removeEntry(h string) error {
	dir, err := f.shard(h, false)
	if err != nil {
		if notOurs(err) {
			return nil
		}
		return f.errf(err)
	}
	defer unix.Close(dir)
	var st unix.Stat_t
	if err := unix.Fstatat(dir, h, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil
	}
	if err := unix.Unlinkat(dir, h, 0); err != nil {
		if err == unix.ENOENT {
			return nil
		}
		return f.errf(err)
	}
	f.total.Add(-st.Size)
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
	return true, f.removeEntry(hashName(st))
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

// ourFile is one file of the store found by a scan, and the directory (an open descriptor, valid during the
// visit) it is in.
type ourFile struct {
	fileData
	name string
	dir  int
}

// walk visits the store's own files (and counts foreign ones): <root>/<2 hex>/<2 hex>/<64 hex>, regular files
// only, each directory opened relative to its parent without following a link; links are neither followed nor
// touched.
func (f *File) walk(visit func(o ourFile)) (foreign int64) {
	root, err := openDir(f.root)
	if err != nil {
		return 0
	}
	defer root.Close()
	level1, _ := root.ReadDir(-1)
	for _, d1 := range level1 {
		if !d1.IsDir() || !isHex(d1.Name(), 2) {
			if d1.Type()&os.ModeSymlink != 0 || !strings.HasPrefix(d1.Name(), ".") {
				foreign++
			}
			continue
		}
		dir1, err := openDirAt(root, d1.Name())
		if err != nil {
			foreign++
			continue
		}
		level2, _ := dir1.ReadDir(-1)
		for _, d2 := range level2 {
			if !d2.IsDir() || !isHex(d2.Name(), 2) {
				foreign++
				continue
			}
			dir2, err := openDirAt(dir1, d2.Name())
			if err != nil {
				foreign++
				continue
			}
			files, _ := dir2.ReadDir(-1)
			fd := int(dir2.Fd())
			for _, fe := range files {
				name := fe.Name()
				if strings.HasPrefix(name, ".") {
					continue
				}
				if !fe.Type().IsRegular() || !isHex(name, 64) || name[0:2] != d1.Name() || name[2:4] != d2.Name() {
					foreign++
					continue
				}
				d, ok, err := readAt(fd, name)
				if err != nil || !ok {
					foreign++
					continue
				}
				visit(ourFile{d, name, fd})
			}
			dir2.Close()
		}
		dir1.Close()
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
	f.walk(func(o ourFile) { o.value, o.dir = nil, -1; files = append(files, o); total += o.size })
	sort.Slice(files, func(i, j int) bool { return files[i].mtime.Before(files[j].mtime) })
	for _, o := range files {
		if total <= f.capacity*9/10 {
			break
		}
		if f.unlinkOurs(o.name) {
			total -= o.size
		}
	}
	f.total.Store(total)
}

// unlinkOurs deletes a file a scan found, by its name (its hash), reached again without following a link.
func (f *File) unlinkOurs(h string) bool {
	dir, err := f.shard(h, false)
	if err != nil {
		return false
	}
	defer unix.Close(dir)
	return unlinkRegular(dir, h)
}

// unlinkRegular deletes name in dirfd if it is a regular file (never a link).
func unlinkRegular(dirfd int, name string) bool {
	var st unix.Stat_t
	if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false
	}
	return unix.Unlinkat(dirfd, name, 0) == nil
}

func (f *File) purge(match func(o ourFile) bool) Purged {
	var n int64
	now := nowMs()
	f.walk(func(o ourFile) {
		if !strings.HasPrefix(o.key, f.prefix) || !match(o) {
			return
		}
		if unlinkRegular(o.dir, o.name) {
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

// errNotFollowed is the error of a write that met a link (or a file that is not a directory where a shard
// directory belongs, or anything but a regular file at an entry's name) below the root.
var errNotFollowed = errors.New("a symbolic link (or not a directory or file of the store's) below the root: not followed")
