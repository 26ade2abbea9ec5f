// The keys a store writes (STORES.md §2): a caller's key checked and prefixed, and the internal keys of the
// store's own bookkeeping (locks, tag records, the prefix list), which no caller's key can equal. A Go string is
// its bytes: the bytes checked are the bytes every store writes (no store converts a key), and a string that is
// not valid UTF-8 (what an unpaired surrogate is elsewhere) is refused, never repaired ("Wire bytes are the
// checked bytes").
package stores

import (
	"fmt"
	"unicode/utf8"

	"github.com/larder-cache/larder/clients/go/keys"
)

// CheckKey refuses any key that is not a safe key (FORMAT.md §5.1) or is empty, before anything is sent.
func CheckKey(key string) error {
	if key == "" {
		return &Error{Kind: InvalidKey, Msg: "the empty key"}
	}
	if !keys.IsSafe(key) {
		return &Error{Kind: InvalidKey, Msg: fmt.Sprintf("key %q is not a safe key (at most 250 bytes, no byte 0x00-0x20 or 0x7F): use keys.SafeKey", truncate(key))}
	}
	if !utf8.ValidString(key) {
		return &Error{Kind: InvalidKey, Msg: fmt.Sprintf("key %q is not valid UTF-8", truncate(key))}
	}
	return nil
}

// CheckPrefix applies the key rule to a purge prefix, which may be empty.
func CheckPrefix(prefix string) error {
	if prefix != "" && !keys.IsSafe(prefix) {
		return &Error{Kind: InvalidKey, Msg: fmt.Sprintf("prefix %q is not a safe key prefix", truncate(prefix))}
	}
	if !utf8.ValidString(prefix) {
		return &Error{Kind: InvalidKey, Msg: fmt.Sprintf("prefix %q is not valid UTF-8", truncate(prefix))}
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// StoredKey is the key a store with this prefix writes for a caller's key.
func StoredKey(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return keys.SafeKey(prefix + key)
}

// InternalKey is the key of the store's own record for purpose ("lock", "tag", "prefixes") and name.
func InternalKey(prefix, purpose, name string) string {
	return StoredKey(prefix, keys.SafeKey("larder\x00"+purpose+":"+name))
}
