package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
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

// exitCode prints err and maps it to the documented exit codes. The
// error may quote what the daemon answered: it is printed as safeText.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	stderr = safeText{stderr}
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
	// serve writes its logs, whose handler escapes values itself; every
	// other command writes what the daemon sent for a person to read.
	serve := serveCmd(environ, stdout, stderr)
	stdout, stderr = safeText{stdout}, safeText{stderr}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(
		serve,
		validateCmd(environ, stdout),
		replayCmd(environ, stdout, stderr),
		versionCmd(stdout),
	)
	root.AddCommand(clientCmds(environ, stdout)...)
	usageChecks(root)
	cmd, err := root.ExecuteContextC(ctx)
	if err != nil && cmd.CalledAs() == "" {
		// cobra found no command for args (it ran none): a mistyped
		// command path.
		return usageError{err}
	}
	return err
}

// usageChecks makes the argument and required-flag errors of c and every
// command under it usage errors (exit 2): cobra's validators return them
// untyped. Flag parse errors are marked by the root's FlagErrorFunc.
// Commands that cannot run keep a nil Args, so cobra still reports an
// unknown subcommand.
func usageChecks(c *cobra.Command) {
	if c.Runnable() {
		valid := c.Args
		if valid == nil {
			valid = cobra.ArbitraryArgs
		}
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := valid(cmd, args); err != nil {
				return usageError{err}
			}
			if err := cmd.ValidateRequiredFlags(); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		usageChecks(sub)
	}
}
