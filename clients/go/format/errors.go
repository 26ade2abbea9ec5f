// Errors of the entry format (spec/FORMAT.md §7): every decoder failure is an *InvalidEntry whose Kind is one
// of the shared kind names, so callers and the vectors can tell why an entry was refused.
package format

import (
	"errors"
	"fmt"
)

// ErrorKind names why an entry was refused; the names are shared by every larder language.
type ErrorKind string

// The error kinds of spec/FORMAT.md §7.
const (
	Truncated          ErrorKind = "truncated"
	BadMagic           ErrorKind = "bad_magic"
	UnsupportedVersion ErrorKind = "unsupported_version"
	UnknownCodec       ErrorKind = "unknown_codec"
	BadHeader          ErrorKind = "bad_header"
	TooLarge           ErrorKind = "too_large"
	CorruptPayload     ErrorKind = "corrupt_payload"
	BadValue           ErrorKind = "bad_value"
)

// InvalidEntry is the one error a decoder returns for bytes that are not a valid entry.
type InvalidEntry struct {
	Kind   ErrorKind
	Detail string
}

func (e *InvalidEntry) Error() string { return string(e.Kind) + ": " + e.Detail }

func invalid(kind ErrorKind, format string, args ...any) *InvalidEntry {
	return &InvalidEntry{Kind: kind, Detail: fmt.Sprintf(format, args...)}
}

// KindOf returns the kind of an *InvalidEntry anywhere in err's chain, or "" when there is none.
func KindOf(err error) ErrorKind {
	var inv *InvalidEntry
	if errors.As(err, &inv) {
		return inv.Kind
	}
	return ""
}
