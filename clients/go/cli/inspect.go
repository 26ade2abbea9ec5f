// `inspect`: an entry's header and value as labelled lines or one JSON object (spec/CLI.md), to the byte what
// every implementation prints; on a terminal long texts are cut for a person.
package cli

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/larder-cache/larder/clients/go/format"
)

const inspectHelp = `usage: larder-go inspect [FILE|-] [--json] [--max-size BYTES] [--body] [--full]

Print an entry's header and decoded value. Exits 1, naming the error kind, for an invalid entry. On a
terminal (not with --json), texts longer than 200 characters are cut, saying how many characters were left out.

options:
  FILE              the entry file; - for stdin
  --json            print one JSON object instead of labelled lines
  --max-size BYTES  largest payload to decompress (default 67108864)
  --body            after the lines, print an empty line and the body: a response's body as stored (still
                    compressed if its content_encoding says so), or a value's payload (decompressed, still
                    serialized); on a terminal as text, or {"$base64":...} when not UTF-8. The JSON form always
                    holds the whole body.
  --full            do not cut long texts on a terminal
`

var inspectSpecs = map[string]flagSpec{"json": {}, "max-size": {value: true}, "body": {}, "full": {}}

// cutAt: on a terminal, inspect shows at most this many characters of a line's text unless --full.
const cutAt = 200

// lastMsOf9999: later times print without their date.
const lastMsOf9999 = 253_402_300_799_999

func inspectCmd(args []string, stdin io.Reader, stdoutFile *os.File) ([]byte, error) {
	p, help, err := parse(args, inspectSpecs, inspectHelp)
	if help != nil || err != nil {
		return help, err
	}
	if len(p.pos) > 1 {
		return nil, usage("unexpected argument %q", p.pos[1])
	}
	maxSize, err := u64Flag(p, "max-size", format.DefaultMaxSize)
	if err != nil {
		return nil, err
	}
	var data []byte
	if len(p.pos) == 0 || p.pos[0] == "-" {
		data, err = io.ReadAll(stdin)
		if err != nil {
			return nil, &failure{2, fmt.Sprintf("cannot read stdin: %v", err)}
		}
	} else if data, err = os.ReadFile(p.pos[0]); err != nil {
		return nil, &failure{2, fmt.Sprintf("cannot read %s: %v", p.pos[0], unwrapPath(err))}
	}
	r, err := newReport(data, int(min(maxSize, 1<<62)))
	if err != nil {
		inv, _ := err.(*format.InvalidEntry)
		if inv == nil {
			return nil, &failure{1, "invalid entry: " + err.Error()}
		}
		return nil, &failure{1, fmt.Sprintf("invalid entry: %s: %s", inv.Kind, inv.Detail)}
	}
	if p.has("json") {
		return []byte(r.json()), nil
	}
	terminal := isTerminal(stdoutFile)
	cut := terminal && !p.has("full")
	out := []byte(r.human(cut))
	if p.has("body") {
		out = append(out, '\n')
		out = append(out, r.bodyOutput(terminal, cut)...)
	}
	return out, nil
}

func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

type report struct {
	h        *format.Header
	stored   int
	payload  []byte
	value    string
	response *format.Response
}

func newReport(data []byte, maxSize int) (*report, error) {
	h, payload, err := format.DecodePayload(data, maxSize)
	if err != nil {
		return nil, err
	}
	r := &report{h: h, stored: len(data), payload: payload}
	if h.Kind == format.KindResponse {
		r.response, err = format.DecodeResponse(payload)
	} else {
		r.value, err = format.DisplayPayload(h.Serializer, payload)
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

func timeText(ms uint64) string {
	if ms > lastMsOf9999 {
		return strconv.FormatUint(ms, 10)
	}
	t := time.UnixMilli(int64(ms)).UTC()
	return fmt.Sprintf("%d (%04d-%02d-%02dT%02d:%02d:%02d.%03dZ)", ms, t.Year(), t.Month(), t.Day(), t.Hour(),
		t.Minute(), t.Second(), ms%1000)
}

func cutText(text string, limit int) string {
	n := utf8.RuneCountInString(text)
	more := n - limit
	if more <= 0 {
		return text
	}
	i, count := 0, 0
	for i = range text {
		if count == limit {
			break
		}
		count++
	}
	word := "characters"
	if more == 1 {
		word = "character"
	}
	return fmt.Sprintf("%s… (%d more %s)", text[:i], more, word)
}

func (r *report) human(cut bool) string {
	h := r.h
	version := "(none)"
	if h.Version != nil {
		version = *h.Version
	}
	tags := "(none)"
	if len(h.Tags) > 0 {
		tags = strings.Join(h.Tags, ", ")
	}
	expires := "never"
	if h.ExpiresAt != 0 {
		expires = timeText(h.ExpiresAt)
	}
	lines := [][2]string{
		{"format", "1"}, {"kind", h.Kind.String()}, {"serializer", h.Serializer.String()},
		{"compressor", h.Compressor.String()}, {"created_at", timeText(h.CreatedAt)}, {"expires_at", expires},
		{"stale_ms", strconv.FormatUint(h.StaleMs, 10)}, {"version", version}, {"tags", tags},
		{"size", fmt.Sprintf("%d bytes stored, %d bytes payload", r.stored, len(r.payload))},
	}
	if r.response != nil {
		lines = append(lines, [2]string{"status", strconv.Itoa(r.response.Status)},
			[2]string{"encoding", r.response.ContentEncoding})
		for _, f := range r.response.Headers {
			lines = append(lines, [2]string{"header", format.BytesText(f.Name) + ": " + format.BytesText(f.Value)})
		}
		lines = append(lines, [2]string{"body", fmt.Sprintf("%d bytes", len(r.response.Body))})
	} else {
		lines = append(lines, [2]string{"value", r.value})
	}
	var b strings.Builder
	for _, l := range lines {
		text := l[1]
		if cut {
			text = cutText(text, cutAt)
		}
		fmt.Fprintf(&b, "%-12s %s\n", l[0]+":", text)
	}
	return b.String()
}

func (r *report) bodyOutput(terminal, cut bool) []byte {
	body := r.payload
	if r.response != nil {
		body = r.response.Body
	}
	if !terminal {
		return body
	}
	text := format.BytesText(body)
	if cut {
		text = cutText(text, cutAt)
	}
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	return []byte(text)
}

func (r *report) json() string {
	h := r.h
	b := []byte(`{"format":1,"kind":`)
	b = format.AppendJSONString(b, h.Kind.String())
	b = append(b, `,"serializer":`...)
	b = format.AppendJSONString(b, h.Serializer.String())
	b = append(b, `,"compressor":`...)
	b = format.AppendJSONString(b, h.Compressor.String())
	b = fmt.Appendf(b, `,"created_at":%d,"expires_at":%d,"stale_ms":%d,"version":`, h.CreatedAt, h.ExpiresAt, h.StaleMs)
	if h.Version == nil {
		b = append(b, "null"...)
	} else {
		b = format.AppendJSONString(b, *h.Version)
	}
	b = append(b, `,"tags":[`...)
	for i, t := range h.Tags {
		if i > 0 {
			b = append(b, ',')
		}
		b = format.AppendJSONString(b, t)
	}
	b = fmt.Appendf(b, `],"stored_bytes":%d,"payload_bytes":%d,"value":`, r.stored, len(r.payload))
	if r.response != nil {
		b = fmt.Appendf(b, `{"status":%d,"headers":[`, r.response.Status)
		for i, f := range r.response.Headers {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '[')
			b = format.AppendDisplayBytes(b, f.Name)
			b = append(b, ',')
			b = format.AppendDisplayBytes(b, f.Value)
			b = append(b, ']')
		}
		b = append(b, `],"content_encoding":`...)
		b = format.AppendJSONString(b, r.response.ContentEncoding)
		b = append(b, `,"body":`...)
		b = format.AppendDisplayBytes(b, r.response.Body)
		b = append(b, '}')
	} else {
		b = append(b, r.value...)
	}
	b = append(b, "}\n"...)
	return string(b)
}
