package stores_test

import (
	"os"
	"testing"

	"github.com/larder-cache/larder/clients/go/internal/testservers"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testservers.StopAll()
	os.Exit(code)
}
