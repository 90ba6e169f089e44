package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
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
	return []*cobra.Command{statusCmd(environ, stdout), watchCmd(environ, stdout), override, reportCmd(environ, stdout), fleetCmd(environ, stdout)}
}

// remote holds the flags every client command shares.
type remote struct {
	environ      []string
	addr, token  string
	json         bool
	flagsCommand *cobra.Command
	// tokenVars are the variables read, in order, when --token is not
	// given; the flag's help names them in that order.
	tokenVars []string
}

// addrVar is the variable read when --addr is not given.
const addrVar = "DEGRADED_ADDR"

// newRemote adds the shared flags to cmd. tokenVars are the variables
// read, in order, for a --token not given: DEGRADED_TOKEN when none are
// named. The flags' help is made from the same lists, so that it names
// exactly what is read.
func newRemote(cmd *cobra.Command, environ []string, tokenVars ...string) *remote {
	if len(tokenVars) == 0 {
		tokenVars = []string{"DEGRADED_TOKEN"}
	}
	r := &remote{environ: environ, flagsCommand: cmd, tokenVars: tokenVars}
	f := cmd.Flags()
	f.StringVar(&r.addr, "addr", defaultAddr, "daemon base URL or host:port (env "+addrVar+")")
	f.StringVar(&r.token, "token", "", "bearer token (env "+strings.Join(tokenVars, ", then ")+")")
	f.BoolVar(&r.json, "json", false, "print JSON for scripts")
	return r
}

// client builds a client from the flags, falling back to the environment
// for flags not given.
func (r *remote) client(opts ...client.Option) (*client.Client, error) {
	f := r.flagsCommand.Flags()
	addr, token := r.addr, r.token
	if v, ok := lookupEnv(r.environ, addrVar); ok && !f.Changed("addr") && v != "" {
		addr = v
	}
	if !f.Changed("token") {
		for _, name := range r.tokenVars {
			if v, ok := lookupEnv(r.environ, name); ok && v != "" {
				token = v
				break
			}
		}
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr // host:port, as `serve --listen` takes it
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

// explain is explain, with the variables this command reads for its
// token named when the daemon refuses it.
func (r *remote) explain(c *client.Client, err error) error {
	var ae *client.APIError
	if errors.As(err, &ae) && ae.StatusCode == http.StatusUnauthorized {
		return fmt.Errorf("daemon at %s refused the token (set --token or %s): %s", c.Addr(), strings.Join(r.tokenVars, " or "), ae.Message)
	}
	return explain(c, err)
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
		var raw json.RawMessage
		if err := c.GetJSON(cmd.Context(), "/v1/level", &raw); err != nil {
			return explain(c, err)
		}
		if r.json {
			_, err := fmt.Fprintf(stdout, "%s\n", raw)
			return err
		}
		var doc statusDoc
		if err := json.Unmarshal(raw, &doc.State); err != nil {
			return fmt.Errorf("daemon at %s sent a state document this CLI cannot read: %w", c.Addr(), err)
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			return fmt.Errorf("daemon at %s sent a state document this CLI cannot read: %w", c.Addr(), err)
		}
		table, err := c.Levels(cmd.Context())
		if err != nil {
			return explain(c, err)
		}
		printStatus(stdout, doc, table, time.Now())
		return nil
	}
	return cmd
}

func overrideSetCmd(environ []string, stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "set LEVEL --ttl 15m --reason TEXT [--floor]",
		Short:   "Pin the level (or, with --floor, keep it at least LEVEL) for --ttl; LEVEL in any case",
		Example: "  degraded override set Major --ttl 15m --reason 'INC-42: shed search during failover'",
		Args:    cobra.ExactArgs(1),
	}
	r := newRemote(cmd, environ)
	var req client.OverrideRequest
	cmd.Flags().DurationVar(&req.TTL, "ttl", 0, "how long the override lasts, e.g. 15m (required)")
	cmd.Flags().StringVar(&req.Reason, "reason", "", "why, for the audit log, e.g. an incident number (required)")
	cmd.Flags().BoolVar(&req.Floor, "floor", false, "floor instead of pin: publish max(automatic level, LEVEL)")
	fleet := cmd.Flags().Bool("fleet", false, "set the fleet override: every instance of the fleet (fleet mode)")
	_ = cmd.MarkFlagRequired("ttl")
	_ = cmd.MarkFlagRequired("reason")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := r.client()
		if err != nil {
			return err
		}
		table, err := c.Levels(cmd.Context())
		if err != nil {
			return explain(c, err)
		}
		if req.Level, err = levelName(table, args[0]); err != nil {
			return usageError{err}
		}
		if *fleet {
			return setFleetOverride(cmd, c, req, r.json, stdout)
		}
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

// levelName finds name in the daemon's table, ignoring case, and returns
// it as the table spells it.
func levelName(table []client.Level, name string) (string, error) {
	names := make([]string, len(table))
	for i, l := range table {
		if strings.EqualFold(l.Name, name) {
			return l.Name, nil
		}
		names[i] = l.Name
	}
	return "", fmt.Errorf("unknown level %q: the daemon's levels are %s", name, strings.Join(names, ", "))
}

func overrideClearCmd(environ []string, stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "clear",
		Short: "End the active override; automatic control resumes from the published level",
		Args:  cobra.NoArgs,
	}
	r := newRemote(cmd, environ)
	fleet := cmd.Flags().Bool("fleet", false, "clear the fleet override on every instance (fleet mode); a local clear never does")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := r.client()
		if err != nil {
			return err
		}
		if *fleet {
			return clearFleetOverride(cmd, c, r.json, stdout)
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
		if st.Fleet != nil && st.Fleet.Override != nil {
			o := st.Fleet.Override
			msg += fmt.Sprintf("; fleet override still in force (%s %s until %s, clear it with --fleet)", o.Mode, o.Level, stamp(o.ExpiresAt))
		}
		_, err = fmt.Fprintf(stdout, "%s; level now %s, sequence %d\n", msg, st.Level, st.Sequence)
		return err
	}
	return cmd
}

func reportCmd(environ []string, stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "report [--success N] [--failure M] [--signal NAME=VALUE]...",
		Short: "Add outcome counts to the daemon's error window, or push custom signal values",
		Long: "report sends outcome counts (POST /v1/outcomes) and values of custom signals\n" +
			"(PUT /v1/signals/NAME). The token is --token, else DEGRADED_REPORT_TOKEN, else DEGRADED_TOKEN.",
		Args: cobra.NoArgs,
	}
	r := newRemote(cmd, environ, "DEGRADED_REPORT_TOKEN", "DEGRADED_TOKEN")
	var success, failure int64
	var pushed []string
	cmd.Flags().Int64Var(&success, "success", 0, "successful outcomes")
	cmd.Flags().Int64Var(&failure, "failure", 0, "failed outcomes")
	cmd.Flags().StringArrayVar(&pushed, "signal", nil, "a custom signal's value, NAME=VALUE (repeatable)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		outcomes := cmd.Flags().Changed("success") || cmd.Flags().Changed("failure")
		if !outcomes && len(pushed) == 0 {
			return usageError{errors.New("report needs --success and/or --failure, or --signal NAME=VALUE")}
		}
		values, err := parseSignals(pushed)
		if err != nil {
			return usageError{err}
		}
		c, err := r.client()
		if err != nil {
			return err
		}
		result := map[string]any{}
		if outcomes {
			n, err := c.Report(cmd.Context(), success, failure)
			if err != nil {
				return r.explain(c, err)
			}
			result["accepted"] = n
			if !r.json {
				fmt.Fprintf(stdout, "accepted %d outcomes\n", n)
			}
		}
		for _, v := range values {
			if err := c.PushSignal(cmd.Context(), v.name, v.value); err != nil {
				return fmt.Errorf("signal %s: %w", v.name, r.explain(c, err))
			}
			if !r.json {
				fmt.Fprintf(stdout, "signal %s = %g\n", v.name, v.value)
			}
		}
		if len(values) > 0 {
			result["signals"] = len(values)
		}
		if r.json {
			return printJSON(stdout, result)
		}
		return nil
	}
	return cmd
}

type signalValue struct {
	name  string
	value float64
}

// parseSignals reads NAME=VALUE arguments of --signal.
func parseSignals(args []string) ([]signalValue, error) {
	var out []signalValue
	for _, a := range args {
		name, raw, ok := strings.Cut(a, "=")
		v, err := strconv.ParseFloat(raw, 64)
		if !ok || name == "" || err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("--signal %q: want NAME=VALUE with a finite number, e.g. queue_depth=1234", a)
		}
		out = append(out, signalValue{name, v})
	}
	return out, nil
}
