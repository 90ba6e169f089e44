package replay

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// WriteText writes the result for a terminal: the candidate's transitions
// with reasons, the recorded ones, then the time at each level and the
// flaps side by side. levelOrder lists the candidate's levels, Normal
// first; recorded levels it lacks follow.
func (r *Result) WriteText(w io.Writer, levelOrder []string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "replayed %d lines from %s to %s", r.Lines, stamp(r.First), stamp(r.Last))
	if r.Corrupt > 0 {
		fmt.Fprintf(tw, " (%d corrupt lines skipped)", r.Corrupt)
	}
	fmt.Fprintln(tw)
	section := func(title string, ts []Transition, reasons bool) {
		fmt.Fprintf(tw, "\n%s: %d\n", title, len(ts))
		for _, t := range ts {
			fmt.Fprintf(tw, "  %s\t%s -> %s\t%s", stamp(t.At), t.From, t.To, t.Source)
			if reasons {
				fmt.Fprintf(tw, "\t%s", t.Reason)
			}
			fmt.Fprintln(tw)
		}
	}
	section("candidate transitions", r.Transitions, true)
	section("recorded transitions", r.Recorded, false)

	fmt.Fprintf(tw, "\ntime at level\tcandidate\trecorded\n")
	names := slices.Clone(levelOrder)
	for n := range r.RecordedTimeAtLevel {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for _, n := range names {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", n, show(r.TimeAtLevel, n), show(r.RecordedTimeAtLevel, n))
	}
	fmt.Fprintf(tw, "flaps (re-entered within %s)\t%d\t%d\n", time.Duration(r.FlapWindow), r.Flaps, r.RecordedFlaps)
	return tw.Flush()
}

// show is a level's time (0s when it was never held).
func show(m map[string]Duration, name string) string {
	b, _ := m[name].MarshalText()
	return string(b)
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339Nano) // UTC is written "Z"
}
