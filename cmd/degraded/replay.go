package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/degraded/degraded/config"
	"github.com/degraded/degraded/internal/replay"
	"github.com/spf13/cobra"
)

// replayCmd is `degraded replay`: exit 2 for bad flags or a bad candidate
// config (the same problems as validate), 1 when no timeline line is valid.
func replayCmd(environ []string, stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "replay --config candidate.yaml [--from T] [--to T] [--format text|json] TIMELINE...",
		Short: "Replay a recorded timeline under a candidate config: its transitions, time at each level and flaps beside the recording's",
		Long: `Replay runs the candidate config's levels and rules (the controller's own code)
over the samples a daemon recorded in data_dir/timeline, and prints the
transitions it would have made, the time at each level and its flaps, beside
what the recording published. TIMELINE is a file or a directory of *.jsonl
files; lines are merged by time, duplicates dropped, corrupt lines skipped.`,
		Args: cobra.MinimumNArgs(1),
	}
	path := cmd.Flags().String("config", "", "candidate YAML config (default: the embedded defaults)")
	fromFlag := cmd.Flags().String("from", "", "first time to report, RFC 3339 (default: the first line)")
	toFlag := cmd.Flags().String("to", "", "last time to replay, RFC 3339 (default: the last line)")
	format := cmd.Flags().String("format", "text", "output: text or json")
	seed := cmd.Flags().Int64("seed", 0, "draw the candidate's recovery jitter from this seed (default: the recorded draws)")
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if *format != "text" && *format != "json" {
			return usageError{fmt.Errorf("--format must be text or json (was %q)", *format)}
		}
		var bounds [2]time.Time
		for i, f := range []struct{ name, value string }{{"from", *fromFlag}, {"to", *toFlag}} {
			if f.value == "" {
				continue
			}
			t, err := time.Parse(time.RFC3339Nano, f.value)
			if err != nil {
				return usageError{fmt.Errorf("--%s must be an RFC 3339 time such as 2026-12-01T10:00:00Z (was %q)", f.name, f.value)}
			}
			bounds[i] = t
		}
		cfg, warnings, err := config.Load(config.LoadOptions{Path: *path, Environ: environ})
		if err != nil {
			return configError(err)
		}
		for _, w := range warnings {
			fmt.Fprintln(stderr, "warning: "+w)
		}
		var seedOpt *int64
		if c.Flags().Changed("seed") {
			seedOpt = seed
		}
		files, err := replay.Files(args)
		if err != nil {
			return err
		}
		res, err := runReplay(c.Context(), replay.Options{Config: cfg, Files: files, From: bounds[0], To: bounds[1], Seed: seedOpt})
		if err != nil {
			return err // exit 1, replay.ErrNoLines and an interrupt included
		}
		for _, w := range res.Warnings {
			fmt.Fprintln(stderr, "warning: "+w)
		}
		if *format == "json" {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(res)
		}
		table, err := cfg.Table()
		if err != nil {
			return err
		}
		var names []string
		for _, l := range table.Levels() {
			names = append(names, l.Name)
		}
		return res.WriteText(stdout, names)
	}
	return cmd
}

// errInterrupted ends a replay cut short by SIGINT or SIGTERM (exit 1).
var errInterrupted = errors.New("replay interrupted before the timeline was read to its end")

// runReplay runs the replay until it ends or ctx does: an interrupt
// closes the files (a read from a FIFO ends with them) and is errInterrupted.
func runReplay(ctx context.Context, o replay.Options) (*replay.Result, error) {
	o.Context = ctx
	res, err := replay.Run(o)
	if ctx.Err() != nil {
		return nil, errInterrupted
	}
	return res, err
}
