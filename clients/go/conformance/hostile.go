// What the four hostile_*.json files (spec/vectors/README.md, "hostile_*.json", issue 32) share: the servers
// and binaries they take from the environment, and the runner's own raw probes of memcached and Redis, small
// socket code written from the protocols that never sees a key as a string, only the bytes it is given, so a
// store that writes other bytes than it checked cannot hide behind its own reads.
package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// missingEnv is a variable a file needs and the environment lacks: the whole file fails with this reason.
type missingEnv struct{ name, what string }

func (e *missingEnv) Error() string {
	return fmt.Sprintf("%s is not set: it names %s (spec/vectors/README.md)", e.name, e.what)
}

// needEnv is the value of a variable the file cannot run without.
func needEnv(name, what string) (string, error) {
	v := os.Getenv(name)
	if v == "" {
		return "", &missingEnv{name, what}
	}
	return v, nil
}

func unhex(field, s string) ([]byte, error) {
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%s is not hex: %v", field, err)
	}
	return b, nil
}

// overdue is the error of a call that did not return in time.
type overdue struct {
	what  string
	limit time.Duration
}

func (e *overdue) Error() string { return fmt.Sprintf("%s did not return within %v", e.what, e.limit) }

// within runs fn and fails when it has not returned after d (fn is then left running: a runner's leak, not a
// hang of the whole file).
func within(d time.Duration, what string, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("%s panicked: %v", what, p)
			}
		}()
		done <- fn(ctx)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return &overdue{what, d}
	}
}

// rawConn is one connection of the raw probes, every read and write bounded by a 5-second deadline.
type rawConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialRaw(addr string) (*rawConn, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, fmt.Errorf("raw probe: %v", err)
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	return &rawConn{c, bufio.NewReader(c)}, nil
}

func (rc *rawConn) Close() { _ = rc.c.Close() }

func (rc *rawConn) send(parts ...[]byte) error {
	_, err := rc.c.Write(bytes.Join(parts, nil))
	return err
}

// line reads one CRLF-terminated line (at most 4 KiB), without its CRLF.
func (rc *rawConn) line() (string, error) {
	var b []byte
	for {
		chunk, err := rc.r.ReadSlice('\n')
		b = append(b, chunk...)
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) || len(b) > 4096 {
			return "", fmt.Errorf("raw probe: reading a line: %v", err)
		}
	}
	if !bytes.HasSuffix(b, []byte("\r\n")) {
		return "", fmt.Errorf("raw probe: a line without CRLF: %q", b)
	}
	return string(b[:len(b)-2]), nil
}

// data reads n bytes and the CRLF after them.
func (rc *rawConn) data(n int) ([]byte, error) {
	if n < 0 || n > 128<<20 {
		return nil, fmt.Errorf("raw probe: a length of %d", n)
	}
	b := make([]byte, n+2)
	if _, err := io.ReadFull(rc.r, b); err != nil {
		return nil, fmt.Errorf("raw probe: %v", err)
	}
	if !bytes.HasSuffix(b, []byte("\r\n")) {
		return nil, fmt.Errorf("raw probe: data without its CRLF")
	}
	return b[:n], nil
}

// mcFlush empties a memcached: flush_all.
func mcFlush(addr string) error {
	rc, err := dialRaw(addr)
	if err != nil {
		return err
	}
	defer rc.Close()
	if err := rc.send([]byte("flush_all\r\n")); err != nil {
		return err
	}
	if l, err := rc.line(); err != nil || l != "OK" {
		return fmt.Errorf("raw flush_all answered %q %v", l, err)
	}
	return nil
}

// mcGet is `mg <key> v`: the value, or nil for EN.
func mcGet(addr string, key []byte) ([]byte, error) {
	rc, err := dialRaw(addr)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if err := rc.send([]byte("mg "), key, []byte(" v\r\n")); err != nil {
		return nil, err
	}
	l, err := rc.line()
	if err != nil {
		return nil, err
	}
	if l == "EN" {
		return nil, nil
	}
	fields := strings.Fields(l)
	if len(fields) < 2 || fields[0] != "VA" {
		return nil, fmt.Errorf("raw mg answered %q", l)
	}
	n, err := strconv.Atoi(fields[1])
	if err != nil {
		return nil, fmt.Errorf("raw mg answered %q", l)
	}
	return rc.data(n)
}

// redisReply is one RESP2 reply: a status or error line, an integer, or a bulk string (nil: the nil bulk).
type redisReply struct {
	status string
	err    string
	n      int64
	bulk   []byte
}

// redisCmd sends one command of bulk strings and reads its one reply (no arrays: the probes need none).
func redisCmd(addr string, args ...[]byte) (redisReply, error) {
	rc, err := dialRaw(addr)
	if err != nil {
		return redisReply{}, err
	}
	defer rc.Close()
	parts := [][]byte{fmt.Appendf(nil, "*%d\r\n", len(args))}
	for _, a := range args {
		parts = append(parts, fmt.Appendf(nil, "$%d\r\n", len(a)), a, []byte("\r\n"))
	}
	if err := rc.send(parts...); err != nil {
		return redisReply{}, err
	}
	l, err := rc.line()
	if err != nil || l == "" {
		return redisReply{}, fmt.Errorf("raw %s: %q %v", args[0], l, err)
	}
	switch l[0] {
	case '+':
		return redisReply{status: l[1:]}, nil
	case '-':
		return redisReply{err: l[1:]}, nil
	case ':':
		n, err := strconv.ParseInt(l[1:], 10, 64)
		return redisReply{n: n}, err
	case '$':
		n, err := strconv.Atoi(l[1:])
		if err != nil {
			return redisReply{}, fmt.Errorf("raw %s: %q", args[0], l)
		}
		if n == -1 {
			return redisReply{}, nil
		}
		b, err := rc.data(n)
		return redisReply{bulk: b}, err
	}
	return redisReply{}, fmt.Errorf("raw %s answered %q", args[0], l)
}

func redisFlush(addr string) error {
	r, err := redisCmd(addr, []byte("FLUSHALL"))
	if err != nil || r.status != "OK" {
		return fmt.Errorf("raw FLUSHALL answered %+v %v", r, err)
	}
	return nil
}

func redisGet(addr string, key []byte) ([]byte, error) {
	r, err := redisCmd(addr, []byte("GET"), key)
	if err != nil {
		return nil, err
	}
	if r.err != "" || r.status != "" {
		return nil, fmt.Errorf("raw GET answered %+v", r)
	}
	return r.bulk, nil
}

func redisDBSize(addr string) (int64, error) {
	r, err := redisCmd(addr, []byte("DBSIZE"))
	if err != nil {
		return 0, err
	}
	if r.err != "" || r.status != "" {
		return 0, fmt.Errorf("raw DBSIZE answered %+v", r)
	}
	return r.n, nil
}
