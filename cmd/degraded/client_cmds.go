package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/degraded/degraded/client"
	"github.com/spf13/cobra"
)

// defaultAddr is where the client commands look for the daemon.
const defaultAddr = "http://127.0.0.1:8470"

// clientCmds are the operator commands that talk to a running daemon:
// status, watch, override set|clear and report.
func clientCmds(environ []string, stdout io.Writer) []*cobra.Command {
	override := &cobra.Command{
		Use:   "override",
		Short: "Pin or floor the level during an incident, or clear that",
		Args:  cobra.NoArgs,
	}
	override.AddCommand(overrideSetCmd(environ, stdout), overrideClearCmd(environ, stdout))
	return []*cobra.Command{statusCmd(environ, stdout), watchCmd(environ, stdout), override, reportCmd(environ, stdout)}
}

// remote holds the flags every client command shares.
type remote struct {
	environ      []string
	addr, token  string
	json         bool
	flagsCommand *cobra.Command
}

func newRemote(cmd *cobra.Command, environ []string) *remote {
	r := &remote{environ: environ, flagsCommand: cmd}
	f := cmd.Flags()
	f.StringVar(&r.addr, "addr", defaultAddr, "daemon base URL (env DEGRADED_ADDR)")
	f.StringVar(&r.token, "token", "", "bearer token (env DEGRADED_TOKEN)")
	f.BoolVar(&r.json, "json", false, "print JSON for scripts")
	return r
}

// client builds a client from the flags, falling back to the environment
// for flags not given.
func (r *remote) client(opts ...client.Option) (*client.Client, error) {
	f := r.flagsCommand.Flags()
	addr, token := r.addr, r.token
	if v, ok := lookupEnv(r.environ, "DEGRADED_ADDR"); ok && !f.Changed("addr") && v != "" {
		addr = v
	}
	if v, ok := lookupEnv(r.environ, "DEGRADED_TOKEN"); ok && !f.Changed("token") {
		token = v
	}
	c, err := client.New(addr, append([]client.Option{client.WithToken(token)}, opts...)...)
	if err != nil {
		return nil, usageError{fmt.Errorf("--addr: %w", err)}
	}
	return c, nil
}

// lookupEnv finds key in a KEY=VALUE list; the last entry wins, as in exec.
func lookupEnv(environ []string, key string) (string, bool) {
	val, found := "", false
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			val, found = v, true
		}
	}
	return val, found
}

// explain turns the daemon's refusals into messages and exit codes: a bad
// request is the operator's usage mistake (2), anything else a runtime
// failure (1).
func explain(c *client.Client, err error) error {
	var ae *client.APIError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae) && ae.StatusCode == http.StatusBadRequest:
		return usageError{fmt.Errorf("daemon at %s refused the request: %s", c.Addr(), ae.Message)}
	case errors.As(err, &ae) && ae.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("daemon at %s refused the token (set --token or DEGRADED_TOKEN): %s", c.Addr(), ae.Message)
	case errors.As(err, &ae):
		return fmt.Errorf("daemon at %s answered %d: %s", c.Addr(), ae.StatusCode, ae.Message)
	}
	return err
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func statusCmd(environ []string, stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the current level, why, the signals against the next level, and any override",
		Args:  cobra.NoArgs,
	}
	r := newRemote(cmd, environ)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := r.client()
		if err != nil {
			return err
		}
		st, err := c.Fetch(cmd.Context())
		if err != nil {
			return explain(c, err)
		}
		if r.json {
			return printJSON(stdout, st)
		}
		table, err := c.Levels(cmd.Context())
		if err != nil {
			return explain(c, err)
		}
		printStatus(stdout, st, table, time.Now())
		return nil
	}
	return cmd
}

// printStatus writes the state as a table a person reads at a glance.
func printStatus(w io.Writer, st client.State, table []client.Level, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "Level\t%s (%d of %d): priority < %d shed\n", st.Level, st.Index, len(table)-1, st.PriorityThreshold)
	fmt.Fprintf(tw, "Source\t%s (recommended: %s)\n", st.Source, st.Recommended)
	fmt.Fprintf(tw, "Reason\t%s\n", st.Reason)
	fmt.Fprintf(tw, "Since\t%s (%s)\n", stamp(st.Since), ago(now, st.Since))
	if st.EarliestRecoveryAt != nil {
		fmt.Fprintf(tw, "Recovery\tnot before %s (%s)\n", stamp(*st.EarliestRecoveryAt), ago(now, *st.EarliestRecoveryAt))
	}
	if o := st.Override; o != nil {
		fmt.Fprintf(tw, "Override\t%s %s until %s (%s): %s\n", o.Mode, o.Level, stamp(o.ExpiresAt), ago(now, o.ExpiresAt), o.Reason)
	} else {
		fmt.Fprintf(tw, "Override\tnone\n")
	}
	disabled := "none"
	if len(st.DisabledFeatures) > 0 {
		disabled = strings.Join(st.DisabledFeatures, ", ")
	}
	fmt.Fprintf(tw, "Disabled\t%s\n", disabled)
	fmt.Fprintf(tw, "Sequence\t%d\n", st.Sequence)
	tw.Flush()
	fmt.Fprintln(w)

	var next *client.Level
	if st.Index+1 < len(table) {
		next = &table[st.Index+1]
	}
	heading := "(most severe level)"
	if next != nil {
		heading = "next level: " + next.Name
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "Signal\tnow\t%s\n", heading)
	sig := st.Signals
	row := func(name string, v *float64, limit func(client.Level) *float64, extra string) {
		th := "-"
		if next != nil {
			if p := limit(*next); p != nil {
				th = "> " + percent(p)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s%s\n", name, percent(v), th, extra)
	}
	row("cpu", sig.CPUPercent, func(l client.Level) *float64 { return l.CPUPercent }, "")
	row("memory", sig.MemoryPercent, func(l client.Level) *float64 { return l.MemoryPercent }, "")
	row("error rate", sig.ErrorRatePercent, func(l client.Level) *float64 { return l.ErrorRatePercent },
		fmt.Sprintf(" (%d attempts, %d failures in the window)", sig.WindowAttempts, sig.WindowFailures))
	tw.Flush()
	if sig.SampledAt != nil {
		fmt.Fprintf(w, "Sampled %s (%s)\n", stamp(*sig.SampledAt), ago(now, *sig.SampledAt))
	}
}

func percent(p *float64) string {
	if p == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.2f%%", *p)
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

// ago says how far t is from now, e.g. "5m0s ago" or "in 55s".
func ago(now, t time.Time) string {
	d := now.Sub(t).Round(time.Second)
	if d < 0 {
		return "in " + (-d).String()
	}
	return d.String() + " ago"
}

func watchCmd(environ []string, stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Print one line per level change until interrupted",
		Args:  cobra.NoArgs,
	}
	r := newRemote(cmd, environ)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := r.client(client.WithFailMode(client.FailLastKnown))
		if err != nil {
			return err
		}
		ctx := cmd.Context()
		if _, err := c.Fetch(ctx); err != nil { // fail fast when nothing is there
			return explain(c, err)
		}
		var werr error
		cancel := c.OnChange(func(_, st client.State) {
			if werr != nil {
				return
			}
			if r.json {
				werr = printJSON(stdout, st)
				return
			}
			_, werr = fmt.Fprintln(stdout, watchLine(st))
		})
		defer cancel()
		ctx, stop := context.WithCancel(ctx)
		defer stop()
		err = c.Run(ctx)
		if werr != nil {
			return werr
		}
		if errors.Is(err, context.Canceled) {
			return nil // Ctrl-C: the normal end of a watch
		}
		return err
	}
	return cmd
}

// watchLine is one line of `degraded watch`.
func watchLine(st client.State) string {
	at := st.Since
	if o := st.Override; o != nil && o.SetAt.After(at) {
		at = o.SetAt
	}
	line := fmt.Sprintf("%s  #%d  %-10s threshold %-3d %-8s %s", stamp(at), st.Sequence, st.Level, st.PriorityThreshold, st.Source, st.Reason)
	if o := st.Override; o != nil {
		line += fmt.Sprintf("  [override %s %s until %s]", o.Mode, o.Level, stamp(o.ExpiresAt))
	}
	return line
}

func overrideSetCmd(environ []string, stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "set LEVEL --ttl 15m --reason TEXT [--floor]",
		Short:   "Pin the level (or, with --floor, keep it at least LEVEL) for --ttl",
		Example: "  degraded override set Major --ttl 15m --reason 'INC-42: shed search during failover'",
		Args:    cobra.ExactArgs(1),
	}
	r := newRemote(cmd, environ)
	var req client.OverrideRequest
	cmd.Flags().DurationVar(&req.TTL, "ttl", 0, "how long the override lasts, e.g. 15m (required)")
	cmd.Flags().StringVar(&req.Reason, "reason", "", "why, for the audit log, e.g. an incident number (required)")
	cmd.Flags().BoolVar(&req.Floor, "floor", false, "floor instead of pin: publish max(automatic level, LEVEL)")
	_ = cmd.MarkFlagRequired("ttl")
	_ = cmd.MarkFlagRequired("reason")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := r.client()
		if err != nil {
			return err
		}
		req.Level = args[0]
		st, err := c.SetOverride(cmd.Context(), req)
		if err != nil {
			return explain(c, err)
		}
		if r.json {
			return printJSON(stdout, st)
		}
		o := st.Override
		if o == nil { // cannot happen with a daemon of this version
			return fmt.Errorf("daemon at %s accepted the override but reports none", c.Addr())
		}
		_, err = fmt.Fprintf(stdout, "override %s %s until %s (%s); level now %s, sequence %d\n",
			o.Mode, o.Level, stamp(o.ExpiresAt), o.Reason, st.Level, st.Sequence)
		return err
	}
	return cmd
}

func overrideClearCmd(environ []string, stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "clear",
		Short: "End the active override; automatic control resumes from the published level",
		Args:  cobra.NoArgs,
	}
	r := newRemote(cmd, environ)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := r.client()
		if err != nil {
			return err
		}
		before, err := c.Fetch(cmd.Context())
		if err != nil {
			return explain(c, err)
		}
		st, err := c.ClearOverride(cmd.Context())
		if err != nil {
			return explain(c, err)
		}
		if r.json {
			return printJSON(stdout, st)
		}
		msg := "override cleared"
		if before.Override == nil {
			msg = "no override was active"
		}
		_, err = fmt.Fprintf(stdout, "%s; level now %s, sequence %d\n", msg, st.Level, st.Sequence)
		return err
	}
	return cmd
}

func reportCmd(environ []string, stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "report --success N --failure M",
		Short: "Add outcome counts to the daemon's error window",
		Args:  cobra.NoArgs,
	}
	r := newRemote(cmd, environ)
	var success, failure int64
	cmd.Flags().Int64Var(&success, "success", 0, "successful outcomes")
	cmd.Flags().Int64Var(&failure, "failure", 0, "failed outcomes")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if !cmd.Flags().Changed("success") && !cmd.Flags().Changed("failure") {
			return usageError{errors.New("report needs --success and/or --failure")}
		}
		c, err := r.client()
		if err != nil {
			return err
		}
		n, err := c.Report(cmd.Context(), success, failure)
		if err != nil {
			return explain(c, err)
		}
		if r.json {
			return printJSON(stdout, map[string]int64{"accepted": n})
		}
		_, err = fmt.Fprintf(stdout, "accepted %d outcomes\n", n)
		return err
	}
	return cmd
}
