// readv for the connection reader (wire_reader.go) where the system has it: one read that fills a large value's
// slice and puts what follows it in the connection's buffer.

//go:build unix

package stores

import "golang.org/x/sys/unix"

const readvWorks = true

func readvFD(fd uintptr, into, tail []byte) (int, error) {
	iovs := [2][]byte{into, tail}
	return unix.Readv(int(fd), iovs[:])
}
