// Package scenario replays text scenarios: files of commands, each
// followed by the output it must produce, in the style of etcd's raft
// tests. A file reads
//
//	# a comment
//	join a b
//	----
//	a: 0 1 2 3
//	b: 4 5 6 7
//
// (a command line, a line of four dashes, the expected output, a blank
// line). Run hands each command to the test's handler and compares what it
// returns; `go test -args -rewrite` writes the outputs produced back into
// the files instead, for review in the diff.
package scenario

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "write the outputs scenarios produce into their files")

// Cmd is one command of a scenario.
type Cmd struct {
	Name string
	Args []string
	// Pos is where it stands ("file:line"), for messages.
	Pos string
}

// Fatalf fails the scenario at the command.
func (c Cmd) Fatalf(t testing.TB, format string, args ...any) {
	t.Helper()
	t.Fatalf("%s: %s: %s", c.Pos, c.Name, fmt.Sprintf(format, args...))
}

type step struct {
	cmd  Cmd
	line string
	want string
}

// Run replays the scenario in path: do runs one command and returns its
// output (compared without trailing blank space).
func Run(t *testing.T, path string, do func(t *testing.T, c Cmd) string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var (
		out   strings.Builder
		lines = strings.Split(string(b), "\n")
	)
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			out.WriteString(l + "\n")
			continue
		}
		fields := strings.Fields(l)
		c := Cmd{Name: fields[0], Args: fields[1:], Pos: fmt.Sprintf("%s:%d", path, i+1)}
		i++
		if i >= len(lines) || lines[i] != "----" {
			t.Fatalf("%s: want ---- after the command", c.Pos)
		}
		var want []string
		for i+1 < len(lines) && strings.TrimSpace(lines[i+1]) != "" {
			i++
			want = append(want, lines[i])
		}
		got := strings.TrimRight(do(t, c), " \n")
		if t.Failed() {
			return
		}
		out.WriteString(l + "\n----\n")
		if got != "" {
			out.WriteString(got + "\n")
		}
		if w := strings.Join(want, "\n"); got != w && !*rewrite {
			t.Errorf("%s: %s\ngot:\n%s\nwant:\n%s", c.Pos, l, got, w)
		}
	}
	if *rewrite {
		text := strings.TrimRight(out.String(), "\n") + "\n"
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
