package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/degraded/degraded/config"
	"github.com/degraded/degraded/internal/replay"
	"github.com/spf13/cobra"
)

// replayCmd is `degraded replay`: exit 2 for bad flags or a bad candidate
// config (the same problems as validate), 1 when no timeline line is valid.
func replayCmd(environ []string, stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "replay --config candidate.yaml [--from T] [--to T] [--format text|json|html] [--out FILE] TIMELINE...",
		Short: "Replay a recorded timeline under a candidate config: its transitions, time at each level and flaps beside the recording's",
		Long: `Replay runs the candidate config's levels and rules (the controller's own code)
over the samples a daemon recorded in data_dir/timeline, and prints the
transitions it would have made, the time at each level and its flaps, beside
what the recording published. TIMELINE is a file or a directory of *.jsonl
files; lines are merged by time, duplicates dropped, corrupt lines skipped.
--format html --out report.html writes one self-contained page (no network)
with both sides' level, admission and signals over time, the transitions side
by side and the summary table.`,
		Args: cobra.MinimumNArgs(1),
	}
	path := cmd.Flags().String("config", "", "candidate YAML config (default: the embedded defaults)")
	fromFlag := cmd.Flags().String("from", "", "first time to report, RFC 3339 (default: the first line)")
	toFlag := cmd.Flags().String("to", "", "last time to replay, RFC 3339 (default: the last line)")
	format := cmd.Flags().String("format", "text", "output: text, json or html")
	out := cmd.Flags().String("out", "", "write the output to this file instead of stdout (html: the report)")
	seed := cmd.Flags().Int64("seed", 0, "draw the candidate's recovery jitter from this seed (default: the recorded draws)")
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if *format != "text" && *format != "json" && *format != "html" {
			return usageError{fmt.Errorf("--format must be text, json or html (was %q)", *format)}
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
		opts := replay.Options{Config: cfg, Files: files, From: bounds[0], To: bounds[1], Seed: seedOpt}
		if *format == "html" {
			return writeReport(c.Context(), *out, stdout, stderr, opts, replay.HTMLInfo{Candidate: candidateName(*path), Timelines: args, Generated: time.Now()})
		}
		res, err := runReplay(c.Context(), opts)
		if err != nil {
			return err // exit 1, replay.ErrNoLines and an interrupt included
		}
		for _, w := range res.Warnings {
			fmt.Fprintln(stderr, "warning: "+w)
		}
		dst, done, err := output(*out, stdout)
		if err != nil {
			return err
		}
		if *format == "json" {
			enc := json.NewEncoder(dst)
			enc.SetIndent("", "  ")
			return done(enc.Encode(res))
		}
		table, err := cfg.Table()
		if err != nil {
			return done(err)
		}
		var names []string
		for _, l := range table.Levels() {
			names = append(names, l.Name)
		}
		return done(res.WriteText(dst, names))
	}
	return cmd
}

// writeReport writes the HTML report to path (stdout for ""), and says
// where it went on stderr.
func writeReport(ctx context.Context, path string, stdout, stderr io.Writer, o replay.Options, about replay.HTMLInfo) error {
	dst, done, err := output(path, stdout)
	if err != nil {
		return err
	}
	o.Context = ctx
	res, err := replay.WriteHTML(dst, o, about)
	if ctx.Err() != nil {
		err = errInterrupted
	}
	if err := done(err); err != nil {
		return err
	}
	for _, w := range res.Warnings {
		fmt.Fprintln(stderr, "warning: "+w)
	}
	if path != "" {
		fmt.Fprintf(stderr, "wrote %s: %d lines replayed, %d candidate and %d recorded transitions\n", path, res.Lines, len(res.Transitions), len(res.Recorded))
	}
	return nil
}

// output is where a replay writes: a temporary file beside path, renamed
// to path once everything is written (so a failed replay never leaves
// half a file, nor truncates an earlier one), or stdout for "". done
// finishes with the error of the write, and returns the first error.
func output(path string, stdout io.Writer) (w io.Writer, done func(error) error, err error) {
	if path == "" {
		return stdout, func(err error) error { return err }, nil
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return nil, nil, fmt.Errorf("--out: %w", err)
	}
	bw := bufio.NewWriterSize(f, 256<<10)
	return bw, func(err error) error {
		if err != nil { // the replay's own error: no file
			f.Close()
			os.Remove(f.Name())
			return err
		}
		err = bw.Flush()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Chmod(f.Name(), 0o644)
		}
		if err == nil {
			err = os.Rename(f.Name(), path)
		}
		if err != nil {
			os.Remove(f.Name())
			return fmt.Errorf("--out %s: %w", path, err)
		}
		return nil
	}, nil
}

// candidateName names the candidate config in the report.
func candidateName(path string) string {
	if path == "" {
		return "the embedded defaults"
	}
	return filepath.Base(path)
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
