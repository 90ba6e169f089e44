package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/degraded/degraded/client"
)

// statusDoc is the state document with what status reads beyond
// client.State: the reports a newer daemon counts, and each signal's state.
type statusDoc struct {
	State   client.State `json:"-"`
	Reports *struct {
		RefusedTotal   int64      `json:"refused_total"`
		LastRefusedAt  *time.Time `json:"last_refused_at"`
		WindowAttempts *int64     `json:"window_attempts"`
		WindowFailures *int64     `json:"window_failures"`
	} `json:"reports"`
	Signals struct {
		Status map[string]string `json:"status"`
	} `json:"signals"`
	// StateFile is set while the daemon cannot save its state.
	StateFile *struct {
		Error        string    `json:"error"`
		FailingSince time.Time `json:"failing_since"`
		Held         bool      `json:"held"`
	} `json:"state_file"`
}

// printStatus writes the state as a table a person reads at a glance.
func printStatus(w io.Writer, doc statusDoc, table []client.Level, now time.Time) {
	st := doc.State
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "Level\t%s (%d of %d): %s\n", st.Level, st.Index, len(table)-1, shedText(st))
	if f := doc.StateFile; f != nil {
		then := "a restart goes back to the state last saved"
		if f.Held {
			then = "HELD: nothing in this document can change (the level, its signals, overrides) until a save succeeds"
		}
		fmt.Fprintf(tw, "State file\tNOT SAVED since %s (%s): %s; %s\n", stamp(f.FailingSince), ago(now, f.FailingSince), f.Error, then)
	}
	fmt.Fprintf(tw, "Source\t%s (recommended: %s)\n", st.Source, st.Recommended)
	fmt.Fprintf(tw, "Reason\t%s\n", st.Reason)
	fmt.Fprintf(tw, "Since\t%s (%s)\n", stamp(st.Since), ago(now, st.Since))
	if st.EarliestRecoveryAt != nil {
		fmt.Fprintf(tw, "Recovery\tnot before %s (%s)\n", stamp(*st.EarliestRecoveryAt), ago(now, *st.EarliestRecoveryAt))
	}
	if o := st.Override; o != nil {
		fmt.Fprintf(tw, "Override\t%s\n", overrideText(*o, now))
	} else {
		fmt.Fprintf(tw, "Override\tnone\n")
	}
	if f := st.Fleet; f != nil {
		conn := "connected to etcd"
		if !f.Connected {
			conn = "etcd unreachable: the last fleet override seen stays in force until it expires"
		}
		fmt.Fprintf(tw, "Fleet\t%s, instance %s, %s\n", f.Name, f.Instance, conn)
		if o := f.Override; o != nil {
			fmt.Fprintf(tw, "Fleet override\t%s\n", overrideText(o.Override, now))
		} else {
			fmt.Fprintf(tw, "Fleet override\tnone\n")
		}
	}
	disabled := "none"
	if len(st.DisabledFeatures) > 0 {
		disabled = strings.Join(st.DisabledFeatures, ", ")
	}
	fmt.Fprintf(tw, "Disabled\t%s\n", disabled)
	fmt.Fprintf(tw, "Sequence\t%d\n", st.Sequence)
	if st.Shadow {
		fmt.Fprintf(tw, "Mode\tSHADOW: nothing is shed; services count what this level would shed (degraded_shadow_would_shed_total)\n")
	}
	if rep := doc.Reports; rep != nil && rep.RefusedTotal > 0 {
		last := ""
		if rep.LastRefusedAt != nil {
			last = fmt.Sprintf(" (last %s, %s)", stamp(*rep.LastRefusedAt), ago(now, *rep.LastRefusedAt))
		}
		fmt.Fprintf(tw, "Reports\t%d refused%s: check the report token (the service's client.WithToken against auth.report_token)\n", rep.RefusedTotal, last)
	}
	tw.Flush()
	fmt.Fprintln(w)
	printSignals(w, doc, table, now)
}

// shedText says what the published admission sheds: "nothing shed",
// "sheds priority below 50", or with a partial admission "sheds priority
// below 30, and 77% of 30-49" (the share shed, 1 - fraction, of the band
// from..threshold-1). In shadow mode nothing is shed, so it says what
// would be.
func shedText(st client.State) string {
	var what string
	switch p := st.Partial; {
	case p != nil && p.From < st.PriorityThreshold:
		shed, top := share(1-p.Fraction), st.PriorityThreshold-1
		what = fmt.Sprintf("priority below %d, and %s of %d-%d", p.From, shed, p.From, top)
		if p.From == 0 { // nothing is below 0
			what = fmt.Sprintf("%s of priority 0-%d", shed, top)
		}
	case st.PriorityThreshold > 0:
		what = fmt.Sprintf("priority below %d", st.PriorityThreshold)
	default:
		return "nothing shed"
	}
	if st.Shadow {
		return "would shed " + what + " (shadow mode)"
	}
	return "sheds " + what
}

// share is a fraction as a whole percentage; never 0% or 100% for a
// fraction strictly between 0 and 1.
func share(f float64) string {
	switch pct := f * 100; {
	case pct > 0 && pct < 1:
		return "<1%"
	case pct > 99 && pct < 100:
		return ">99%"
	default:
		return fmt.Sprintf("%.0f%%", pct)
	}
}

// overrideText is an override in words: "pin Major until T (in 14m0s),
// set by alice: INC-42".
func overrideText(o client.Override, now time.Time) string {
	by := ""
	if o.Actor != "" {
		by = ", set by " + o.Actor
	}
	return fmt.Sprintf("%s %s until %s (%s)%s: %s", o.Mode, o.Level, stamp(o.ExpiresAt), ago(now, o.ExpiresAt), by, o.Reason)
}

// printSignals writes the signals table: each configured signal's value
// (or state) and the next level's threshold for it.
func printSignals(w io.Writer, doc statusDoc, table []client.Level, now time.Time) {
	st := doc.State
	var next *client.Level
	if st.Index+1 < len(table) {
		next = &table[st.Index+1]
	}
	heading := "(most severe level)"
	if next != nil {
		heading = "next level: " + next.Name
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "Signal\tnow\t%s\n", heading)
	sig := st.Signals
	row := func(name, key string, v *float64, limit func(client.Level) *float64, format func(*float64) string, extra string) {
		th := "-"
		if next != nil {
			if p := limit(*next); p != nil {
				th = "> " + format(p)
			}
		}
		var now string
		if v != nil {
			now = format(v)
		} else {
			now = signalNow(doc.Signals.Status[key], table, limit)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s%s\n", name, now, th, extra)
	}
	attempts, failures := sig.WindowAttempts, sig.WindowFailures
	if rep := doc.Reports; rep != nil && rep.WindowAttempts != nil && rep.WindowFailures != nil {
		attempts, failures = *rep.WindowAttempts, *rep.WindowFailures // live, not as of the last check
	}
	configured := func(key string) bool { s := doc.Signals.Status[key]; return s != "" && s != "off" }
	row("cpu", "cpu", sig.CPUPercent, func(l client.Level) *float64 { return l.CPUPercent }, percent, "")
	row("memory", "memory", sig.MemoryPercent, func(l client.Level) *float64 { return l.MemoryPercent }, percent, "")
	row("error rate", "error_rate", sig.ErrorRatePercent, func(l client.Level) *float64 { return l.ErrorRatePercent }, percent,
		fmt.Sprintf(" (%d attempts, %d failures in the window)", attempts, failures))
	if configured("latency") {
		row("latency", "latency", sig.LatencyMS, func(l client.Level) *float64 { return l.LatencyMS }, millis,
			fmt.Sprintf(" (%d in the window)", sig.LatencyObservations))
	}
	for _, p := range []struct {
		name      string
		v, avg60  *float64
		threshold func(client.Level) *float64
	}{
		{"cpu_pressure", sig.CPUPressurePercent, sig.CPUPressureAvg60Percent, func(l client.Level) *float64 { return l.CPUPressurePercent }},
		{"memory_pressure", sig.MemoryPressurePercent, sig.MemoryPressureAvg60Percent, func(l client.Level) *float64 { return l.MemoryPressurePercent }},
		{"io_pressure", sig.IOPressurePercent, sig.IOPressureAvg60Percent, func(l client.Level) *float64 { return l.IOPressurePercent }},
	} {
		if configured(p.name) {
			extra := ""
			if p.avg60 != nil {
				extra = " (avg60 " + percent(p.avg60) + ")"
			}
			row(strings.ReplaceAll(p.name, "_", " "), p.name, p.v, p.threshold, percent, extra)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(sig.Custom)) {
		row(name, name, sig.Custom[name], func(l client.Level) *float64 { return l.Custom[name] }, number, "")
	}
	tw.Flush()
	if sig.SampledAt != nil {
		fmt.Fprintf(w, "Sampled %s (%s)\n", stamp(*sig.SampledAt), ago(now, *sig.SampledAt))
	}
}

// signalNow is the "now" column of a signal without a value: its state as
// the daemon names it (failed, warming, absent, off); else "off" when no
// level has a threshold for it, and "no value" otherwise.
func signalNow(state string, table []client.Level, limit func(client.Level) *float64) string {
	if state != "" && state != "available" {
		return state
	}
	for _, l := range table {
		if limit(l) != nil {
			return "no value"
		}
	}
	return "off"
}

func percent(p *float64) string { return fmt.Sprintf("%.2f%%", *p) }

func millis(p *float64) string { return fmt.Sprintf("%.0fms", *p) }

func number(p *float64) string { return fmt.Sprintf("%g", *p) }

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

// ago says how far t is from now, e.g. "5m0s ago" or "in 55s".
func ago(now, t time.Time) string {
	d := now.Sub(t).Round(time.Second)
	if d < 0 {
		return "in " + (-d).String()
	}
	return d.String() + " ago"
}
