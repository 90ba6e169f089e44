package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/degraded/degraded/client"
	"github.com/spf13/cobra"
)

func watchCmd(environ []string, stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Print one line per change of the level, its admission or an override, with who made it, and when contact with the daemon is lost and back, until interrupted",
		Args:  cobra.NoArgs,
	}
	r := newRemote(cmd, environ)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		p := &watcher{w: stdout, json: r.json}
		c, err := r.client(client.WithFailMode(client.FailLastKnown), client.WithLogger(slog.New(p)))
		if err != nil {
			return err
		}
		ctx := cmd.Context()
		if _, err := c.Fetch(ctx); err != nil { // fail fast when nothing is there
			return explain(c, err)
		}
		if table, err := c.Levels(ctx); err == nil {
			p.table = table
		}
		p.history = func(n uint64) ([]transition, error) {
			var h struct {
				Transitions []transition `json:"transitions"`
			}
			err := c.GetJSON(ctx, fmt.Sprintf("/v1/history?limit=%d", min(n, 1000)), &h)
			return h.Transitions, err
		}
		cancel := c.OnChange(func(_, st client.State) { p.state(st) })
		defer cancel()
		err = c.Run(ctx)
		if werr := p.failed(); werr != nil {
			return werr
		}
		if errors.Is(err, context.Canceled) {
			return nil // Ctrl-C: the normal end of a watch
		}
		return err
	}
	return cmd
}

// transition is an entry of GET /v1/history.
type transition struct {
	Sequence uint64 `json:"sequence"`
	From     string `json:"from"`
	To       string `json:"to"`
	Source   string `json:"source"`
	Reason   string `json:"reason"`
	// Actor is who made the change ("alice", "admin", "degraded"...);
	// "" from a daemon older than actors.
	Actor string    `json:"actor"`
	At    time.Time `json:"at"`
}

// watcher prints what `degraded watch` sees: each new state, the history
// entries between two states that arrived together (several changes can
// share a health check, and the stream carries only the latest), and the
// client's log records about contact with the daemon, which it receives as
// a slog.Handler.
type watcher struct {
	w       io.Writer
	json    bool
	table   []client.Level
	history func(n uint64) ([]transition, error) // the newest n entries

	mu      sync.Mutex
	err     error        // the first failed write
	started bool         // a state was printed
	prev    client.State // the last state printed
}

// state prints st, after the entries the daemon recorded since the last
// state printed, naming who made the change when the history says. Called
// from the client's OnChange, one at a time.
func (p *watcher) state(st client.State) {
	p.mu.Lock()
	started, prev := p.started, p.prev
	p.started, p.prev = true, st
	p.mu.Unlock()
	last := prev.Sequence
	if started && st.Sequence <= last {
		last = 0 // the daemon started again without its state: no gap to fill
	}
	var actor string
	// A change of partial alone is no history entry: only the others (and
	// any gap, which may hide some) are looked up.
	if p.history != nil && st.Sequence > 0 && (!started || st.Sequence > last+1 || !partialOnly(prev, st)) {
		n := uint64(1)
		if started && last > 0 {
			n = st.Sequence - last
		}
		entries, err := p.history(n)
		if err != nil && started && st.Sequence > last+1 {
			p.line(fmt.Sprintf("%s  %-6s %d changes before #%d not shown: %v", stamp(time.Now()), "--", st.Sequence-last-1, st.Sequence, err), nil)
		}
		slices.SortFunc(entries, func(a, b transition) int { return cmp.Compare(a.Sequence, b.Sequence) })
		for _, t := range entries {
			switch {
			case t.Sequence == st.Sequence:
				actor = t.Actor
			case started && last > 0 && t.Sequence > last && t.Sequence < st.Sequence:
				p.line(historyLine(t, p.threshold(t.To)), t)
			}
		}
	}
	p.line(watchLine(st, actor), st)
}

// partialOnly reports whether b differs from a only where no history
// entry is made: the partial admission (and what travels with samples).
func partialOnly(a, b client.State) bool {
	same := func(x, y *client.Override) bool {
		if x == nil || y == nil {
			return x == y
		}
		return x.Level == y.Level && x.Mode == y.Mode && x.Reason == y.Reason && x.Actor == y.Actor &&
			x.SetAt.Equal(y.SetAt) && x.ExpiresAt.Equal(y.ExpiresAt)
	}
	var af, bf *client.Override
	if a.Fleet != nil && a.Fleet.Override != nil {
		af = &a.Fleet.Override.Override
	}
	if b.Fleet != nil && b.Fleet.Override != nil {
		bf = &b.Fleet.Override.Override
	}
	return a.Level == b.Level && a.Source == b.Source && a.PriorityThreshold == b.PriorityThreshold &&
		a.Shadow == b.Shadow && a.Reason == b.Reason && slices.Equal(a.DisabledFeatures, b.DisabledFeatures) &&
		same(a.Override, b.Override) && same(af, bf)
}

// threshold is the named level's priority threshold, or -1 if unknown.
func (p *watcher) threshold(level string) int {
	for _, l := range p.table {
		if l.Name == level {
			return l.PriorityThreshold
		}
	}
	return -1
}

// line writes text, or v as JSON with --json; the first failure sticks.
func (p *watcher) line(text string, v any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return
	}
	if p.json {
		p.err = printJSON(p.w, v)
		return
	}
	_, p.err = fmt.Fprintln(p.w, text)
}

func (p *watcher) failed() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Enabled lets through what the client logs at INFO and above.
func (p *watcher) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

// Handle prints a record of the client: lost contact, stale, restored.
func (p *watcher) Handle(_ context.Context, r slog.Record) error {
	text := r.Message
	ev := map[string]any{"at": r.Time.UTC(), "event": r.Message}
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "error":
			text += ": " + a.Value.String()
			ev["error"] = a.Value.String()
		case "after":
			text += " after " + a.Value.Duration().Round(time.Second).String()
			ev["after"] = a.Value.Duration().String()
		}
		return true
	})
	p.line(fmt.Sprintf("%s  %-6s %s", stamp(r.Time), "--", text), ev)
	return nil
}

// WithAttrs returns p: the client logs with no attributes preset.
func (p *watcher) WithAttrs([]slog.Attr) slog.Handler { return p }

// WithGroup returns p: the client logs with no groups.
func (p *watcher) WithGroup(string) slog.Handler { return p }

// watchLine is one line of `degraded watch` for a state: the columns,
// who made the change (actor, from the history; "" when unknown), then in
// brackets what the threshold alone does not say (a partial admission,
// shadow mode) and the overrides in force, with who set them.
func watchLine(st client.State, actor string) string {
	at := st.Since
	if o := st.Override; o != nil && o.SetAt.After(at) {
		at = o.SetAt
	}
	line := columns(at, st.Sequence, st.Level, st.PriorityThreshold, st.Source, st.Reason) + by(actor)
	if st.Partial != nil || st.Shadow {
		line += "  [" + shedText(st) + "]"
	}
	if o := st.Override; o != nil {
		line += "  [override " + overrideBrief(*o) + "]"
	}
	if f := st.Fleet; f != nil && f.Override != nil {
		line += "  [fleet override " + overrideBrief(f.Override.Override) + "]"
	}
	return line
}

// overrideBrief is "pin Major until T, set by alice".
func overrideBrief(o client.Override) string {
	s := fmt.Sprintf("%s %s until %s", o.Mode, o.Level, stamp(o.ExpiresAt))
	if o.Actor != "" {
		s += ", set by " + o.Actor
	}
	return s
}

// by names who made a change after its reason; nothing when unknown.
func by(actor string) string {
	if actor == "" {
		return ""
	}
	return "  by " + actor
}

// historyLine is one line of `degraded watch` for a history entry that no
// state of its own carried.
func historyLine(t transition, threshold int) string {
	return columns(t.At, t.Sequence, t.To, threshold, t.Source, t.Reason) + by(t.Actor)
}

// columns lays out a watch line so that the columns stay aligned up to
// sequence #99999.
func columns(at time.Time, seq uint64, level string, threshold int, source, reason string) string {
	th := "-"
	if threshold >= 0 {
		th = fmt.Sprint(threshold)
	}
	return fmt.Sprintf("%s  %-6s %-10s threshold %-3s %-8s %s", stamp(at), fmt.Sprintf("#%d", seq), level, th, source, reason)
}
