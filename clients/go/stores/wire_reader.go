// The read side of one of larder's own connections (wire_conn.go): a buffer for reply lines and small values,
// and a large value read straight into a slice of exactly its size, with what follows it on the wire (its CR LF,
// the next reply line, a few bytes more) landing in the buffer in the same readv. Why not bufio.Reader: it read
// a large value's first 16 KiB into its buffer and copied them out (1.6 MB of memmove per multi-get of
// 100 x 64 KiB), and a value read straight past it could take its CR LF only in one more read, or in a slice
// 2 bytes longer than the value (a 64 KiB value then cost a 72 KiB allocation: the next 8 KiB page, zeroed).
package stores

import (
	"bytes"
	"io"
	"net"
	"syscall"
)

// readBuffer is the size of a connection's read buffer (a reply line is at most maxLine, well within it). 64 KiB,
// not 16: a Redis MGET of 100 x 1 KiB (a 103 KB reply; small values come through the buffer) took 6.9 reads per
// call with 16 KiB, 4.1 with 32 KiB (go-redis's size; go-redis makes 3.9 and a liveness recvfrom), 2.0-2.2 with
// 64 KiB, 1.5 with 128 KiB (`strace -c -f`, 2,300 calls, 2026-11-25). 64 rather than 128: half a read per call
// less is not worth twice the memory of every pooled connection (a pool of 50 holds 3.2 MB of buffers at 64).
const readBuffer = 64 << 10

// valueTail bounds what a large value's readv takes after the value: its CR LF, the next reply line, and at
// most a few hundred bytes of the next value (which would otherwise be copied out of the buffer).
const valueTail = 512

type wireReader struct {
	conn net.Conn
	raw  syscall.RawConn // nil where readv is not available: plain reads
	buf  []byte
	r, w int // buf[r:w] is read from the connection and not yet taken
	// the readv in flight, as fields rather than a closure's captures, so that a read allocates nothing
	into, tail []byte
	got        int
	readvErr   error
	readvFn    func(fd uintptr) bool
}

func newWireReader(c net.Conn) *wireReader {
	r := &wireReader{conn: c, buf: make([]byte, readBuffer)}
	if sc, ok := c.(syscall.Conn); ok && readvWorks {
		if raw, err := sc.SyscallConn(); err == nil {
			r.raw = raw
			r.readvFn = r.readvOnce
		}
	}
	return r
}

// fill reads once more into the buffer, after moving what is not yet taken to its front. A read that returned
// bytes and an error returns the bytes; the error comes again on the next read.
func (r *wireReader) fill() error {
	if r.r > 0 {
		r.w = copy(r.buf, r.buf[r.r:r.w])
		r.r = 0
	}
	n, err := r.conn.Read(r.buf[r.w:])
	r.w += n
	switch {
	case n > 0:
		return nil
	case err == nil:
		return io.ErrNoProgress
	case err == io.EOF:
		return io.ErrUnexpectedEOF // a reply cut off: the caller asked for bytes that were promised
	default:
		return err
	}
}

// line reads one reply line (without CR LF), refusing one longer than maxLine. The slice is valid until the
// next read on the connection.
func (r *wireReader) line() ([]byte, error) {
	scanned := 0
	for {
		if i := bytes.IndexByte(r.buf[r.r+scanned:r.w], '\n'); i >= 0 {
			l := r.buf[r.r : r.r+scanned+i+1]
			r.r += len(l)
			if len(l) > maxLine+2 {
				return nil, protoErr("a reply line longer than %d bytes", maxLine)
			}
			if len(l) < 2 || l[len(l)-2] != '\r' {
				return nil, protoErr("a reply line not ended by CR LF")
			}
			return l[:len(l)-2], nil
		}
		scanned = r.w - r.r
		if scanned > maxLine+1 {
			return nil, protoErr("a reply line longer than %d bytes", maxLine)
		}
		if err := r.fill(); err != nil {
			return nil, err
		}
	}
}

// readFull fills b: from the buffer first, then, with readv, straight into b with what follows b landing in the
// buffer (at most valueTail bytes of it when b is a large value, else as much as the buffer holds); without
// readv, straight into b when what is left of it is at least a buffer's size, else through the buffer.
func (r *wireReader) readFull(b []byte) error {
	n := copy(b, r.buf[r.r:r.w])
	r.r += n
	if n == len(b) {
		return nil
	}
	r.r, r.w = 0, 0
	tail := len(r.buf)
	if len(b) >= largeValue {
		tail = valueTail
	}
	for n < len(b) {
		var got int
		var err error
		switch {
		case r.raw != nil:
			got, err = r.readv(b[n:], r.buf[:tail])
		case len(b)-n >= len(r.buf):
			got, err = r.conn.Read(b[n:])
		default:
			if err = r.fill(); err == nil {
				got = copy(b[n:], r.buf[:r.w])
				r.r = got
				if n+got < len(b) {
					r.r, r.w = 0, 0
				}
			}
		}
		if got > len(b)-n { // the readv's bytes past b are in the buffer
			r.w = got - (len(b) - n)
			got = len(b) - n
		}
		n += got
		if n == len(b) {
			return nil
		}
		if err == io.EOF || (err == nil && got == 0) {
			return io.ErrUnexpectedEOF
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// readv reads once into into and then tail, waiting (within the connection's deadline) until bytes come.
func (r *wireReader) readv(into, tail []byte) (int, error) {
	r.into, r.tail, r.got, r.readvErr = into, tail, 0, nil
	err := r.raw.Read(r.readvFn)
	r.into, r.tail = nil, nil
	if err != nil {
		return 0, err
	}
	if r.readvErr != nil {
		return 0, r.readvErr
	}
	if r.got == 0 {
		return 0, io.EOF
	}
	return r.got, nil
}

// readvOnce is the body of one raw read: false asks the poller to wait until the socket is readable.
func (r *wireReader) readvOnce(fd uintptr) bool {
	for {
		n, err := readvFD(fd, r.into, r.tail)
		switch err {
		case nil:
			r.got = n
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		default:
			r.readvErr = err
			return true
		}
	}
}

// crlf takes the CR LF that ends a value.
func (r *wireReader) crlf() error {
	for r.w-r.r < 2 {
		if err := r.fill(); err != nil {
			return err
		}
	}
	if r.buf[r.r] != '\r' || r.buf[r.r+1] != '\n' {
		return protoErr("a value not followed by CR LF")
	}
	r.r += 2
	return nil
}
