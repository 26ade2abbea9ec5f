// Package testenv finds what the tests need from the rest of the repository: the Rust binaries (LARDER_BIN,
// LARDER_HOSTILE, LARDER_FAULTS, built by `cargo build -p larder-cli -p larder-testkit --bins`) and spec/.
// Without a binary the tests that need it fail, they do not skip: a missing build must not pass as green.
package testenv

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// RepoRoot is the repository's root (three levels above this file).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", "..", ".."))
}

// Spec is a path under spec/.
func Spec(parts ...string) string {
	return filepath.Join(append([]string{RepoRoot(), "spec"}, parts...)...)
}

func binary(t testing.TB, env, name string) string {
	t.Helper()
	path := os.Getenv(env)
	if path == "" {
		path = filepath.Join(RepoRoot(), "target", "debug", name)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s (%s) is missing: build it with `cargo build -p larder-cli -p larder-testkit --bins`: %v", env, path, err)
	}
	return path
}

// LarderBin is the Rust `larder` binary.
func LarderBin(t testing.TB) string { return binary(t, "LARDER_BIN", "larder") }

// HostileBin is the hostile memcached/Redis server of crates/testkit.
func HostileBin(t testing.TB) string { return binary(t, "LARDER_HOSTILE", "larder-hostile") }

// FaultsBin is the fault proxy of crates/testkit (larder-faults), put between a client and a real server.
func FaultsBin(t testing.TB) string { return binary(t, "LARDER_FAULTS", "larder-faults") }
