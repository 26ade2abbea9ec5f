// The connection reader (wire_reader.go) against a real loopback socket: values of every size around its
// bounds, sent in one piece or dripped in uneven pieces, read exactly, with the line after them intact, with
// readv and without; and the lies: a value not followed by CR LF, a reply cut off mid-value, a server silent
// mid-value (the deadline ends it), lines too long or without CR.
package stores

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"testing"
	"time"
)

// serveBytes accepts one connection, writes wire in pieces of at most piece bytes (all at once when piece is 0),
// then closes it (hangUp) or keeps it open and silent until the test ends.
func serveBytes(t *testing.T, wire []byte, piece int, hangUp bool) *wireConn {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	served := make(chan struct{})
	t.Cleanup(func() { close(done); l.Close(); <-served })
	go func() {
		defer close(served)
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		rng := rand.New(rand.NewPCG(uint64(len(wire)), uint64(piece)))
		for rest := wire; len(rest) > 0; {
			n := len(rest)
			if piece > 0 {
				n = min(n, 1+rng.IntN(piece))
			}
			if _, err := c.Write(rest[:n]); err != nil {
				return
			}
			rest = rest[n:]
			if piece > 0 {
				time.Sleep(50 * time.Microsecond)
			}
		}
		if !hangUp {
			<-done
		}
	}()
	nc, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	return &wireConn{c: nc, r: newWireReader(nc)}
}

// readers runs f with readv (where the system has it) and without.
func readers(t *testing.T, f func(t *testing.T, plain bool)) {
	t.Run("readv", func(t *testing.T) { f(t, false) })
	t.Run("plain", func(t *testing.T) { f(t, true) })
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	return b
}

func TestWireReaderReadsValuesExactly(t *testing.T) {
	sizes := []int{0, 1, 1023, largeValue - 1, largeValue, valueTail, readBuffer - 1, readBuffer, readBuffer + 1,
		64 << 10, 100003}
	readers(t, func(t *testing.T, plain bool) {
		for _, piece := range []int{0, 1500, 70000} {
			var wire []byte
			for _, n := range sizes {
				wire = append(wire, "VA "...)
				wire = append(wire, itoa(n)...)
				wire = append(append(append(wire, "\r\n"...), pattern(n)...), "\r\n"...)
			}
			wire = append(wire, "EN\r\n"...)
			c := serveBytes(t, wire, piece, false)
			if plain {
				c.r.raw = nil
			}
			// the small values of a batch share one buffer, as a Redis MGET's do
			var shared []byte
			for i, n := range sizes {
				l, err := c.line()
				if err != nil || string(l) != "VA "+itoa(n) {
					t.Fatalf("piece %d, value %d: line %q, %v", piece, n, l, err)
				}
				var v []byte
				if i%2 == 0 || n >= largeValue {
					v, err = c.data(nil, n)
					if err == nil && cap(v) != n {
						t.Fatalf("piece %d: a value of %d bytes in a slice of capacity %d", piece, n, cap(v))
					}
				} else {
					at := len(shared)
					shared, err = c.data(shared, n)
					if err == nil {
						v = shared[at:]
					}
				}
				if err != nil || v == nil || !bytes.Equal(v, pattern(n)) {
					t.Fatalf("piece %d, value %d: %d bytes read, equal %v, %v", piece, n, len(v), bytes.Equal(v, pattern(n)), err)
				}
			}
			if l, err := c.line(); err != nil || string(l) != "EN" {
				t.Fatalf("piece %d: the line after the values: %q, %v", piece, l, err)
			}
		}
	})
}

func TestWireReaderRefusesLies(t *testing.T) {
	readers(t, func(t *testing.T, plain bool) {
		cases := []struct {
			name   string
			wire   string
			hangUp bool
			want   func(error) bool
		}{
			{"a large value not followed by CR LF", "VA 5000\r\n" + string(pattern(5000)) + "XY", false, isProtocol},
			{"a small value not followed by CR LF", "VA 5\r\nabcdeXY", false, isProtocol},
			{"a large value cut off", "VA 70000\r\n" + string(pattern(30000)), true, isEOF},
			{"a value cut off before its CR LF", "VA 5000\r\n" + string(pattern(5000)) + "\r", true, isEOF},
			{"a large value, then silence", "VA 70000\r\n" + string(pattern(30000)), false, isDeadline},
			{"a line, then silence", "VA 70", false, isDeadline},
			{"a line too long", "VA " + string(bytes.Repeat([]byte("1"), maxLine+10)) + "\r\n", false, isProtocol},
			{"a line without CR", "VA 5\n", false, isProtocol},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				c := serveBytes(t, []byte(tc.wire), 0, tc.hangUp)
				if plain {
					c.r.raw = nil
				}
				_ = c.c.SetDeadline(time.Now().Add(200 * time.Millisecond))
				start := time.Now()
				v, _, err := c.value(1<<20, false)
				if err == nil || v != nil || !tc.want(err) {
					t.Fatalf("value %d bytes, error %v", len(v), err)
				}
				if took := time.Since(start); took > 2*time.Second {
					t.Fatalf("took %v", took)
				}
			})
		}
	})
}

func isProtocol(err error) bool {
	var pe *protocolError
	return errors.As(err, &pe)
}

func isEOF(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }

func isDeadline(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// A read of a large value allocates the value alone: the readv's arguments do not escape.
func TestWireReaderLargeValueAllocatesOnlyTheValue(t *testing.T) {
	const n, count = 64 << 10, 20
	var wire []byte
	for range count + 1 {
		wire = append(append(append(wire, "VA 65536\r\n"...), pattern(n)...), "\r\n"...)
	}
	c := serveBytes(t, wire, 0, false)
	allocs := testing.AllocsPerRun(count, func() {
		if _, _, err := c.value(1<<20, false); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 1 {
		t.Fatalf("%v allocations per value, want 1", allocs)
	}
}
