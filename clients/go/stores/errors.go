// Store errors (STORES.md §2): every error names its kind, the backend and, for remote stores, the server, so a
// caller can tell a refused key from a dead server, and logs say which server failed.
package stores

import "errors"

// ErrorKind says what went wrong.
type ErrorKind string

// Error kinds shared by every store.
const (
	InvalidKey  ErrorKind = "invalid_key"
	TooLarge    ErrorKind = "too_large"
	Unavailable ErrorKind = "unavailable" // could not connect, ejected, or lost the connection
	Timeout     ErrorKind = "timeout"
	Protocol    ErrorKind = "protocol" // a reply that breaks a bound or does not parse
	NotACounter ErrorKind = "not_a_counter"
	Unsupported ErrorKind = "unsupported"
	BadURL      ErrorKind = "bad_url"
	Other       ErrorKind = "error"
)

// Error is the one error type stores return.
type Error struct {
	Kind    ErrorKind
	Backend string
	Server  string
	Msg     string
	Err     error
}

func (e *Error) Error() string {
	s := string(e.Kind)
	if e.Backend != "" {
		s = e.Backend + ": " + s
	}
	if e.Server != "" {
		s += " (" + e.Server + ")"
	}
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// KindOf is the kind of a store *Error in err's chain, or "".
func KindOf(err error) ErrorKind {
	var se *Error
	if errors.As(err, &se) {
		return se.Kind
	}
	return ""
}
