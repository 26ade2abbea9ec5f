// RFC 8941 Structured Field Dictionaries, the syntax of targeted cache fields such as CDN-Cache-Control
// (RFC 9213, spec/HTTP.md §1.4.2): a strict parser of the version RFC 9213 is defined on (no Date or Display
// String items). Parameters are parsed (a syntax error in one fails the field) and dropped. A repeated key
// keeps its last value.
package httprules

import (
	"encoding/base64"
	"errors"
	"strings"
)

var errField = errors.New("not an RFC 8941 dictionary")

// sfToken, sfDecimal, sfBytes and sfInnerList are the item types no directive takes; only their type matters.
type (
	sfToken     string
	sfDecimal   string
	sfBytes     []byte
	sfInnerList []any
)

// parseDictionary returns the members in order of first appearance (values: int64, bool, string, sfToken,
// sfDecimal, sfBytes, sfInnerList).
func parseDictionary(text string) (keys []string, values map[string]any, err error) {
	for i := 0; i < len(text); i++ {
		if c := text[i]; !((c >= ' ' && c <= '~') || c == '\t') {
			return nil, nil, errField
		}
	}
	p := &sfParser{s: text}
	values = map[string]any{}
	p.skip(" ")
	for p.at < len(p.s) {
		key, err := p.key()
		if err != nil {
			return nil, nil, err
		}
		var value any = true
		if p.peek() == '=' {
			p.at++
			if value, err = p.itemOrInnerList(); err != nil {
				return nil, nil, err
			}
		} else if err := p.parameters(); err != nil {
			return nil, nil, err
		}
		if _, ok := values[key]; !ok {
			keys = append(keys, key)
		}
		values[key] = value
		p.skip(" \t")
		if p.at >= len(p.s) {
			break
		}
		if p.peek() != ',' {
			return nil, nil, errField
		}
		p.at++
		p.skip(" \t")
		if p.at >= len(p.s) {
			return nil, nil, errField
		}
	}
	return keys, values, nil
}

type sfParser struct {
	s  string
	at int
}

func (p *sfParser) peek() byte {
	if p.at < len(p.s) {
		return p.s[p.at]
	}
	return 0
}

func (p *sfParser) skip(chars string) {
	for p.at < len(p.s) && strings.IndexByte(chars, p.s[p.at]) >= 0 {
		p.at++
	}
}

func isLower(c byte) bool { return c >= 'a' && c <= 'z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isAlpha(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

func (p *sfParser) key() (string, error) {
	start := p.at
	if c := p.peek(); !(isLower(c) || c == '*') {
		return "", errField
	}
	p.at++
	for p.at < len(p.s) {
		c := p.s[p.at]
		if isLower(c) || isDigit(c) || c == '_' || c == '-' || c == '.' || c == '*' {
			p.at++
			continue
		}
		break
	}
	return p.s[start:p.at], nil
}

func (p *sfParser) itemOrInnerList() (any, error) {
	if p.peek() != '(' {
		v, err := p.bareItem()
		if err != nil {
			return nil, err
		}
		return v, p.parameters()
	}
	p.at++
	items := sfInnerList{}
	for {
		p.skip(" ")
		if p.peek() == ')' {
			p.at++
			return items, p.parameters()
		}
		v, err := p.bareItem()
		if err != nil {
			return nil, err
		}
		items = append(items, v)
		if err := p.parameters(); err != nil {
			return nil, err
		}
		if c := p.peek(); c != ' ' && c != ')' {
			return nil, errField
		}
	}
}

func (p *sfParser) parameters() error {
	for p.peek() == ';' {
		p.at++
		p.skip(" ")
		if _, err := p.key(); err != nil {
			return err
		}
		if p.peek() == '=' {
			p.at++
			if _, err := p.bareItem(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (p *sfParser) bareItem() (any, error) {
	c := p.peek()
	switch {
	case c == '-' || isDigit(c):
		return p.number()
	case c == '"':
		return p.str()
	case c == ':':
		return p.byteSequence()
	case c == '?':
		if p.at+1 < len(p.s) && (p.s[p.at+1] == '0' || p.s[p.at+1] == '1') {
			v := p.s[p.at+1] == '1'
			p.at += 2
			return v, nil
		}
		return nil, errField
	case isAlpha(c) || c == '*':
		start := p.at
		p.at++
		for p.at < len(p.s) {
			c := p.s[p.at]
			if isAlpha(c) || isDigit(c) || strings.IndexByte("!#$%&'*+-.^_`|~:/", c) >= 0 {
				p.at++
				continue
			}
			break
		}
		return sfToken(p.s[start:p.at]), nil
	}
	return nil, errField
}

func (p *sfParser) number() (any, error) {
	start := p.at
	if p.peek() == '-' {
		p.at++
	}
	ws := p.at
	for p.at < len(p.s) && isDigit(p.s[p.at]) {
		p.at++
	}
	whole := p.at - ws
	if whole == 0 {
		return nil, errField
	}
	if p.peek() != '.' {
		if whole > 15 {
			return nil, errField
		}
		var v int64
		for _, c := range p.s[ws:p.at] {
			v = v*10 + int64(c-'0')
		}
		if p.s[start] == '-' {
			v = -v
		}
		return v, nil
	}
	p.at++
	fs := p.at
	for p.at < len(p.s) && isDigit(p.s[p.at]) {
		p.at++
	}
	frac := p.at - fs
	if whole > 12 || frac < 1 || frac > 3 {
		return nil, errField
	}
	return sfDecimal(p.s[start:p.at]), nil
}

func (p *sfParser) str() (any, error) {
	p.at++
	var b strings.Builder
	for p.at < len(p.s) {
		c := p.s[p.at]
		p.at++
		switch c {
		case '\\':
			e := p.peek()
			if e != '"' && e != '\\' {
				return nil, errField
			}
			b.WriteByte(e)
			p.at++
		case '"':
			return b.String(), nil
		case '\t':
			return nil, errField
		default:
			b.WriteByte(c)
		}
	}
	return nil, errField
}

func (p *sfParser) byteSequence() (any, error) {
	end := strings.IndexByte(p.s[p.at+1:], ':')
	if end < 0 {
		return nil, errField
	}
	content := p.s[p.at+1 : p.at+1+end]
	for i := 0; i < len(content); i++ {
		c := content[i]
		if !(isAlpha(c) || isDigit(c) || c == '+' || c == '/' || c == '=') {
			return nil, errField
		}
	}
	p.at += end + 2
	data := strings.TrimRight(content, "=")
	padding := len(content) - len(data)
	need := (4 - len(data)%4) % 4
	if strings.Contains(data, "=") || len(data)%4 == 1 || padding > need {
		return nil, errField
	}
	out, err := base64.RawStdEncoding.DecodeString(data)
	if err != nil {
		return nil, errField
	}
	return sfBytes(out), nil
}
