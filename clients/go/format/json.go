// JSON as larder reads and writes it (FORMAT.md §2, spec/CLI.md): a strict RFC 8259 parser that keeps map
// order and duplicate keys, tells integers (no fraction, no exponent) from floats, refuses lone surrogates and
// bounds nesting; and a compact writer whose strings and floats are written as every larder language writes
// them (Python's json.dumps with ensure_ascii=False, floats as Python's repr).
package format

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// BigInt is a JSON integer outside [-2^63, 2^64-1], kept as its text: MessagePack cannot hold it.
type BigInt string

// ParseJSON parses one JSON text strictly. Maps become *Map with every pair kept; when dedupe is true a key
// given twice keeps its last value at its first position (a map built from the document). Containers nested
// deeper than maxDepth are refused.
func ParseJSON(data []byte, dedupe bool, maxDepth int) (any, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("JSON text is not UTF-8")
	}
	p := jsonParser{s: data, dedupe: dedupe, maxDepth: maxDepth}
	p.ws()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.pos != len(p.s) {
		return nil, fmt.Errorf("extra data at offset %d", p.pos)
	}
	return v, nil
}

type jsonParser struct {
	s        []byte
	pos      int
	dedupe   bool
	maxDepth int
}

func (p *jsonParser) ws() {
	for p.pos < len(p.s) {
		switch p.s[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jsonParser) fail(what string) error {
	if p.pos >= len(p.s) {
		return fmt.Errorf("%s: unexpected end of JSON", what)
	}
	return fmt.Errorf("%s at offset %d", what, p.pos)
}

func (p *jsonParser) value(depth int) (any, error) {
	if p.pos >= len(p.s) {
		return nil, p.fail("expected a value")
	}
	switch c := p.s[p.pos]; {
	case c == '{':
		if depth >= p.maxDepth {
			return nil, fmt.Errorf("JSON nested more than %d levels deep", p.maxDepth)
		}
		return p.object(depth)
	case c == '[':
		if depth >= p.maxDepth {
			return nil, fmt.Errorf("JSON nested more than %d levels deep", p.maxDepth)
		}
		p.pos++
		out := []any{}
		p.ws()
		if p.pos < len(p.s) && p.s[p.pos] == ']' {
			p.pos++
			return out, nil
		}
		for {
			p.ws()
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
			p.ws()
			if p.pos < len(p.s) && p.s[p.pos] == ',' {
				p.pos++
				continue
			}
			if p.pos < len(p.s) && p.s[p.pos] == ']' {
				p.pos++
				return out, nil
			}
			return nil, p.fail("expected , or ]")
		}
	case c == '"':
		return p.str()
	case c == 't':
		return p.literal("true", true)
	case c == 'f':
		return p.literal("false", false)
	case c == 'n':
		return p.literal("null", nil)
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return nil, p.fail("expected a value")
}

func (p *jsonParser) literal(word string, v any) (any, error) {
	if strings.HasPrefix(string(p.s[p.pos:min(len(p.s), p.pos+len(word))]), word) {
		p.pos += len(word)
		return v, nil
	}
	return nil, p.fail("expected a value")
}

func (p *jsonParser) object(depth int) (any, error) {
	p.pos++
	m := &Map{}
	var index map[string]int
	if p.dedupe {
		index = map[string]int{}
	}
	p.ws()
	if p.pos < len(p.s) && p.s[p.pos] == '}' {
		p.pos++
		return m, nil
	}
	for {
		p.ws()
		if p.pos >= len(p.s) || p.s[p.pos] != '"' {
			return nil, p.fail("expected a string key")
		}
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		p.ws()
		if p.pos >= len(p.s) || p.s[p.pos] != ':' {
			return nil, p.fail("expected :")
		}
		p.pos++
		p.ws()
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		if index != nil {
			if i, ok := index[k]; ok {
				m.Pairs[i].Value = v
			} else {
				index[k] = len(m.Pairs)
				m.Pairs = append(m.Pairs, Pair{k, v})
			}
		} else {
			m.Pairs = append(m.Pairs, Pair{k, v})
		}
		p.ws()
		if p.pos < len(p.s) && p.s[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.pos < len(p.s) && p.s[p.pos] == '}' {
			p.pos++
			return m, nil
		}
		return nil, p.fail("expected , or }")
	}
}

func (p *jsonParser) str() (string, error) {
	p.pos++ // opening quote
	start := p.pos
	// Fast path: no escapes.
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		if c == '"' {
			out := string(p.s[start:p.pos])
			p.pos++
			return out, nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
		p.pos++
	}
	var b strings.Builder
	b.Write(p.s[start:p.pos])
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		switch {
		case c == '"':
			p.pos++
			return b.String(), nil
		case c < 0x20:
			return "", p.fail("control character in string")
		case c != '\\':
			b.WriteByte(c)
			p.pos++
			continue
		}
		p.pos++
		if p.pos >= len(p.s) {
			return "", p.fail("unterminated escape")
		}
		e := p.s[p.pos]
		p.pos++
		switch e {
		case '"', '\\', '/':
			b.WriteByte(e)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, err := p.hex4()
			if err != nil {
				return "", err
			}
			if utf16.IsSurrogate(r) {
				if r >= 0xDC00 || p.pos+6 > len(p.s) || p.s[p.pos] != '\\' || p.s[p.pos+1] != 'u' {
					return "", p.fail("lone surrogate escape")
				}
				p.pos += 2
				r2, err := p.hex4()
				if err != nil {
					return "", err
				}
				if r2 < 0xDC00 || r2 > 0xDFFF {
					return "", p.fail("lone surrogate escape")
				}
				r = utf16.DecodeRune(r, r2)
			}
			b.WriteRune(r)
		default:
			return "", p.fail("invalid escape")
		}
	}
	return "", p.fail("unterminated string")
}

func (p *jsonParser) hex4() (rune, error) {
	if p.pos+4 > len(p.s) {
		return 0, p.fail("short \\u escape")
	}
	v, err := strconv.ParseUint(string(p.s[p.pos:p.pos+4]), 16, 32)
	if err != nil {
		return 0, p.fail("invalid \\u escape")
	}
	p.pos += 4
	return rune(v), nil
}

func (p *jsonParser) number() (any, error) {
	start := p.pos
	isInt := true
	if p.s[p.pos] == '-' {
		p.pos++
	}
	digits := func() int {
		n := 0
		for p.pos < len(p.s) && p.s[p.pos] >= '0' && p.s[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	if p.pos < len(p.s) && p.s[p.pos] == '0' {
		p.pos++
	} else if digits() == 0 {
		return nil, p.fail("invalid number")
	}
	if p.pos < len(p.s) && p.s[p.pos] == '.' {
		p.pos++
		isInt = false
		if digits() == 0 {
			return nil, p.fail("invalid number")
		}
	}
	if p.pos < len(p.s) && (p.s[p.pos] == 'e' || p.s[p.pos] == 'E') {
		p.pos++
		isInt = false
		if p.pos < len(p.s) && (p.s[p.pos] == '+' || p.s[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return nil, p.fail("invalid number")
		}
	}
	text := string(p.s[start:p.pos])
	if isInt {
		if v, err := strconv.ParseInt(text, 10, 64); err == nil {
			return v, nil
		}
		if v, err := strconv.ParseUint(text, 10, 64); err == nil {
			return v, nil
		}
		return BigInt(text), nil
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return nil, p.fail("invalid number")
	}
	return f, nil
}

// AppendJSON writes value as compact JSON, map order kept. Floats must be finite; bytes and ext values
// cannot be JSON; map keys must be strings.
func AppendJSON(b []byte, value any) ([]byte, error) {
	return appendJSON(b, value, 0)
}

func appendJSON(b []byte, value any, level int) ([]byte, error) {
	switch v := value.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int8:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int16:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int32:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case uint:
		return strconv.AppendUint(b, uint64(v), 10), nil
	case uint8:
		return strconv.AppendUint(b, uint64(v), 10), nil
	case uint16:
		return strconv.AppendUint(b, uint64(v), 10), nil
	case uint32:
		return strconv.AppendUint(b, uint64(v), 10), nil
	case uint64:
		return strconv.AppendUint(b, v, 10), nil
	case BigInt:
		return append(b, v...), nil
	case float32:
		return appendJSON(b, float64(v), level)
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return b, fmt.Errorf("JSON cannot hold the float %v", v)
		}
		return AppendFloatRepr(b, v), nil
	case string:
		return AppendJSONString(b, v), nil
	case []any:
		if level >= MaxNesting {
			return b, errTooDeep
		}
		b = append(b, '[')
		var err error
		for i, item := range v {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendJSON(b, item, level+1); err != nil {
				return b, err
			}
		}
		return append(b, ']'), nil
	case []string:
		items := make([]any, len(v))
		for i, s := range v {
			items[i] = s
		}
		return appendJSON(b, items, level)
	case *Map:
		if v == nil {
			return append(b, "null"...), nil
		}
		return appendJSONPairs(b, v.Pairs, level)
	case Map:
		return appendJSONPairs(b, v.Pairs, level)
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		pairs := make([]Pair, len(keys))
		for i, k := range keys {
			pairs[i] = Pair{k, v[k]}
		}
		return appendJSONPairs(b, pairs, level)
	}
	return b, fmt.Errorf("JSON cannot hold a %T", value)
}

func appendJSONPairs(b []byte, pairs []Pair, level int) ([]byte, error) {
	if level >= MaxNesting {
		return b, errTooDeep
	}
	b = append(b, '{')
	var err error
	for i, p := range pairs {
		if i > 0 {
			b = append(b, ',')
		}
		k, ok := p.Key.(string)
		if !ok {
			return b, fmt.Errorf("JSON map keys are strings, not %T", p.Key)
		}
		b = AppendJSONString(b, k)
		b = append(b, ':')
		if b, err = appendJSON(b, p.Value, level+1); err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}

const hexDigits = "0123456789abcdef"

// AppendJSONString writes s as a JSON string: `"` and `\` escaped, \b \f \n \r \t in short form, other
// characters below U+0020 as \u00xx, everything else as itself.
func AppendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"':
			b = append(b, '\\', '"')
		case '\\':
			b = append(b, '\\', '\\')
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendFloatRepr writes f as Python's repr does: the shortest digits that read back to f, positional with at
// least one digit after the point when the decimal exponent is from -4 to 15, else scientific (1e+16, 1.5e-07).
func AppendFloatRepr(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, 1):
		return append(b, "Infinity"...)
	case math.IsInf(f, -1):
		return append(b, "-Infinity"...)
	}
	sci := strconv.AppendFloat(nil, f, 'e', -1, 64)
	epos := strings.IndexByte(string(sci), 'e')
	exp, _ := strconv.Atoi(string(sci[epos+1:]))
	if exp < -4 || exp > 15 {
		return append(b, sci...)
	}
	mant := sci[:epos]
	neg := false
	if mant[0] == '-' {
		neg = true
		mant = mant[1:]
	}
	digits := make([]byte, 0, len(mant))
	for _, c := range mant {
		if c != '.' {
			digits = append(digits, c)
		}
	}
	if neg {
		b = append(b, '-')
	}
	if exp < 0 {
		b = append(b, '0', '.')
		for i := 0; i < -exp-1; i++ {
			b = append(b, '0')
		}
		return append(b, digits...)
	}
	intLen := exp + 1
	if len(digits) <= intLen {
		b = append(b, digits...)
		for i := len(digits); i < intLen; i++ {
			b = append(b, '0')
		}
		return append(b, '.', '0')
	}
	b = append(b, digits[:intLen]...)
	b = append(b, '.')
	return append(b, digits[intLen:]...)
}
