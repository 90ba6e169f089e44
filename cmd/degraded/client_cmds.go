package main

import (
	"io"

	"github.com/spf13/cobra"
)

// clientCmds are the operator commands that talk to a running daemon.
func clientCmds(environ []string, stdout io.Writer) []*cobra.Command {
	return nil
}
