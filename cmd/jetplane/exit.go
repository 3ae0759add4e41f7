package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/spf13/cobra"

	"github.com/jetplane/jetplane/bridge/api"
)

// Exit codes, as documented in the README ("Exit codes").
const (
	exitOK       = 0
	exitError    = 1 // anything else that failed
	exitUsage    = 2 // the command line is wrong
	exitNotFound = 3 // an object named does not exist
	exitConflict = 4 // someone else changed the object first
)

// usageError marks a mistake in the command line.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usage(err error) error { return usageError{err} }

// codeError gives an error its own exit code.
type codeError struct {
	code int
	err  error
}

func (e codeError) Error() string { return e.err.Error() }
func (e codeError) Unwrap() error { return e.err }

// quietExit ends the command with its code and prints nothing more: the
// command has already said everything (diff's differences are its output,
// not an error, as with kubectl diff).
type quietExit struct{ code int }

func (e quietExit) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// exitCode maps an error to the process's exit code.
func exitCode(err error) int {
	var ce codeError
	var qe quietExit
	var ue usageError
	var apiErr *api.APIError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ce):
		return ce.code
	case errors.As(err, &qe):
		return qe.code
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &apiErr) && apiErr.Code == http.StatusNotFound:
		return exitNotFound
	case errors.As(err, &apiErr) && apiErr.Code == http.StatusConflict:
		return exitConflict
	case isCobraUsage(err):
		return exitUsage
	}
	return exitError
}

// isCobraUsage recognises the command-line errors cobra makes itself.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "flag needs an argument", "invalid argument", "accepts ", "requires at least", "requires exactly", "received "} {
		if strings.HasPrefix(msg, p) || strings.Contains(msg, "\n"+p) {
			return true
		}
	}
	return false
}

// execute runs the command line and returns the exit code.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	code := exitCode(err)
	if errors.As(err, new(quietExit)) {
		return code
	}
	printError(stderr, err)
	if code == exitUsage && cmd != nil {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return code
}

// finishCommands gives every command the behaviour all share: argument
// errors are usage errors (exit 2), and shell completion of kinds and
// names from the server.
func finishCommands(root *cobra.Command, g *globals) {
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usage(err) })
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Args != nil {
			args := c.Args
			c.Args = func(cmd *cobra.Command, a []string) error {
				if err := args(cmd, a); err != nil {
					return usage(err)
				}
				return nil
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	for _, name := range []string{"get", "describe", "delete", "watch", "history", "state"} {
		if c, _, err := root.Find([]string{name}); err == nil && c.Name() == name {
			c.ValidArgsFunction = completeObjects(g, name == "history" || name == "describe")
		}
	}
}
