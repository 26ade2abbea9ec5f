// entries.json and invalid.json (spec/vectors/README.md): decoding gives the header and value; encoding with
// the case's options gives an entry that decodes the same, byte-identical when uncompressed; invalid entries
// fail with the expected error kind.
package conformance

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"

	"github.com/larder-cache/larder/clients/go/format"
)

type entryOptions struct {
	Serializer string   `json:"serializer"`
	Compressor string   `json:"compressor"`
	Threshold  int      `json:"threshold"`
	Level      *int     `json:"level"`
	CreatedAt  uint64   `json:"created_at"`
	ExpiresAt  uint64   `json:"expires_at"`
	StaleMs    uint64   `json:"stale_ms"`
	Version    *string  `json:"version"`
	Tags       []string `json:"tags"`
}

type entryCase struct {
	Name             string          `json:"name"`
	Kind             string          `json:"kind"`
	Value            json.RawMessage `json:"value"`
	ValueText        *string         `json:"value_text"`
	ValueBase64      *string         `json:"value_base64"`
	Response         *responseDoc    `json:"response"`
	Options          entryOptions    `json:"options"`
	EntryHex         string          `json:"entry_hex"`
	StoredCompressor string          `json:"stored_compressor"`
	DecodeOnly       bool            `json:"decode_only"`
}

type responseDoc struct {
	Status          int                  `json:"status"`
	Headers         [][2]json.RawMessage `json:"headers"`
	BodyBase64      string               `json:"body_base64"`
	ContentEncoding string               `json:"content_encoding"`
}

func entriesCases(data []byte) ([]Case, error) {
	var doc struct {
		Cases []entryCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Cases == nil {
		return nil, errors.New("no cases")
	}
	out := make([]Case, 0, len(doc.Cases))
	for _, c := range doc.Cases {
		out = append(out, Case{c.Name, func() error { return checkEntry(c) }})
	}
	return out, nil
}

// stringOrBase64 reads a header name or value: a string, or {"$base64": "…"}.
func stringOrBase64(raw json.RawMessage) ([]byte, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return []byte(s), nil
	}
	var b struct {
		B64 string `json:"$base64"`
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(b.B64)
}

func (d *responseDoc) response() (*format.Response, error) {
	r := &format.Response{Status: d.Status, ContentEncoding: d.ContentEncoding}
	for _, h := range d.Headers {
		name, err := stringOrBase64(h[0])
		if err != nil {
			return nil, err
		}
		value, err := stringOrBase64(h[1])
		if err != nil {
			return nil, err
		}
		r.Headers = append(r.Headers, format.Field{Name: name, Value: value})
	}
	body, err := base64.StdEncoding.DecodeString(d.BodyBase64)
	if err != nil {
		return nil, err
	}
	r.Body = body
	return r, nil
}

// expectedValue is the case's value in the value model.
func (c *entryCase) expectedValue() (any, error) {
	switch c.Options.Serializer {
	case "text":
		if c.ValueText == nil {
			return nil, errors.New("no value_text")
		}
		return *c.ValueText, nil
	case "raw":
		if c.ValueBase64 == nil {
			return nil, errors.New("no value_base64")
		}
		return base64.StdEncoding.DecodeString(*c.ValueBase64)
	}
	return format.ParseJSON(c.Value, true, 10000)
}

func checkEntry(c entryCase) error {
	raw, err := hex.DecodeString(c.EntryHex)
	if err != nil {
		return err
	}
	if err := checkDecoded(&c, raw); err != nil {
		return fmt.Errorf("decoding entry_hex: %w", err)
	}
	if c.DecodeOnly {
		return nil
	}
	o := format.Options{Threshold: c.Options.Threshold, Level: c.Options.Level, CreatedAt: format.Uint64(c.Options.CreatedAt),
		ExpiresAt: c.Options.ExpiresAt, StaleMs: c.Options.StaleMs, Version: c.Options.Version, Tags: c.Options.Tags}
	if o.Serializer, err = format.ParseSerializer(c.Options.Serializer); err != nil {
		return err
	}
	if o.Compressor, err = format.ParseCompressor(c.Options.Compressor); err != nil {
		return err
	}
	var encoded []byte
	if c.Kind == "response" {
		r, err := c.Response.response()
		if err != nil {
			return err
		}
		encoded, err = format.EncodeResponse(r, o)
		if err != nil {
			return fmt.Errorf("encoding: %w", err)
		}
	} else {
		v, err := c.expectedValue()
		if err != nil {
			return err
		}
		if encoded, err = format.Encode(v, o); err != nil {
			return fmt.Errorf("encoding: %w", err)
		}
	}
	if err := checkDecoded(&c, encoded); err != nil {
		return fmt.Errorf("decoding the Go encoding: %w", err)
	}
	if c.StoredCompressor == "none" && !bytes.Equal(encoded, raw) {
		return fmt.Errorf("encoded bytes differ: %x", encoded)
	}
	return nil
}

func checkDecoded(c *entryCase, raw []byte) error {
	e, err := format.Decode(raw, format.DefaultMaxSize)
	if err != nil {
		return err
	}
	o := c.Options
	if e.Kind.String() != c.Kind || e.Serializer.String() != o.Serializer || e.Compressor.String() != c.StoredCompressor {
		return fmt.Errorf("header kind/serializer/compressor %s/%s/%s", e.Kind, e.Serializer, e.Compressor)
	}
	if e.CreatedAt != o.CreatedAt || e.ExpiresAt != o.ExpiresAt || e.StaleMs != o.StaleMs {
		return fmt.Errorf("times %d/%d/%d", e.CreatedAt, e.ExpiresAt, e.StaleMs)
	}
	if (e.Version == nil) != (o.Version == nil) || (e.Version != nil && *e.Version != *o.Version) {
		return fmt.Errorf("version %v", e.Version)
	}
	if len(e.Tags) != len(o.Tags) || (len(o.Tags) > 0 && !reflect.DeepEqual(e.Tags, o.Tags)) {
		return fmt.Errorf("tags %v", e.Tags)
	}
	if c.Kind == "response" {
		want, err := c.Response.response()
		if err != nil {
			return err
		}
		got := e.Response
		if got.Status != want.Status || got.ContentEncoding != want.ContentEncoding || !bytes.Equal(got.Body, want.Body) ||
			len(got.Headers) != len(want.Headers) {
			return fmt.Errorf("response differs: %+v", got)
		}
		for i := range got.Headers {
			if !bytes.Equal(got.Headers[i].Name, want.Headers[i].Name) || !bytes.Equal(got.Headers[i].Value, want.Headers[i].Value) {
				return fmt.Errorf("header %d differs", i)
			}
		}
		return nil
	}
	want, err := c.expectedValue()
	if err != nil {
		return err
	}
	if !SameJSON(e.Value, want) {
		return fmt.Errorf("value differs: %#v", e.Value)
	}
	return nil
}

// SameJSON compares two values of the value model strictly: integers equal as integers, floats bit for bit,
// maps pair by pair in order, bytes by content.
func SameJSON(a, b any) bool {
	switch bv := b.(type) {
	case nil:
		return a == nil
	case bool:
		av, ok := a.(bool)
		return ok && av == bv
	case int64, uint64:
		return intOf(a) == intOf(b) && intOf(a) != ""
	case float64:
		av, ok := a.(float64)
		return ok && math.Float64bits(av) == math.Float64bits(bv)
	case string:
		av, ok := a.(string)
		return ok && av == bv
	case []byte:
		av, ok := a.([]byte)
		return ok && bytes.Equal(av, bv)
	case []any:
		av, ok := a.([]any)
		if !ok || len(av) != len(bv) {
			return false
		}
		for i := range av {
			if !SameJSON(av[i], bv[i]) {
				return false
			}
		}
		return true
	case *format.Map:
		av, ok := a.(*format.Map)
		if !ok || av.Len() != bv.Len() {
			return false
		}
		for i := range av.Pairs {
			if !SameJSON(av.Pairs[i].Key, bv.Pairs[i].Key) || !SameJSON(av.Pairs[i].Value, bv.Pairs[i].Value) {
				return false
			}
		}
		return true
	case format.Ext:
		av, ok := a.(format.Ext)
		return ok && av.Type == bv.Type && bytes.Equal(av.Data, bv.Data)
	}
	return false
}

func intOf(v any) string {
	switch x := v.(type) {
	case int64:
		return fmt.Sprint(x)
	case uint64:
		return fmt.Sprint(x)
	}
	return ""
}

type invalidCase struct {
	Name     string `json:"name"`
	EntryHex string `json:"entry_hex"`
	Error    string `json:"error"`
	MaxSize  *int   `json:"max_size"`
}

func invalidCases(data []byte) ([]Case, error) {
	var doc struct {
		Cases []invalidCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Cases == nil {
		return nil, errors.New("no cases")
	}
	out := make([]Case, 0, len(doc.Cases))
	for _, c := range doc.Cases {
		out = append(out, Case{c.Name, func() error {
			raw, err := hex.DecodeString(c.EntryHex)
			if err != nil {
				return err
			}
			maxSize := format.DefaultMaxSize
			if c.MaxSize != nil {
				maxSize = *c.MaxSize
			}
			_, err = format.Decode(raw, maxSize)
			if err == nil {
				return errors.New("decoded without error")
			}
			return check(string(format.KindOf(err)) == c.Error, "got %v, expected %s", err, c.Error)
		}})
	}
	return out, nil
}
