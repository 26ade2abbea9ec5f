// signed.json (FORMAT.md §2): signing is byte-identical and verifies; refused data does not verify; an older
// secret among the fallbacks still verifies; and every entry decodes to the opaque ext (Go never interprets a
// pickle or a Marshal dump).
package conformance

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/larder-cache/larder/clients/go/format"
)

func signedCases(data []byte) ([]Case, error) {
	type sc struct {
		Name          string   `json:"name"`
		ExtType       int      `json:"ext_type"`
		Secret        string   `json:"secret"`
		Secrets       []string `json:"secrets"`
		PayloadHex    string   `json:"payload_hex"`
		SigningKeyHex string   `json:"signing_key_hex"`
		DataHex       string   `json:"data_hex"`
		EntryHex      string   `json:"entry_hex"`
	}
	var doc struct {
		Message   string `json:"signing_key_message"`
		MacPrefix string `json:"mac_prefix_hex"`
		Signed    []sc   `json:"signed"`
		Refused   []sc   `json:"refused"`
		Rotation  []sc   `json:"rotation"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Signed == nil || doc.Refused == nil || doc.Rotation == nil {
		return nil, errors.New("a section is missing")
	}
	if doc.Message != "larder.signed-ext.v1" || doc.MacPrefix != hex.EncodeToString([]byte("larder-ext\x00")) {
		return nil, errors.New("the signing key message or MAC prefix is not the spec's")
	}
	h := func(s string) []byte { b, _ := hex.DecodeString(s); return b }
	entryHoldsExt := func(c sc) error {
		if c.EntryHex == "" {
			return nil
		}
		e, err := format.Decode(h(c.EntryHex), format.DefaultMaxSize)
		if err != nil {
			return err
		}
		ext, ok := e.Value.(format.Ext)
		if !ok || int(ext.Type) != c.ExtType || !bytes.Equal(ext.Data, h(c.DataHex)) {
			return fmt.Errorf("the entry does not hold the ext: %#v", e.Value)
		}
		return nil
	}
	var out []Case
	for _, c := range doc.Signed {
		out = append(out, Case{"signed/" + c.Name, func() error {
			if got := hex.EncodeToString(format.SigningKey(c.Secret)); got != c.SigningKeyHex {
				return fmt.Errorf("signing key %s", got)
			}
			s := format.NewSigner(c.Secret)
			if got := s.Sign(byte(c.ExtType), h(c.PayloadHex)); !bytes.Equal(got, h(c.DataHex)) {
				return fmt.Errorf("signed bytes %x", got)
			}
			p, err := s.Verify(byte(c.ExtType), h(c.DataHex))
			if err != nil || !bytes.Equal(p, h(c.PayloadHex)) {
				return fmt.Errorf("verify: %v", err)
			}
			return entryHoldsExt(c)
		}})
	}
	for _, c := range doc.Refused {
		out = append(out, Case{"refused/" + c.Name, func() error {
			if len(c.Secrets) > 0 {
				if _, err := format.NewSigner(c.Secrets[0], c.Secrets[1:]...).Verify(byte(c.ExtType), h(c.DataHex)); err == nil {
					return errors.New("verified")
				}
			}
			return entryHoldsExt(c)
		}})
	}
	for _, c := range doc.Rotation {
		out = append(out, Case{"rotation/" + c.Name, func() error {
			s := format.NewSigner(c.Secrets[0], c.Secrets[1:]...)
			p, err := s.Verify(byte(c.ExtType), h(c.DataHex))
			if err != nil || !bytes.Equal(p, h(c.PayloadHex)) {
				return fmt.Errorf("verify: %v", err)
			}
			if again := s.Sign(byte(c.ExtType), p); bytes.Equal(again, h(c.DataHex)) {
				return errors.New("signed with a fallback secret, not the current one")
			}
			return nil
		}})
	}
	return out, nil
}
