// `encode`: reads stdin (text, bytes or one JSON document, by serializer) and writes the entry to stdout.
package cli

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/larder-cache/larder/clients/go/format"
)

const encodeHelp = `usage: larder-go encode [--serializer {raw,msgpack,json,text}]
                        [--compressor {none,lz4,snappy,zstd,brotli,gzip}]
                        [--ttl SECS] [--stale SECS] [--created-at MS] [--version V]
                        [--tag T] [--threshold BYTES] [--level N]
                        [--kind {value,response}] [--json-input]

Encode stdin as a larder entry, written to stdout. With --serializer text, stdin's text (UTF-8) is stored
verbatim, a trailing newline included; with raw, stdin's bytes. With msgpack or json, stdin is one JSON
document; with --kind response it is {"status": 200, "headers": [["name", "value"], ...], "body": "...",
"content_encoding": "identity"}.

options:
  --serializer {raw,msgpack,json,text}             how the value is serialized (default msgpack)
  --compressor {none,lz4,snappy,zstd,brotli,gzip}  compressor to try (default lz4)
  --ttl SECS           seconds until expiry (0 = never)
  --stale SECS         stale window in seconds
  --created-at MS      creation time in ms (default: now)
  --version V          version string
  --tag T              a tag; repeatable
  --threshold BYTES    compress only payloads this long (default 1024)
  --level N            compression level (codec's default if absent)
  --kind {value,response}  what the document is (default value)
  --json-input         read stdin as a JSON document with text and raw too: a JSON string, or for raw
                       {"$base64": "..."}
`

const notUTF8Text = "stdin is not UTF-8 text (--serializer text); use --serializer raw for other bytes"

var encodeSpecs = map[string]flagSpec{
	"serializer": {value: true, choices: []string{"raw", "msgpack", "json", "text"}},
	"compressor": {value: true, choices: []string{"none", "lz4", "snappy", "zstd", "brotli", "gzip"}},
	"ttl":        {value: true}, "stale": {value: true}, "created-at": {value: true}, "version": {value: true},
	"tag": {value: true, repeat: true}, "threshold": {value: true}, "level": {value: true},
	"kind":       {value: true, choices: []string{"value", "response"}},
	"json-input": {},
}

func encodeCmd(args []string, stdin io.Reader) ([]byte, error) {
	p, help, err := parse(args, encodeSpecs, encodeHelp)
	if help != nil || err != nil {
		return help, err
	}
	if len(p.pos) > 0 {
		return nil, usage("unexpected argument %q", p.pos[0])
	}
	o := format.DefaultOptions()
	serializer := "msgpack"
	if v, ok := p.get("serializer"); ok {
		serializer = v
	}
	o.Serializer, _ = format.ParseSerializer(serializer)
	if v, ok := p.get("compressor"); ok {
		o.Compressor, _ = format.ParseCompressor(v)
	}
	ttl, err := u64Flag(p, "ttl", 0)
	if err != nil {
		return nil, err
	}
	stale, err := u64Flag(p, "stale", 0)
	if err != nil {
		return nil, err
	}
	threshold, err := u64Flag(p, "threshold", format.DefaultThreshold)
	if err != nil {
		return nil, err
	}
	o.Threshold = int(min(threshold, math.MaxInt32))
	if p.has("created-at") {
		c, err := u64Flag(p, "created-at", 0)
		if err != nil {
			return nil, err
		}
		o.CreatedAt = &c
	} else {
		o.CreatedAt = format.Uint64(format.NowMs())
	}
	if v, ok := p.get("level"); ok {
		n, err := strconv.ParseInt(strings.TrimPrefix(v, "+"), 10, 32)
		if err != nil || strings.HasPrefix(v, "+-") || strings.HasPrefix(v, "++") {
			return nil, usage("invalid value %q for '--level': expected a 32-bit integer", v)
		}
		o.Level = format.Int(int(n))
	}
	o.TTLMs = sat(ttl)
	o.StaleMs = sat(stale)
	if v, ok := p.get("version"); ok {
		o.Version = &v
	}
	o.Tags = p.opts["tag"]
	data, err := io.ReadAll(stdin)
	if err != nil {
		return nil, &failure{2, fmt.Sprintf("cannot read stdin: %v", err)}
	}
	kind, _ := p.get("kind")
	if kind == "response" {
		if serializer != "msgpack" {
			return nil, &failure{2, "--kind response needs --serializer msgpack"}
		}
		doc, err := jsonDocument(data)
		if err != nil {
			return nil, err
		}
		r, err := responseFromJSON(doc)
		if err != nil {
			return nil, err
		}
		out, err := format.EncodeResponse(r, o)
		if err != nil {
			return nil, &failure{2, "cannot encode: " + err.Error()}
		}
		return out, nil
	}
	var value any
	switch {
	case serializer == "raw" && !p.has("json-input"):
		value = data
	case serializer == "text" && !p.has("json-input"):
		if !utf8.Valid(data) {
			return nil, &failure{2, notUTF8Text}
		}
		value = string(data)
	default:
		doc, err := jsonDocument(data)
		if err != nil {
			return nil, err
		}
		switch serializer {
		case "text":
			s, ok := doc.(string)
			if !ok {
				return nil, &failure{2, "--serializer text --json-input needs a JSON string on stdin"}
			}
			value = s
		case "raw":
			b, err := bytesFromJSON(doc, `--serializer raw --json-input needs a JSON string or {"$base64": ...}`)
			if err != nil {
				return nil, err
			}
			value = b
		default:
			value = doc
		}
	}
	out, err := format.Encode(value, o)
	if err != nil {
		return nil, &failure{2, "cannot encode: " + err.Error()}
	}
	return out, nil
}

// sat is secs × 1000, saturating at 2^64-1.
func sat(secs uint64) uint64 {
	if secs > math.MaxUint64/1000 {
		return math.MaxUint64
	}
	return secs * 1000
}

// jsonDocument reads one JSON document (duplicate keys: the last value at the first position) and applies the
// nesting limit to what is kept.
func jsonDocument(data []byte) (any, error) {
	v, err := format.ParseJSON(data, true, 1000)
	if err != nil {
		return nil, &failure{2, "stdin is not a JSON document: " + err.Error()}
	}
	if _, err := format.DisplayJSON(v, -1); err != nil {
		return nil, &failure{2, fmt.Sprintf("cannot encode: value nested more than %d levels deep", format.MaxNesting)}
	}
	return v, nil
}

func bytesFromJSON(v any, what string) ([]byte, error) {
	switch x := v.(type) {
	case string:
		return []byte(x), nil
	case *format.Map:
		if x.Len() == 1 {
			if k, ok := x.Pairs[0].Key.(string); ok && k == "$base64" {
				if text, ok := x.Pairs[0].Value.(string); ok {
					data, err := base64.StdEncoding.Strict().DecodeString(text)
					if err != nil {
						return nil, &failure{2, "bad base64: " + err.Error()}
					}
					if base64.StdEncoding.EncodeToString(data) != text {
						return nil, &failure{2, "bad base64: not in canonical padded form"}
					}
					return data, nil
				}
			}
		}
	}
	return nil, &failure{2, what}
}

func responseFromJSON(doc any) (*format.Response, error) {
	m, ok := doc.(*format.Map)
	var status int64
	if ok {
		s, found := m.Get("status")
		switch n := s.(type) {
		case int64:
			status = n
		case uint64:
			status = math.MaxInt64
		default:
			found = false
		}
		ok = found
	}
	if !ok {
		return nil, &failure{2, `a response document needs an integer "status"`}
	}
	r := &format.Response{}
	if status < 100 || status > 999 {
		return nil, &failure{2, fmt.Sprintf("status %d is outside 100-999", status)}
	}
	r.Status = int(status)
	if h, found := m.Get("headers"); found {
		list, ok := h.([]any)
		if !ok {
			return nil, &failure{2, `"headers" must be a list of [name, value]`}
		}
		for _, item := range list {
			pair, ok := item.([]any)
			if !ok || len(pair) != 2 {
				return nil, &failure{2, "each header must be a [name, value] pair"}
			}
			name, err := bytesFromJSON(pair[0], "a header name must be a string")
			if err != nil {
				return nil, err
			}
			value, err := bytesFromJSON(pair[1], "a header value must be a string")
			if err != nil {
				return nil, err
			}
			r.Headers = append(r.Headers, format.Field{Name: name, Value: value})
		}
	}
	r.Body = []byte{}
	if b, found := m.Get("body"); found {
		body, err := bytesFromJSON(b, `"body" must be a string or {"$base64": ...}`)
		if err != nil {
			return nil, err
		}
		r.Body = body
	}
	r.ContentEncoding = "identity"
	if e, found := m.Get("content_encoding"); found {
		s, ok := e.(string)
		if !ok {
			return nil, &failure{2, `"content_encoding" must be a string`}
		}
		canonical := s
		if isASCII(s) {
			canonical = strings.ToLower(s)
		}
		if !contains(format.ContentEncodings, canonical) {
			return nil, &failure{2, fmt.Sprintf("unknown content encoding %q (expected identity, gzip, br or zstd)", s)}
		}
		r.ContentEncoding = canonical
	}
	return r, nil
}

func isASCII(s string) bool {
	return bytes.IndexFunc([]byte(s), func(r rune) bool { return r > 127 }) < 0
}
