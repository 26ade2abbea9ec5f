// The file store's way down the tree (STORES.md §7, "Links are never followed below the root"): the root is
// opened by its path (it may be a link: operators move caches that way), and every directory below it is opened
// relative to its parent with O_NOFOLLOW|O_DIRECTORY, so a shard directory that is a symbolic link (or a file) is
// refused by the kernel instead of followed. Paths below the root are never handed to the kernel whole: MkdirAll,
// open and rename would follow a link in every component but the last.
package stores

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// notOurs reports an error that means "nothing of the store's is there": missing, or a link or something that
// is not a directory where a directory belongs. Readers read a miss; deletes do nothing.
func notOurs(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) ||
		errors.Is(err, errNotFollowed)
}

// subdir opens the directory name in dirfd without following a link; with create, a missing one is made with
// the store's directory mode first. A link or a file there is errNotFollowed.
func (f *File) subdir(dirfd int, name string, create bool) (int, error) {
	made := false
	for {
		fd, err := unix.Openat(dirfd, name, dirFlags, 0)
		switch {
		case err == nil:
			return fd, nil
		case err == unix.EINTR:
		case err == unix.ENOENT && create && !made:
			if err := unix.Mkdirat(dirfd, name, f.dirMode); err != nil && err != unix.EEXIST {
				return -1, err
			}
			made = true
		case err == unix.ELOOP || err == unix.ENOTDIR:
			return -1, errNotFollowed
		default:
			return -1, err
		}
	}
}

// shard opens a key's directory <root>/<h[0:2]>/<h[2:4]> one component at a time, never following a link
// below the root; with create, missing directories (the root too) are made. The caller closes the descriptor.
func (f *File) shard(h string, create bool) (int, error) {
	root, err := unix.Open(f.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err == unix.ENOENT && create {
		if err = os.MkdirAll(f.root, os.FileMode(f.dirMode)); err == nil {
			root, err = unix.Open(f.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		}
	}
	if err != nil {
		return -1, err
	}
	level1, err := f.subdir(root, h[0:2], create)
	unix.Close(root)
	if err != nil {
		return -1, err
	}
	level2, err := f.subdir(level1, h[2:4], create)
	unix.Close(level1)
	return level2, err
}

// openDir opens the root for a scan (following it if it is a link).
func openDir(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// openDirAt opens a directory below the root for a scan, relative to its parent, never following a link.
func openDirAt(parent *os.File, name string) (*os.File, error) {
	fd, err := unix.Openat(int(parent.Fd()), name, dirFlags, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}
