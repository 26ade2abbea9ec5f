// Wire bytes are the checked bytes (spec/STORES.md §2, issue 32 finding 1): a key is checked on its UTF-8 bytes
// and those exact bytes reach the server, so characters whose low byte is LF, CR or space (U+010A, U+010D,
// U+0120) cannot smuggle a command, lengths are counted in bytes (250 accepted, 251 refused, however many
// characters), and a string that is not valid UTF-8 (Go's analogue of an unpaired surrogate) is an invalid_key,
// never repaired. Run by the behaviour suite against every store.
package stores_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/larder-cache/larder/clients/go/stores"
)

func checkWireBytes(t *testing.T, s stores.Store, p string) {
	ctx := context.Background()
	victim := p + "victim"
	// What a latin1 encoder would turn into: <p>x CR LF "ms <p>victim 5 T0" CR LF "PWNED" CR LF "mn".
	smuggler := p + "x\u010d\u010ams\u0120" + victim + "\u01205\u0120T0\u010d\u010aPWNED\u010d\u010amn"
	if err := s.Set(ctx, smuggler, []byte("harmless"), time.Minute); err != nil {
		t.Fatalf("a key of safe bytes (U+010A, U+010D, U+0120 are C4 8A, C4 8D, C4 A0) was refused: %v", err)
	}
	if v, err := s.Get(ctx, victim); v != nil || err != nil {
		t.Fatalf("the smuggled key was written: %q %v", v, err)
	}
	if v, err := s.Get(ctx, smuggler); !bytes.Equal(v, []byte("harmless")) || err != nil {
		t.Fatalf("the key's own value: %q %v", v, err)
	}
	vs, err := s.GetMulti(ctx, []string{smuggler, victim})
	if err != nil || !bytes.Equal(vs[0], []byte("harmless")) || vs[1] != nil {
		t.Fatalf("multi-get after: %q %v (the connection must stay in step)", vs, err)
	}
	if ok, err := s.Delete(ctx, smuggler); !ok || err != nil {
		t.Fatalf("delete: %v %v", ok, err)
	}

	// 250 bytes pass and 251 do not, counted in bytes whatever the characters (125 two-byte U+0101 are 125 UTF-16
	// units, 250 bytes).
	pad := func(total int) string {
		k := p + strings.Repeat("\u0101", (total-len(p))/2)
		return k + strings.Repeat("a", total-len(k))
	}
	if k := pad(250); len(k) != 250 || checkKeyEverywhere(ctx, s, k, false) != nil {
		t.Errorf("a 250-byte key: %v", checkKeyEverywhere(ctx, s, k, false))
	}
	if k := pad(251); len(k) != 251 || checkKeyEverywhere(ctx, s, k, true) != nil {
		t.Errorf("a 251-byte key: %v", checkKeyEverywhere(ctx, s, k, true))
	}

	// Not UTF-8: refused everywhere, before anything is sent.
	for _, bad := range []string{"\xff", p + "\xc4", p + "\xed\xa0\x80" /* an encoded surrogate */, p + "\xc0\xaf" /* overlong "/" */, p + "\x80x"} {
		if err := checkKeyEverywhere(ctx, s, bad, true); err != nil {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if _, err := s.PurgePrefix(ctx, p+"\xff"); stores.KindOf(err) != stores.InvalidKey {
		t.Errorf("a purge prefix that is not UTF-8: %v", err)
	}
}
