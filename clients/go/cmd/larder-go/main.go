// Command larder-go is the Go implementation of larder's format commands (spec/CLI.md): encode, inspect, key.
package main

import (
	"os"

	"github.com/larder-cache/larder/clients/go/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Stdout))
}
