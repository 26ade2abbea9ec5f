// Command larder-conformance is the Go runner of the conformance matrix (spec/vectors/README.md): for each
// vector file given, one JSON line {"language": "go", "file", "status", "cases", "failed", "reason"}. It exits
// 0 whenever it could judge the files, 2 without any.
package main

import (
	"fmt"
	"os"

	"github.com/larder-cache/larder/clients/go/conformance"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: larder-conformance FILE… (files of spec/vectors)")
		os.Exit(2)
	}
	for _, path := range os.Args[1:] {
		fmt.Println(conformance.Judge(path).Line())
	}
}
