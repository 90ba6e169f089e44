package main

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/degraded/degraded/config"
	"github.com/spf13/cobra"
)

func validateCmd(environ []string, stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "validate",
		Short: "Check a config file and print every problem",
		Args:  cobra.NoArgs,
	}
	path := cmd.Flags().String("config", "", "YAML config file to check")
	cmd.RunE = func(*cobra.Command, []string) error {
		_, warnings, err := config.Load(config.LoadOptions{Path: *path, Environ: environ})
		if err != nil {
			return configError(err)
		}
		for _, w := range warnings {
			fmt.Fprintln(stdout, "warning: "+w)
		}
		if *path == "" {
			fmt.Fprintln(stdout, "config OK: embedded defaults (no --config given)")
		} else {
			fmt.Fprintln(stdout, "config OK: "+*path)
		}
		return nil
	}
	return cmd
}

func versionCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(*cobra.Command, []string) {
			version, revision := "(devel)", ""
			if bi, ok := debug.ReadBuildInfo(); ok {
				version = bi.Main.Version
				for _, s := range bi.Settings {
					if s.Key == "vcs.revision" {
						revision = " " + s.Value
					}
				}
			}
			fmt.Fprintf(stdout, "degraded %s%s\n", version, revision)
		},
	}
}
