// The Go and Rust format commands side by side (spec/CLI.md): byte-identical inspect and key output, the same
// entry bytes from encode when uncompressed, and the same exit status for bad input and usage errors.
package cli

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/larder-cache/larder/clients/go/format"
	"github.com/larder-cache/larder/clients/go/internal/testenv"
)

type result struct {
	status         int
	stdout, stderr []byte
}

func runGo(args []string, stdin []byte, env ...string) result {
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		os.Setenv(k, v)
		defer os.Unsetenv(k)
	}
	var out, errb bytes.Buffer
	status := Main(args, bytes.NewReader(stdin), &out, &errb, nil)
	return result{status, out.Bytes(), errb.Bytes()}
}

func runRust(t *testing.T, args []string, stdin []byte, env ...string) result {
	t.Helper()
	cmd := exec.Command(testenv.LarderBin(t), args...)
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	status := 0
	if ee, ok := err.(*exec.ExitError); ok {
		status = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{status, out.Bytes(), errb.Bytes()}
}

func same(t *testing.T, what string, args []string, stdin []byte, env ...string) result {
	t.Helper()
	r, g := runRust(t, args, stdin, env...), runGo(args, stdin, env...)
	if r.status != g.status {
		t.Errorf("%s: exit %d (Go) vs %d (Rust); Go stderr %q, Rust stderr %q", what, g.status, r.status, g.stderr, r.stderr)
		return g
	}
	if g.status == 0 && len(args) > 2 && args[0] == "encode" && strings.Contains(strings.Join(args, " "), "--serializer json") {
		// FORMAT.md §6: JSON texts may differ in number formatting (Rust keeps each number's text); the
		// headers are identical and each decodes the other's payload to equal values.
		ge, gerr := format.Decode(g.stdout, format.DefaultMaxSize)
		re, rerr := format.Decode(r.stdout, format.DefaultMaxSize)
		if gerr != nil || rerr != nil || !sameValue(ge.Value, re.Value) || !bytes.Equal(g.stdout[:23], r.stdout[:23]) {
			t.Errorf("%s: json entries differ: %v %v\nGo:   %q\nRust: %q", what, gerr, rerr, trunc(g.stdout), trunc(r.stdout))
		}
		return g
	}
	if !bytes.Equal(r.stdout, g.stdout) {
		t.Errorf("%s: stdout differs\nGo:   %q\nRust: %q", what, trunc(g.stdout), trunc(r.stdout))
	}
	if g.status != 0 {
		oneLine(t, what, g)
	}
	return g
}

// sameValue compares decoded values as JSON numbers: an integer equals the float of the same value.
func sameValue(a, b any) bool {
	ja, _ := format.DisplayJSON(normalize(a), -1)
	jb, _ := format.DisplayJSON(normalize(b), -1)
	return ja == jb
}

func normalize(v any) any {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case uint64:
		return float64(x)
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = normalize(x[i])
		}
		return out
	case *format.Map:
		m := &format.Map{}
		for _, p := range x.Pairs {
			m.Pairs = append(m.Pairs, format.Pair{Key: p.Key, Value: normalize(p.Value)})
		}
		return m
	}
	return v
}

func trunc(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "…"
	}
	return string(b)
}

func oneLine(t *testing.T, what string, g result) {
	t.Helper()
	if !bytes.HasPrefix(g.stderr, []byte("larder: ")) || bytes.Count(g.stderr, []byte("\n")) != 1 || len(g.stdout) != 0 {
		t.Errorf("%s: error is not one 'larder: ' line: %q (stdout %q)", what, g.stderr, g.stdout)
	}
}

func vectorCases(t *testing.T, file string) []map[string]any {
	data, err := os.ReadFile(testenv.Spec("vectors", file))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	key := "cases"
	if file == "keys.json" {
		key = "http"
	}
	for _, c := range doc[key].([]any) {
		out = append(out, c.(map[string]any))
	}
	return out
}

func TestInspectOfEveryVectorIsIdentical(t *testing.T) {
	for _, c := range append(vectorCases(t, "entries.json"), vectorCases(t, "invalid.json")...) {
		entry, _ := hex.DecodeString(c["entry_hex"].(string))
		name := c["name"].(string)
		for _, args := range [][]string{{"inspect"}, {"inspect", "--json"}, {"inspect", "--body"}} {
			if ms, ok := c["max_size"].(float64); ok {
				args = append(args, "--max-size", fmt.Sprint(int(ms)))
			}
			g := same(t, name+" "+strings.Join(args, " "), args, entry)
			if errKind, ok := c["error"].(string); ok && !bytes.Contains(g.stderr, []byte("invalid entry: "+errKind+":")) {
				t.Errorf("%s: stderr %q does not name %s", name, g.stderr, errKind)
			}
		}
		same(t, name+" on a terminal", []string{"inspect", "--body"}, entry, "LARDER_FORCE_TTY=1")
		same(t, name+" on a terminal --full", []string{"inspect", "--body", "--full"}, entry, "LARDER_FORCE_TTY=1")
	}
}

func TestKeyOfEveryVectorIsIdentical(t *testing.T) {
	for _, c := range vectorCases(t, "keys.json") {
		args := []string{"key", c["url"].(string), "--method", c["method"].(string)}
		if ns, ok := c["namespace"].(string); ok {
			args = append(args, "--namespace", ns)
		}
		if drop, ok := c["drop"].([]any); ok {
			args = append(args, "--no-default-drops")
			for _, d := range drop {
				args = append(args, "--drop", d.(string))
			}
		}
		g := same(t, c["name"].(string), args, nil)
		if string(g.stdout) != c["key"].(string)+"\n" {
			t.Errorf("%s: %q", c["name"], g.stdout)
		}
	}
}

func TestEncodeIsIdentical(t *testing.T) {
	base := []string{"encode", "--compressor", "none", "--created-at", "1700000000000"}
	cases := []struct {
		args  []string
		stdin string
	}{
		{nil, `{"id":7,"name":"Ada"}`},
		{[]string{"--ttl", "60", "--stale", "30", "--version", "", "--tag", "a", "--tag", "日本"}, `[1,-1,255,256,-33,65536,-2147483649,18446744073709551615,-9223372036854775808]`},
		{[]string{"--serializer", "json"}, `{"a":[1,2.5,"x\u0001\n",null,true,{}],"b":-0}`},
		{[]string{"--serializer", "text"}, "héllo\n"},
		{[]string{"--serializer", "text"}, ""},
		{[]string{"--serializer", "raw"}, "\x00\xff\x01"},
		{[]string{"--serializer", "raw", "--json-input"}, `{"$base64":"/wA="}`},
		{[]string{"--serializer", "text", "--json-input"}, `"a\u00e9"`},
		{[]string{"--kind", "response"}, `{"status":301,"headers":[["location","/x"],["x",{"$base64":"/w=="}]],"body":"hi","content_encoding":"GZIP"}`},
		{[]string{"--kind", "response"}, `{"status":99,"headers":[["a","b"]],"status":404,"body":"x","headers":[]}`},
		{nil, `{"a":1,"b":2,"a":3}`},
		{nil, `{"a":{"x":1,"x":2},"b":[{"k":1,"j":2,"k":[3]}],"a":{"y":4}}`},
		{nil, `{"a":` + strings.Repeat("[", 150) + "1" + strings.Repeat("]", 150) + `,"a":1}`},
		{nil, `{"a":1,"a":` + strings.Repeat("[", 101) + strings.Repeat("]", 101) + "}"},
		{nil, strings.Repeat("[", 100) + strings.Repeat("]", 100)},
		{nil, strings.Repeat("[", 101) + strings.Repeat("]", 101)},
		{nil, `[1e400, -1e400, 1.0, 0.1, 1e16, 1e-7, 562949953421312.25]`},
		{nil, `{"$serde_json::private::Number":"1"}`},
		{[]string{"--serializer", "json"}, `{"$serde_json::private::Number":"1"}`},
		{[]string{"--threshold", "0", "--compressor", "none"}, `"x"`},
	}
	for _, c := range cases {
		args := append(append([]string{}, base...), c.args...)
		if len(c.args) >= 2 && c.args[len(c.args)-1] == "none" {
			args = append([]string{"encode", "--created-at", "0"}, c.args...)
		}
		same(t, strings.Join(args, " ")+" <<< "+c.stdin, args, []byte(c.stdin))
	}
}

func TestBadInputAndUsageErrorsExitAlike(t *testing.T) {
	cases := []struct {
		args  []string
		stdin string
	}{
		{[]string{"encode"}, "{not json"}, {[]string{"encode"}, ""}, {[]string{"encode"}, "[1, 2] 3"},
		{[]string{"encode"}, "NaN"}, {[]string{"encode"}, `"\ud800"`}, {[]string{"encode"}, "\xff"},
		{[]string{"encode"}, "18446744073709551616"}, {[]string{"encode"}, "-9223372036854775809"},
		{[]string{"encode", "--serializer", "text", "--json-input"}, "1"},
		{[]string{"encode", "--serializer", "text"}, "\xff"}, {[]string{"encode", "--serializer", "text"}, "\xed\xa0\x80"},
		{[]string{"encode", "--serializer", "text"}, "\xc0\xaf"},
		{[]string{"encode", "--serializer", "raw", "--json-input"}, `{"$base64": "not base64!"}`},
		{[]string{"encode", "--serializer", "raw", "--json-input"}, `{"$base64": "QQ"}`},
		{[]string{"encode", "--serializer", "raw", "--json-input"}, `{"$base64": "QR=="}`},
		{[]string{"encode", "--serializer", "raw", "--json-input"}, `{"$base64": "QQ==", "x": 1}`},
		{[]string{"encode", "--serializer", "text", "--kind", "response"}, `{"status": 200}`},
		{[]string{"encode", "--json-input", "--json-input"}, "1"},
		{[]string{"encode", "--kind", "response"}, `{"status": 99}`},
		{[]string{"encode", "--kind", "response"}, `{"status": 200.0}`},
		{[]string{"encode", "--kind", "response"}, `{"status": 200, "headers": [["a"]]}`},
		{[]string{"encode", "--kind", "response"}, `{"status": 200, "content_encoding": "deflate"}`},
		{[]string{"encode", "--version", strings.Repeat("v", 65536)}, "1"},
		{[]string{"encode", "--serializer", "json"}, "1e400"},
		{[]string{"encode", "--serializer", "json"}, `[1, -1e400]`},
		{[]string{"encode", "--ttl", "-1"}, "1"},
		{[]string{"key", "example.com/no-scheme"}, ""},
		{[]string{"inspect", "/nonexistent/entry"}, ""},
		{[]string{"encode", "--bogus"}, "1"}, {[]string{"inspect", "--bogus"}, "1"}, {[]string{"key", "--bogus"}, "1"},
		{[]string{"key", "http://a/", "--bogus"}, "1"}, {[]string{"encode", "-x"}, "1"},
		{[]string{"inspect", "--max-size", "-1"}, "1"}, {[]string{"encode", "--ttl"}, "1"}, {[]string{"frobnicate"}, "1"},
		{nil, ""},
	}
	for _, c := range cases {
		same(t, fmt.Sprintf("%q <<< %q", c.args, trunc([]byte(c.stdin))), c.args, []byte(c.stdin))
	}
	for _, args := range [][]string{{"--help"}, {"encode", "--help"}, {"inspect", "--help"}, {"key", "--help"}} {
		g := runGo(args, nil)
		if g.status != 0 || len(g.stdout) == 0 {
			t.Errorf("%v: %d %q", args, g.status, g.stderr)
		}
	}
	help := runGo([]string{"encode", "--help"}, nil).stdout
	for _, want := range []string{"msgpack", "zstd", "response"} {
		if !bytes.Contains(help, []byte(want)) {
			t.Errorf("encode --help does not list %s", want)
		}
	}
}

// randomJSON draws a JSON document: scalars of every kind, nested arrays and maps, unicode and control characters.
func randomJSON(r *rand.Rand, depth int) string {
	switch k := r.Intn(10); {
	case depth > 3 || k < 4:
		switch r.Intn(7) {
		case 0:
			return fmt.Sprint(r.Int63() - r.Int63())
		case 1:
			return fmt.Sprint(r.Intn(300) - 150)
		case 2:
			f := r.NormFloat64() * []float64{1, 1e-6, 1e10, 1e20}[r.Intn(4)]
			b, _ := json.Marshal(f)
			if !bytes.ContainsAny(b, ".eE") {
				b = append(b, ".0"...)
			}
			return string(b)
		case 3:
			return []string{"true", "false", "null"}[r.Intn(3)]
		default:
			runes := []rune{'a', 'é', '日', '\n', '"', '\\', 0x01, 0x7f, '🍞', ' '}
			var b strings.Builder
			for i := r.Intn(40); i > 0; i-- {
				b.WriteRune(runes[r.Intn(len(runes))])
			}
			s, _ := json.Marshal(b.String())
			return string(s)
		}
	case k < 7:
		var items []string
		for i := r.Intn(5); i > 0; i-- {
			items = append(items, randomJSON(r, depth+1))
		}
		return "[" + strings.Join(items, ",") + "]"
	default:
		var items []string
		for i := r.Intn(5); i > 0; i-- {
			key, _ := json.Marshal(fmt.Sprintf("k%d", r.Intn(6)))
			items = append(items, string(key)+":"+randomJSON(r, depth+1))
		}
		return "{" + strings.Join(items, ",") + "}"
	}
}

func TestGeneratedValuesEncodeAndInspectAlike(t *testing.T) {
	r := rand.New(rand.NewSource(21))
	n := 60
	if testing.Short() {
		n = 10
	}
	for i := 0; i < n; i++ {
		doc := randomJSON(r, 0)
		for _, ser := range []string{"msgpack", "json"} {
			args := []string{"encode", "--serializer", ser, "--compressor", "none", "--created-at", "0"}
			g := same(t, ser+" "+doc, args, []byte(doc))
			if g.status == 0 {
				same(t, "inspect "+doc, []string{"inspect", "--json"}, g.stdout)
			}
		}
		comp := []string{"lz4", "snappy", "zstd", "brotli", "gzip"}[i%5]
		g := runGo([]string{"encode", "--compressor", comp, "--threshold", "0", "--created-at", "5"}, []byte(doc))
		rr := runRust(t, []string{"inspect", "--json"}, g.stdout)
		gg := runGo([]string{"inspect", "--json"}, g.stdout)
		// Rust reads Go's compressed entries; the displays differ only in the stored compressor and sizes.
		if rr.status != 0 || gg.status != 0 {
			t.Fatalf("%s %s: Rust %d %s", comp, doc, rr.status, rr.stderr)
		}
		if !bytes.Equal(rr.stdout, gg.stdout) {
			t.Errorf("%s: Rust reads %s, Go reads %s", comp, rr.stdout, gg.stdout)
		}
		e, err := format.Decode(runRust(t, []string{"encode", "--compressor", comp, "--threshold", "0", "--created-at", "5"}, []byte(doc)).stdout, format.DefaultMaxSize)
		if err != nil {
			t.Errorf("Go cannot read Rust's %s entry of %s: %v", comp, doc, err)
		} else if e.CreatedAt != 5 {
			t.Errorf("created_at %d", e.CreatedAt)
		}
	}
}
