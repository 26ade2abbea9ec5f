// Package cli is `larder-go encode|inspect|key`, the format commands every larder implementation ships
// (spec/CLI.md) with the same flags, output and exit statuses as the Rust binary: 0 on success, 1 when inspect
// is given an invalid entry, 2 for a usage error or bad input; errors are one line on stderr starting "larder: ".
package cli

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/term"
)

// failure is a command's error: its exit status and its one-line message.
type failure struct {
	status int
	msg    string
}

func (f *failure) Error() string { return f.msg }

func usage(format string, args ...any) *failure {
	return &failure{2, fmt.Sprintf(format, args...) + " (see --help)"}
}

// Main runs one command and returns its exit status.
func Main(args []string, stdin io.Reader, stdout io.Writer, stderr io.Writer, stdoutFile *os.File) int {
	out, err := run(args, stdin, stdoutFile)
	if err != nil {
		f, ok := err.(*failure)
		if !ok {
			f = &failure{2, err.Error()}
		}
		fmt.Fprintf(stderr, "larder: %s\n", strings.ReplaceAll(f.msg, "\n", " "))
		return f.status
	}
	if _, err := stdout.Write(out); err != nil {
		fmt.Fprintf(stderr, "larder: cannot write stdout: %v\n", err)
		return 2
	}
	return 0
}

const topHelp = `Encode, inspect and key larder entries (spec/FORMAT.md, spec/CLI.md).

usage: larder-go {encode,inspect,key} ...

commands:
  encode    encode stdin as an entry, written to stdout
  inspect   print an entry's header and decoded value
  key       print the cache key of a request URL
`

func run(args []string, stdin io.Reader, stdoutFile *os.File) ([]byte, error) {
	if len(args) == 0 {
		return nil, usage("a command is required: encode, inspect or key")
	}
	switch args[0] {
	case "-h", "--help", "help":
		return []byte(topHelp), nil
	case "encode":
		return encodeCmd(args[1:], stdin)
	case "inspect":
		return inspectCmd(args[1:], stdin, stdoutFile)
	case "key":
		return keyCmd(args[1:])
	}
	return nil, usage("unknown command %q (expected encode, inspect or key)", args[0])
}

// flagSpec describes one option: whether it takes a value and whether it may repeat.
type flagSpec struct {
	value, repeat bool
	choices       []string
}

// parsed holds options by name (values in order) and positional arguments.
type parsed struct {
	opts map[string][]string
	pos  []string
}

func (p *parsed) get(name string) (string, bool) {
	v, ok := p.opts[name]
	if !ok {
		return "", false
	}
	return v[0], true
}

func (p *parsed) has(name string) bool { _, ok := p.opts[name]; return ok }

func parse(args []string, specs map[string]flagSpec, help string) (*parsed, []byte, error) {
	p := &parsed{opts: map[string][]string{}}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "-h" || a == "--help" {
			return nil, []byte(help), nil
		}
		if a == "--" {
			p.pos = append(p.pos, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "--") || a == "-" {
			if strings.HasPrefix(a, "-") && a != "-" {
				return nil, nil, usage("unexpected argument %q", a)
			}
			p.pos = append(p.pos, a)
			continue
		}
		name, value, hasValue := strings.Cut(a[2:], "=")
		spec, ok := specs[name]
		if !ok {
			return nil, nil, usage("unexpected argument '--%s'", name)
		}
		if spec.value && !hasValue {
			if i+1 >= len(args) {
				return nil, nil, usage("a value is required for '--%s'", name)
			}
			i++
			value = args[i]
		} else if !spec.value && hasValue {
			return nil, nil, usage("'--%s' takes no value", name)
		}
		if _, seen := p.opts[name]; seen && !spec.repeat {
			return nil, nil, usage("the argument '--%s' cannot be used multiple times", name)
		}
		if spec.choices != nil && !contains(spec.choices, value) {
			return nil, nil, usage("invalid value %q for '--%s' (possible values: %s)", value, name, strings.Join(spec.choices, ", "))
		}
		p.opts[name] = append(p.opts[name], value)
	}
	return p, nil, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func u64Flag(p *parsed, name string, def uint64) (uint64, error) {
	v, ok := p.get(name)
	if !ok {
		return def, nil
	}
	t := strings.TrimPrefix(v, "+")
	n, err := strconv.ParseUint(t, 10, 64)
	if err != nil || t == "" || t[0] == '+' || t[0] == '-' {
		return 0, usage("invalid value %q for '--%s': expected an integer in 0..2^64-1", v, name)
	}
	return n, nil
}

// isTerminal says whether stdout is a terminal, unless LARDER_FORCE_TTY is 1 or 0.
func isTerminal(f *os.File) bool {
	switch os.Getenv("LARDER_FORCE_TTY") {
	case "1":
		return true
	case "0":
		return false
	}
	return f != nil && term.IsTerminal(int(f.Fd()))
}
