// Display JSON (spec/CLI.md): how a decoded value is written, the same in every language, so that `inspect`
// outputs compare byte for byte. Compact; non-ASCII as itself; floats as Python's repr; bytes as a string when
// UTF-8, else {"$base64":…}; ext as {"$ext":t,"$base64":…}; maps keep order and duplicates, a key that is not
// a string written as its own display JSON, quoted. Depth (100) and length are bounded, so a few hundred
// hostile bytes cannot ask for gigabytes of text.
package format

import (
	"encoding/base64"
	"errors"
	"strconv"
	"unicode/utf8"
)

var errDisplayLarge = errors.New("too large")

// DisplayLimit is the longest display `inspect` writes for a payload: 16 characters per byte plus 1 MiB.
func DisplayLimit(payloadLen int) int { return 16*payloadLen + 1<<20 }

// DisplayJSON writes value's display JSON, refusing (bad_value) a value nested more than MaxNesting deep and
// (too_large) a display longer than limit characters (limit < 0: no limit).
func DisplayJSON(value any, limit int) (string, error) {
	if nestsDeeper(value, 0) {
		return "", invalid(BadValue, "value nested more than %d levels deep", MaxNesting)
	}
	w := displayWriter{byteLimit: -1}
	if limit >= 0 {
		w.byteLimit = 4 * limit
	}
	if err := w.value(value); err != nil {
		return "", invalid(TooLarge, "the value's display JSON would exceed %d characters", limit)
	}
	if limit >= 0 && utf8.RuneCount(w.b) > limit {
		return "", invalid(TooLarge, "the value's display JSON would exceed %d characters", limit)
	}
	return string(w.b), nil
}

func nestsDeeper(v any, level int) bool {
	switch x := v.(type) {
	case []any:
		if level >= MaxNesting {
			return true
		}
		for _, item := range x {
			if nestsDeeper(item, level+1) {
				return true
			}
		}
	case *Map:
		if level >= MaxNesting {
			return true
		}
		for _, p := range x.Pairs {
			if nestsDeeper(p.Key, level+1) || nestsDeeper(p.Value, level+1) {
				return true
			}
		}
	}
	return false
}

type displayWriter struct {
	b         []byte
	byteLimit int
}

func (w *displayWriter) check() error {
	if w.byteLimit >= 0 && len(w.b) > w.byteLimit {
		return errDisplayLarge
	}
	return nil
}

func (w *displayWriter) value(v any) error {
	switch x := v.(type) {
	case []any:
		w.b = append(w.b, '[')
		for i, item := range x {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			if err := w.value(item); err != nil {
				return err
			}
		}
		w.b = append(w.b, ']')
		return w.check()
	case *Map:
		w.b = append(w.b, '{')
		for i, p := range x.Pairs {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			if err := w.key(p.Key); err != nil {
				return err
			}
			w.b = append(w.b, ':')
			if err := w.value(p.Value); err != nil {
				return err
			}
		}
		w.b = append(w.b, '}')
		return w.check()
	}
	w.b = AppendDisplayScalar(w.b, v)
	return w.check()
}

func (w *displayWriter) key(k any) error {
	switch x := k.(type) {
	case string:
		w.b = AppendJSONString(w.b, x)
		return w.check()
	case []byte:
		if utf8.Valid(x) {
			w.b = AppendJSONString(w.b, string(x))
			return w.check()
		}
	}
	inner := displayWriter{byteLimit: w.byteLimit}
	if err := inner.value(k); err != nil {
		return err
	}
	w.b = AppendJSONString(w.b, string(inner.b))
	return w.check()
}

// AppendDisplayScalar writes the display JSON of a value that is not an array or a map.
func AppendDisplayScalar(b []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		return strconv.AppendBool(b, x)
	case int64:
		return strconv.AppendInt(b, x, 10)
	case uint64:
		return strconv.AppendUint(b, x, 10)
	case int:
		return strconv.AppendInt(b, int64(x), 10)
	case BigInt:
		return append(b, x...)
	case float64:
		return AppendFloatRepr(b, x)
	case string:
		return AppendJSONString(b, x)
	case []byte:
		return AppendDisplayBytes(b, x)
	case Ext:
		b = append(b, `{"$ext":`...)
		b = strconv.AppendInt(b, int64(x.Type), 10)
		b = append(b, `,"$base64":"`...)
		b = base64.StdEncoding.AppendEncode(b, x.Data)
		return append(b, `"}`...)
	}
	return append(b, "null"...)
}

// AppendDisplayBytes writes bytes as a JSON string when they are UTF-8, else as {"$base64":"…"}.
func AppendDisplayBytes(b []byte, data []byte) []byte {
	if utf8.Valid(data) {
		return AppendJSONString(b, string(data))
	}
	b = append(b, `{"$base64":"`...)
	b = base64.StdEncoding.AppendEncode(b, data)
	return append(b, `"}`...)
}

// BytesText is bytes as a human-form line shows them: the text, unquoted, when UTF-8, else {"$base64":"…"}.
func BytesText(data []byte) string {
	if utf8.Valid(data) {
		return string(data)
	}
	return `{"$base64":"` + base64.StdEncoding.EncodeToString(data) + `"}`
}

// DisplayPayload is the display JSON of a value payload as `inspect` shows it: msgpack read leniently (a str
// that is not UTF-8 shows as bytes), JSON with duplicate keys kept, text quoted, raw as bytes.
func DisplayPayload(s Serializer, payload []byte) (string, error) {
	limit := DisplayLimit(len(payload))
	switch s {
	case Msgpack:
		r := mpReader{data: payload, lenient: true}
		v, err := r.value(0)
		if err != nil {
			return "", err
		}
		if r.pos != len(payload) {
			return "", invalid(BadValue, "msgpack: %d bytes after the value", len(payload)-r.pos)
		}
		return DisplayJSON(v, limit)
	case JSON:
		v, err := ParseJSON(payload, false, MaxNesting)
		if err != nil {
			return "", invalid(BadValue, "json: %v", err)
		}
		return DisplayJSON(v, limit)
	case Text:
		if !utf8.Valid(payload) {
			return "", invalid(BadValue, "text is not UTF-8")
		}
		return string(AppendJSONString(nil, string(payload))), nil
	}
	return string(AppendDisplayBytes(nil, payload)), nil
}
