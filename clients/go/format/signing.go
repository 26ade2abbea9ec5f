// Signed ext values (FORMAT.md §2): ext 80 (a pickle) and 101 (a Marshal dump) carry an HMAC-SHA256 so that the
// one language that interprets them only does so for bytes its own application signed. Go never interprets
// either; it signs and verifies them so that it can check, copy and test what other languages write.
package format

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
)

// Ext types reserved for other languages' values.
const (
	PickleExt  = 80
	MarshalExt = 101
)

const signingKeyMessage = "larder.signed-ext.v1"

// ErrRefused: signed ext data that does not verify (short, another scheme, or a mac that does not match).
var ErrRefused = errors.New("signed ext refused")

// SigningKey derives the signing key from an application's secret.
func SigningKey(secret string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(signingKeyMessage))
	return m.Sum(nil)
}

// Signer signs with the current secret and verifies with it or any fallback.
type Signer struct {
	keys [][]byte
}

// NewSigner takes the current secret first, then older ones that are still accepted.
func NewSigner(secret string, fallbacks ...string) *Signer {
	s := &Signer{keys: [][]byte{SigningKey(secret)}}
	for _, f := range fallbacks {
		s.keys = append(s.keys, SigningKey(f))
	}
	return s
}

func mac(key []byte, extType byte, payload []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("larder-ext\x00"))
	m.Write([]byte{extType})
	m.Write(payload)
	return m.Sum(nil)
}

// Sign returns the ext data: scheme 1, the mac, the payload.
func (s *Signer) Sign(extType byte, payload []byte) []byte {
	out := append([]byte{1}, mac(s.keys[0], extType, payload)...)
	return append(out, payload...)
}

// Verify returns the payload of signed ext data, or ErrRefused.
func (s *Signer) Verify(extType byte, data []byte) ([]byte, error) {
	if len(data) < 33 || data[0] != 1 {
		return nil, ErrRefused
	}
	payload := data[33:]
	for _, k := range s.keys {
		if hmac.Equal(mac(k, extType, payload), data[1:33]) {
			return payload, nil
		}
	}
	return nil, ErrRefused
}
