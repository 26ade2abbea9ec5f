// The RESP guard (resp_guard.go) on scripted byte streams: it follows the commands written, however the writes
// split them, and holds each reply to its command's whole bound: a script's integer passes and an array in its
// place does not; a SCAN page of COUNT keys and a little more passes and one past 1,024 + COUNT elements does
// not; a reply nobody asked for is refused; pipelined commands each get their own bound.
package stores

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
)

// scriptedConn reads from replies and swallows writes.
type scriptedConn struct {
	net.Conn
	replies *bytes.Reader
}

func (c *scriptedConn) Read(p []byte) (int, error)  { return c.replies.Read(p) }
func (c *scriptedConn) Write(p []byte) (int, error) { return len(p), nil }
func (c *scriptedConn) Close() error                { return nil }

func command(args ...string) []byte {
	var w wireWriter
	arrayHead(&w, len(args))
	for _, a := range args {
		bulkString(&w, a)
	}
	return w.buf
}

// guarded writes the commands (split into pieces of `piece` bytes) and reads the whole reply stream back.
func guarded(commands [][]byte, replies string, piece int) error {
	g := &respGuard{Conn: &scriptedConn{replies: bytes.NewReader([]byte(replies))}, maxBulk: 64 << 20}
	all := bytes.Join(commands, nil)
	for len(all) > 0 {
		n := min(piece, len(all))
		if _, err := g.Write(all[:n]); err != nil {
			return err
		}
		all = all[n:]
	}
	buf := make([]byte, 7) // uneven reads too
	for {
		_, err := g.Read(buf)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

func scanReply(keys int) string {
	var b strings.Builder
	b.WriteString("*2\r\n$1\r\n0\r\n*")
	b.WriteString(itoa(keys))
	b.WriteString("\r\n")
	for range keys {
		b.WriteString("$8\r\nlarder:k\r\n")
	}
	return b.String()
}

func TestRespGuardBoundsEachReplyByItsCommand(t *testing.T) {
	evalsha := command("EVALSHA", strings.Repeat("a", 40), "1", "k", "1", "1", "0")
	for _, piece := range []int{1, 3, 1 << 20} {
		cases := []struct {
			name     string
			commands [][]byte
			replies  string
			ok       bool
		}{
			{"a script's integer", [][]byte{evalsha}, ":1\r\n", true},
			{"a script's nil", [][]byte{evalsha}, "$-1\r\n", true},
			{"a script's error", [][]byte{evalsha}, "-NOSCRIPT No matching script\r\n", true},
			{"an array to a script", [][]byte{evalsha}, "*1000\r\n$67108864\r\n", false},
			{"a long string to a script", [][]byte{evalsha}, "$100000\r\n", false},
			{"a SCAN page of COUNT keys and a little more", [][]byte{command("SCAN", "0", "MATCH", "larder:*", "COUNT", "1000")}, scanReply(1100), true},
			{"a SCAN page past 1,024 + COUNT elements", [][]byte{command("SCAN", "0", "COUNT", "1000")}, "*2\r\n$1\r\n0\r\n*2023\r\n", false},
			{"a SCAN key longer than a line", [][]byte{command("SSCAN", "s", "0", "COUNT", "1000")}, "*2\r\n$1\r\n0\r\n*1\r\n$100000\r\n", false},
			{"a GET's value", [][]byte{command("GET", "k")}, "$5\r\nhello\r\n", true},
			{"an array to a GET", [][]byte{command("GET", "k")}, "*1\r\n:1\r\n", false},
			{"pipelined commands, each its bound", [][]byte{command("GET", "a"), command("DEL", "a"), command("GET", "b")}, "$1\r\nx\r\n:1\r\n$-1\r\n", true},
			{"an array where a pipelined DEL's integer belongs", [][]byte{command("GET", "a"), command("DEL", "a")}, "$1\r\nx\r\n*1\r\n:1\r\n", false},
			{"a reply to no command", [][]byte{command("DEL", "a")}, ":1\r\n:1\r\n", false},
			{"HELLO's properties", [][]byte{command("HELLO", "2")}, "*4\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nmodules\r\n*0\r\n", true},
			{"nesting past 8", [][]byte{command("HELLO", "2")}, strings.Repeat("*1\r\n", 9) + ":1\r\n", false},
		}
		for _, c := range cases {
			err := guarded(c.commands, c.replies, piece)
			if c.ok && err != nil {
				t.Errorf("%s (writes of %d): refused: %v", c.name, piece, err)
			}
			if !c.ok {
				if _, isProtocol := err.(*protocolError); !isProtocol {
					t.Errorf("%s (writes of %d): %v, want a protocol error", c.name, piece, err)
				}
			}
		}
	}
}
