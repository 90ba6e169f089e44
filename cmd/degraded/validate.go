package main

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/degraded/degraded/config"
	"github.com/degraded/degraded/signals"
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
		cfg, warnings, err := config.Load(config.LoadOptions{Path: *path, Environ: environ})
		if err != nil {
			return configError(err)
		}
		if w := cfg.PressureWarning(signals.CheckPressure); w != "" {
			warnings = append(warnings, w)
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
		Short: "Print the module version, the VCS revision and the Go toolchain of this binary",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := io.WriteString(stdout, versionText(debug.ReadBuildInfo()))
			return err
		},
	}
}
