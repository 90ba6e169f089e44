package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/degraded/degraded/config"
	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// usageError marks a mistake in how the command was invoked (exit 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// configError marks a config that cannot be loaded as exit 2; a
// *config.ValidationError passes through to be printed problem by problem.
func configError(err error) error {
	var ve *config.ValidationError
	if errors.As(err, &ve) {
		return err
	}
	return usageError{err}
}

// exitCode prints err and maps it to the documented exit codes.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var ve *config.ValidationError
	var ue usageError
	switch {
	case errors.As(err, &ve):
		fmt.Fprintln(stderr, "degraded: invalid configuration:")
		for _, p := range ve.Problems {
			fmt.Fprintln(stderr, "  "+p)
		}
		return 2
	case errors.As(err, &ue):
		fmt.Fprintln(stderr, "degraded:", err)
		return 2
	default:
		fmt.Fprintln(stderr, "degraded:", err)
		return 1
	}
}

// run is the whole program: it parses args and runs the chosen command
// until it ends or ctx is cancelled.
func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	root := &cobra.Command{
		Use:           "degraded",
		Short:         "Graceful-degradation controller: decides how much low-priority work to shed",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(
		serveCmd(environ, stdout, stderr),
		validateCmd(environ, stdout),
		versionCmd(stdout),
	)
	root.AddCommand(clientCmds(environ, stdout)...)
	_, err := root.ExecuteContextC(ctx)
	if err != nil && isCobraUsage(err) {
		return usageError{err}
	}
	return err
}

// isCobraUsage recognises cobra's own argument errors, which it does not type.
func isCobraUsage(err error) bool {
	var ue usageError
	if errors.As(err, &ue) {
		return false
	}
	msg := err.Error()
	for _, p := range []string{"unknown command", "accepts ", "requires at least", "requires at most", "unknown flag", "unknown shorthand", "required flag"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
