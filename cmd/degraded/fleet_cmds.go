package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/degraded/degraded/client"
	"github.com/spf13/cobra"
)

// fleetCmd is `degraded fleet status`: the fleet view as a table.
func fleetCmd(environ []string, stdout io.Writer) *cobra.Command {
	fleet := &cobra.Command{
		Use:   "fleet",
		Short: "Show the fleet a daemon in fleet mode belongs to",
		Args:  cobra.NoArgs,
	}
	status := &cobra.Command{
		Use:   "status",
		Short: "Show the fleet: its aggregator and term, the fleet override and who set it, the instances",
		Args:  cobra.NoArgs,
	}
	r := newRemote(status, environ)
	limit := status.Flags().Int("limit", 100, "list at most this many instances (1..1000)")
	status.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := r.client()
		if err != nil {
			return err
		}
		var f client.Fleet
		if err := c.GetJSON(cmd.Context(), fmt.Sprintf("/v1/fleet?limit=%d", *limit), &f); err != nil {
			return explain(c, err)
		}
		if r.json {
			return printJSON(stdout, f)
		}
		return printFleet(stdout, f, time.Now())
	}
	fleet.AddCommand(status)
	return fleet
}

func printFleet(w io.Writer, f client.Fleet, now time.Time) error {
	conn := "connected to etcd"
	if !f.Connected {
		conn = "etcd UNREACHABLE: showing the last view seen"
	}
	fmt.Fprintf(w, "Fleet       %s (this instance: %s; %s)\n", f.Name, f.Instance, conn)
	switch a := f.Aggregator; {
	case a == nil:
		fmt.Fprintln(w, "Aggregator  none yet (the fleet error rate is each instance's local one)")
	case a.Stale:
		fmt.Fprintf(w, "Aggregator  %s, term %d, last published %s: STALE (instances use their local error rate)\n", a.Instance, a.Term, ago(now, a.At))
	default:
		fmt.Fprintf(w, "Aggregator  %s, term %d, published %s\n", a.Instance, a.Term, ago(now, a.At))
	}
	if o := f.Override; o != nil {
		fmt.Fprintf(w, "Override    fleet %s %s until %s by %s (%s)\n", o.Mode, o.Level, stamp(o.ExpiresAt), actorName(o.Actor), o.Reason)
	} else {
		fmt.Fprintln(w, "Override    none")
	}
	if r := f.OverrideRefused; r != nil {
		fmt.Fprintf(w, "Refused     the fleet override of revision %d (level %q, by %s): %s\n", r.Revision, r.Level, actorName(r.Actor), r.Error)
	}
	if f.ErrorRatePercent != nil {
		n := 0
		for _, c := range f.Levels {
			n += c
		}
		fmt.Fprintf(w, "Errors      %.2f%% (%d failures of %d attempts over %d instances)\n", *f.ErrorRatePercent, f.WindowFailures, f.WindowAttempts, n)
	}
	if total := int(f.InstancesTotal); total > len(f.Instances) {
		fmt.Fprintf(w, "Listed      %d of %d instances (--limit to see more)\n", len(f.Instances), total)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tLEVEL\tSOURCE\tSIGNALS\tAGE")
	for _, in := range f.Instances {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", in.Instance, in.Level, in.Source, signalSummary(in.Signals), ago(now, in.SeenAt))
	}
	return tw.Flush()
}

// actorName is an actor as printed: "unknown" when a daemon too old to
// record one set it.
func actorName(a string) string {
	if a == "" {
		return "unknown"
	}
	return a
}

// signalSummary prints an instance's signal values that have one, e.g.
// "cpu 12.5% error_rate 1.2%", in name order; "-" when none has.
func signalSummary(raw json.RawMessage) string {
	var sigs map[string]any
	if json.Unmarshal(raw, &sigs) != nil {
		return "-"
	}
	var parts []string
	for k, v := range sigs {
		n, ok := v.(float64)
		switch {
		case !ok:
		case strings.HasSuffix(k, "_percent") && !strings.HasSuffix(k, "avg60_percent"):
			parts = append(parts, fmt.Sprintf("%s %.1f%%", strings.TrimSuffix(k, "_percent"), n))
		case k == "latency_ms":
			parts = append(parts, fmt.Sprintf("latency %.0fms", n))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// setFleetOverride is `override set --fleet`.
func setFleetOverride(cmd *cobra.Command, c *client.Client, req client.OverrideRequest, asJSON bool, stdout io.Writer) error {
	f, err := c.SetFleetOverride(cmd.Context(), req)
	if err != nil {
		return explain(c, err)
	}
	if asJSON {
		return printJSON(stdout, f)
	}
	o := f.Override
	if o == nil { // cannot happen with a daemon of this version
		return fmt.Errorf("daemon at %s accepted the fleet override but reports none", c.Addr())
	}
	_, err = fmt.Fprintf(stdout, "fleet override %s %s until %s (%s) committed for fleet %s; every instance applies it as it sees it\n",
		o.Mode, o.Level, stamp(o.ExpiresAt), o.Reason, f.Name)
	return err
}

// clearFleetOverride is `override clear --fleet`.
func clearFleetOverride(cmd *cobra.Command, c *client.Client, asJSON bool, stdout io.Writer) error {
	f, err := c.ClearFleetOverride(cmd.Context())
	if err != nil {
		return explain(c, err)
	}
	if asJSON {
		return printJSON(stdout, f)
	}
	_, err = fmt.Fprintf(stdout, "fleet override cleared for fleet %s\n", f.Name)
	return err
}
