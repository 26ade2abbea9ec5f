// Package conformance is the Go column of the conformance matrix (spec/vectors/README.md, "Conformance
// runners"): Judge reads one vector file and reports one JSON object. The Go test suite runs the same cases
// (conformance_test.go), so the matrix and the suite cannot disagree. No server is needed, except by
// hostile_keys.json and hostile_replies.json, which take theirs from the environment (hostile.go), and outage.json,
// which takes the same servers and larder-faults (outage.go).
package conformance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Case is one vector case: Check returns nil when larder gives the expected outcome.
type Case struct {
	Name  string
	Check func() error
}

// Report is the runner's line for one file.
type Report struct {
	Language string   `json:"language"`
	File     string   `json:"file"`
	Status   string   `json:"status"`
	Cases    int      `json:"cases"`
	Failed   []string `json:"failed"`
	Reason   *string  `json:"reason"`
}

// maxFailed is the most failed case names a report lists.
const maxFailed = 20

// files are the vector files this runner knows, and what lists their cases.
var files = map[string]func([]byte) ([]Case, error){
	"entries.json": entriesCases,
	"invalid.json": invalidCases,
	"keys.json":    keysCases,
	"ring.json":    ringCases,
	"stores.json":  storesCases,
	"signed.json":  signedCases,
	"storage.json": storageCases,
	"outage.json":  outageCases,
}

// filesAt are the vector files whose cases also need the file's own path (the scripts and files beside it).
var filesAt = map[string]func(path string, data []byte) ([]Case, error){
	"hostile_keys.json":    hostileKeysCases,
	"hostile_pages.json":   hostilePagesCases,
	"hostile_files.json":   hostileFilesCases,
	"hostile_replies.json": hostileRepliesCases,
}

// Cases lists the cases of the vector file at path, or an error saying why it cannot be judged.
func Cases(path string) ([]Case, error) {
	name := filepath.Base(path)
	lister, ok := files[name]
	if at, known := filesAt[name]; known {
		lister, ok = func(data []byte) ([]Case, error) { return at(path, data) }, true
	}
	if !ok {
		return nil, fmt.Errorf("%s is not a vector file this runner knows: add it to clients/go/conformance/runner.go", name)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %v", path, err)
	}
	var head struct {
		Schema *int `json:"schema"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("cannot read %s: %v", path, err)
	}
	if head.Schema == nil || *head.Schema != 1 {
		return nil, fmt.Errorf("%s is not a schema 1 vector file", name)
	}
	cases, err := lister(data)
	var missing *missingEnv
	if errors.As(err, &missing) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("%s does not have the shape of %s: %v", name, name, err)
	}
	return cases, nil
}

// Judge runs every case of one file; a panic in a case is that case's failure.
func Judge(path string) Report {
	r := Report{Language: "go", File: filepath.Base(path), Status: "pass", Failed: []string{}}
	cases, err := Cases(path)
	if err != nil {
		msg := err.Error()
		r.Status, r.Reason = "fail", &msg
		return r
	}
	r.Cases = len(cases)
	var first string
	for _, c := range cases {
		if err := run(c); err != nil {
			if first == "" {
				first = c.Name + ": " + err.Error()
			}
			if len(r.Failed) < maxFailed {
				r.Failed = append(r.Failed, c.Name)
			}
		}
	}
	if first != "" {
		r.Status, r.Reason = "fail", &first
	}
	return r
}

func run(c Case) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return c.Check()
}

// Line is the report as one line of JSON, non-ASCII kept.
func (r Report) Line() string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(r)
	return string(bytes.TrimRight(b.Bytes(), "\n"))
}

func check(ok bool, format string, args ...any) error {
	if ok {
		return nil
	}
	return fmt.Errorf(format, args...)
}
