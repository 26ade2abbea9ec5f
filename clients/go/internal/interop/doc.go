// Package interop holds the tests where Go meets the other languages through every shared store: entries Go
// writes are read by the Rust binary (`larder store get`), Python, Ruby and TypeScript (memcached and Redis,
// through clients/typescript's build), entries they write are read by Go, and purges cross both ways. Test-only:
// the package has no code of its own.
package interop
