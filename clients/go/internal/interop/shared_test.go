// What every interop test here does alike: open a Cache on a shared store for one subtest, name its keys apart
// from other runs', run another language's program under a time bound, and the value Go writes for the others
// to read, with the JSON they must read it as.
package interop

import (
	"bytes"
	"context"
	"errors"
	"math/rand"
	"os/exec"
	"testing"
	"time"

	larder "github.com/larder-cache/larder/clients/go"
	"github.com/larder-cache/larder/clients/go/format"
)

// openCache opens a Cache on url, closed when the test ends, and a random id to name the test's keys.
func openCache(t *testing.T, url string) (*larder.Cache, int64) {
	t.Helper()
	c, err := larder.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, rand.Int63()
}

type run struct {
	status int
	stdout []byte
	stderr string
}

// command runs prog with args and stdin, killed after a minute; a non-zero exit is the caller's to judge.
func command(t *testing.T, stdin []byte, prog string, args ...string) run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %v: no answer within a minute: %s", prog, args, errb.String())
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return run{exit.ExitCode(), out.Bytes(), errb.String()}
	} else if err != nil {
		t.Fatal(err)
	}
	return run{0, out.Bytes(), errb.String()}
}

// goValue is what Go writes for another language to read; goValueJSON is how that language must print it.
func goValue() *format.Map {
	return format.NewMap("id", int64(7), "name", "Grüße", "scores", []any{1.5, int64(-3)}, "日本", true)
}

const goValueJSON = `{"id":7,"name":"Grüße","scores":[1.5,-3],"日本":true}`
