// Where there is no readv, the connection reader (wire_reader.go) reads a large value straight into its slice and
// what follows through its buffer.

//go:build !unix

package stores

import "errors"

const readvWorks = false

func readvFD(uintptr, []byte, []byte) (int, error) { return 0, errors.ErrUnsupported }
