package replay

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/degraded/degraded/config"
	"github.com/degraded/degraded/levels"
)

// ErrNoLines is returned when the timeline holds no valid line.
var ErrNoLines = errors.New("no valid timeline line")

// Options say what to replay.
type Options struct {
	// Config is the candidate configuration, already validated.
	Config *config.Config
	// Files are the timeline files (see [Files]).
	Files []string
	// From and To bound the report (zero: open). Lines before From still
	// run through the machine, so that the report starts from the state
	// they left; lines after To are not read further.
	From, To time.Time
	// Context, when it ends, stops the replay: the files are closed (which
	// ends a read blocked on a FIFO) and Run returns its error. nil never
	// ends.
	Context context.Context
	// Seed, if set, draws the candidate's recovery jitter from a source
	// seeded with it. Otherwise each draw is the recorded one (the jitter_r
	// of the line that drew it), capped at the candidate's recovery_jitter,
	// so the recorded config replays as it ran; a candidate with
	// recovery_jitter 0 draws 0.
	Seed *int64
	// Observe, if set, is called with every line the machine takes (up to
	// To, those before From included) once it took it, with the
	// candidate's published state and the config then in force: the HTML
	// report's series. Each line is parsed for the call and not used again
	// by the replay, so fn may keep what it points to.
	Observe func(l levels.Line, candidate levels.Published, cfg levels.Config)
}

// Transition is one change of the published level, the replayed one's
// or the recorded one's. The recording carries no reasons: a recorded
// transition's Reason is "".
type Transition struct {
	At     time.Time `json:"at"`
	From   string    `json:"from"`
	To     string    `json:"to"`
	Source string    `json:"source"`
	Reason string    `json:"reason"`
}

// Result is what a replay found. Durations are written as Go durations
// ("12m0s").
type Result struct {
	// Transitions are the candidate's, oldest first.
	Transitions []Transition `json:"transitions"`
	// TimeAtLevel is the candidate's time at each of its levels, Normal
	// included, between the first and the last line in range (or To).
	TimeAtLevel map[string]Duration `json:"time_at_level"`
	// Flaps counts the candidate's re-entries of a level within FlapWindow
	// of leaving it.
	Flaps int `json:"flaps"`
	// Recorded are the transitions the recording published.
	Recorded []Transition `json:"recorded"`
	// RecordedTimeAtLevel and RecordedFlaps are the same for the recording.
	RecordedTimeAtLevel map[string]Duration `json:"recorded_time_at_level"`
	RecordedFlaps       int                 `json:"recorded_flaps"`
	// FlapWindow is 2 x max(minimum_level_duration, health_check_interval).
	FlapWindow Duration `json:"flap_window"`
	// Lines is the number of valid lines in range; Corrupt the lines
	// skipped because they did not parse.
	Lines   int `json:"lines"`
	Corrupt int `json:"corrupt"`
	// First and Last are the times of the first and last lines in range.
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
	// Recorded config says the candidate is the config the recording was
	// made with (the same digest), which replay then follows through the
	// recorded reloads.
	RecordedConfig bool `json:"recorded_config"`
	// Warnings say what the replay could not apply.
	Warnings []string `json:"-"`
}

// Duration is a time.Duration written as its String, rounded to the
// millisecond.
type Duration time.Duration

// MarshalText writes the duration as "12m0s".
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(time.Duration(d).Round(time.Millisecond).String()), nil
}

// UnmarshalText reads what MarshalText writes.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	*d = Duration(v)
	return err
}

// Run replays o.Files under o.Config. It fails with ErrNoLines when no
// line of the files is valid, and on a file it cannot read.
func Run(o Options) (*Result, error) {
	cand, err := o.Config.Machine()
	if err != nil {
		return nil, err
	}
	c := o.Config
	window := 2 * max(c.MinimumLevelDuration, c.HealthCheckInterval)
	e := &engine{
		cand:     cand,
		from:     o.From,
		to:       o.To,
		res:      &Result{TimeAtLevel: map[string]Duration{}, RecordedTimeAtLevel: map[string]Duration{}, FlapWindow: Duration(window)},
		replayed: newTrack(window, o.From),
		recorded: newTrack(window, o.From),
		warned:   map[string]bool{},
		measured: c.Measured(),
		observe:  o.Observe,
	}
	if o.Seed != nil {
		e.rand = rand.New(rand.NewPCG(uint64(*o.Seed), 0)).Float64
	}
	ctx := o.Context
	if ctx == nil {
		ctx = context.Background()
	}
	valid := 0
	corrupt, err := each(ctx, o.Files, func(l levels.Line) {
		valid++
		if o.To.IsZero() || !l.At.After(o.To) {
			e.line(l)
		}
	})
	e.res.Corrupt = corrupt
	if err != nil {
		return nil, err
	}
	if valid == 0 {
		return nil, fmt.Errorf("%w in %d file(s) (%d corrupt lines skipped)", ErrNoLines, len(o.Files), corrupt)
	}
	e.finish()
	return e.res, nil
}

// engine drives a level machine, the controller's own, over the recorded
// inputs.
type engine struct {
	cand     levels.Config     // the candidate's machine config
	measured map[string]string // the candidate's keys that decide what is measured
	follow   bool              // the candidate is the recording's config: follow its reloads
	m        levels.Machine
	started  bool
	from, to time.Time

	replayed, recorded *track
	res                *Result
	warned             map[string]bool
	rand               func() float64 // seeded draws; nil: the recorded ones
	observe            func(levels.Line, levels.Published, levels.Config)
}

// line feeds one recorded input to the machine.
func (e *engine) line(l levels.Line) {
	if !e.started {
		e.begin(l)
	} else if l.Trigger == levels.TriggerStart {
		e.restart(l)
	}
	inRange := e.inRange(l.At)
	e.recorded.advance(l.At, inRange)
	e.replayed.advance(l.At, inRange)
	if l.Config != nil {
		e.configLine(l)
	}
	var reason string
	switch l.Trigger {
	case levels.TriggerStart, levels.TriggerTick, levels.TriggerEvent:
		out := e.m.Evaluate(levels.Input{At: l.At, Trigger: l.Trigger, Sample: e.sample(l), Reports: l.Inputs(), Jitter: e.draw(l)})
		reason = lastReason(out)
	case levels.TriggerOverride:
		reason = e.override(l)
	case levels.TriggerFleet:
		reason = e.fleet(l)
	}
	if l.ConfigDigest == "" {
		reason = e.followOverrides(l, reason) // a recording from before override lines
	}
	if inRange {
		e.res.Lines++
		if e.res.First.IsZero() {
			e.res.First = l.At
		}
		e.res.Last = l.At
	}
	p := e.m.Published()
	e.replayed.set(l.At, e.m.Config().Table.Level(p.Index).Name, p.Source, reason, inRange)
	e.recorded.set(l.At, l.Published, l.Source, "", inRange)
	if e.observe != nil {
		e.observe(l, p, e.m.Config())
	}
}

// begin starts the replay at the first line: at Normal when it is a
// daemon's start, else where the recording was (mapped by name).
func (e *engine) begin(l levels.Line) {
	e.started = true
	e.follow = l.ConfigDigest != "" && l.ConfigDigest == e.cand.Digest()
	e.res.RecordedConfig = e.follow
	e.m = levels.NewMachine(e.cand, l.At)
	start := levels.NormalName
	if l.Trigger != levels.TriggerStart {
		start = l.Published
		s := levels.Saved{Level: start, Since: l.At, Auto: start, AutoSince: l.At, Override: l.Override.Override()}
		if f := l.FleetOverride.Override(); f != nil {
			s.Fleet = &levels.FleetOverride{Override: *f}
		}
		e.m.Restore(l.At, s, "")
	}
	e.replayed.begin(l.At, e.m.Config().Table.Level(e.m.Published().Index).Name)
	e.recorded.begin(l.At, start)
}

// restart replays a daemon's restart in the recording (a start line after
// the first): the daemon made a new machine and restored what it had
// saved (the levels and their clocks, the overrides, the admission law's
// capacity estimate) and nothing else: not partial, not the law's account
// of its reporters. Replay restarts its machine the same way, from what
// its own machine would have saved.
func (e *engine) restart(l levels.Line) {
	saved := e.m.Saved()
	m := levels.NewMachine(e.m.Config(), l.At)
	if _, err := m.Restore(l.At, saved, ""); err != nil {
		e.warn("restart-"+l.At.String(), fmt.Sprintf("the restart of %s is replayed without part of its state: %v", l.At.Format(time.RFC3339), err))
	}
	e.m = m
}

// configLine applies a start or reload line's config: in recorded mode
// the machine follows the recorded config; a candidate keeps its own, and
// only the re-created samplers' blind clocks start again.
func (e *engine) configLine(l levels.Line) {
	e.warnMeasured(l.Config.Measured)
	cfg := e.m.Config()
	if e.follow {
		rc, err := l.Config.Config()
		if err != nil {
			e.warn("config-"+l.ConfigDigest, fmt.Sprintf("the recorded config of %s cannot be rebuilt (%v): the config in force is kept", l.At.Format(time.RFC3339), err))
		} else {
			cfg = rc
		}
	}
	if l.Trigger != levels.TriggerReload && cfg.Digest() == e.m.Config().Digest() {
		return
	}
	if _, err := e.m.Reconfigure(l.At, cfg, l.Actor, l.Renewed); err != nil {
		e.warn("reload-"+l.At.String(), fmt.Sprintf("the reload of %s is not replayed: %v", l.At.Format(time.RFC3339), err))
	}
}

// override replays a local override line.
func (e *engine) override(l levels.Line) string {
	r := l.Request
	if r == nil {
		return ""
	}
	if r.Action == "clear" {
		return lastReason(e.m.ClearOverride(l.At, l.Actor, e.draw(l)))
	}
	ttl, err := time.ParseDuration(r.TTL)
	if err == nil {
		var out levels.Output
		out, err = e.m.SetOverride(l.At, levels.OverrideRequest{Level: r.Level, Mode: levels.Mode(r.Mode), TTL: ttl, Reason: r.Reason, Actor: l.Actor})
		if err == nil {
			return lastReason(out)
		}
	}
	e.warn("override-"+r.Level, fmt.Sprintf("the recording's override %s %s is not replayed: %v", r.Mode, r.Level, err))
	return ""
}

// fleet replays a fleet override line.
func (e *engine) fleet(l levels.Line) string {
	f := l.Fleet
	if f == nil {
		return ""
	}
	ttl, _ := time.ParseDuration(f.TTL) // absent for a clear
	u := levels.FleetUpdate{Override: f.Override.Override(), TTL: ttl, Revision: f.Revision, Expired: f.Expired, Reset: f.Reset, Actor: l.Actor}
	out, err := e.m.ApplyFleet(l.At, u, e.draw(l))
	if err != nil && u.Override != nil {
		e.warn("fleet-"+u.Override.Level, fmt.Sprintf("the recording's fleet override %s %s is not replayed: %v", u.Override.Mode, u.Override.Level, err))
	}
	return lastReason(out)
}

// followOverrides applies, for a recording made before overrides were lines of
// their own, the override changes a line shows: the local and fleet
// overrides in force after it.
func (e *engine) followOverrides(l levels.Line, reason string) string {
	p := e.m.Published()
	if !sameOverride(p.Override, l.Override) {
		if o := l.Override.Override(); o == nil {
			reason = lastReason(e.m.ClearOverride(l.At, levels.ActorDaemon, e.draw(l)))
		} else if out, err := e.m.SetOverride(l.At, levels.OverrideRequest{Level: o.Level, Mode: o.Mode, TTL: max(o.ExpiresAt.Sub(l.At), time.Second),
			Reason: o.Reason, Actor: o.Actor}); err == nil {
			reason = lastReason(out)
		} else {
			e.warn("override-"+o.Level, fmt.Sprintf("the recording's override %s %s is not replayed: %v", o.Mode, o.Level, err))
		}
	}
	var fleet *levels.Override
	if p.Fleet != nil {
		fleet = &p.Fleet.Override
	}
	if !sameOverride(fleet, l.FleetOverride) {
		u := levels.FleetUpdate{Override: l.FleetOverride.Override(), Revision: 1, Reset: true}
		if u.Override != nil {
			u.TTL = u.Override.ExpiresAt.Sub(u.Override.SetAt)
		}
		out, err := e.m.ApplyFleet(l.At, u, e.draw(l))
		if err != nil && u.Override != nil {
			e.warn("fleet-"+u.Override.Level, fmt.Sprintf("the recording's fleet override %s %s is not replayed: %v", u.Override.Mode, u.Override.Level, err))
		}
		reason = lastReason(out)
	}
	return reason
}

// sameOverride reports whether the machine's override o is the one a line
// recorded.
func sameOverride(o *levels.Override, l *levels.LineOverride) bool {
	if o == nil || l == nil {
		return o == nil && l == nil
	}
	return o.Level == l.Level && string(o.Mode) == l.Mode && o.SetAt.Equal(l.SetAt)
}

// lastReason is the reason of an output's last entry, "" without one.
func lastReason(out levels.Output) string {
	if len(out.Entries) == 0 {
		return ""
	}
	return out.Entries[len(out.Entries)-1].Reason
}

// draw is the recovery draw r an input at line l uses: see Options.Seed.
func (e *engine) draw(l levels.Line) float64 {
	j := e.m.Config().Rules.RecoveryJitter
	switch {
	case j <= 0:
		return 0
	case e.rand != nil:
		return j * e.rand()
	}
	return min(max(l.JitterR, 0), j)
}

// sample is the line's sample as the machine in force would have seen it:
// exactly the recorded one for the recorded config; for a candidate, the
// error rate and the latency read again from the window's counts with the
// candidate's min_throughput and quantile, and the built-in signals it has
// no threshold for turned off.
func (e *engine) sample(l levels.Line) levels.Sample {
	s := l.Sample().Clone()
	if e.follow {
		return s
	}
	t := e.m.Config().Table
	w := levels.Window{Attempts: l.Window.Attempts, Failures: l.Window.Failures, Latency: l.Window.LatencyCounts, Fleet: l.Window.Fleet,
		Warming: s.State(levels.ErrorRate) == levels.Warming}
	if w.Latency == nil && t.Uses(levels.Latency) && s.State(levels.Latency) == levels.Off {
		e.warn("off-latency", "the candidate has thresholds for latency, which the recording has no values for")
	}
	if s.State(levels.ErrorRate) == levels.Off && t.Uses(levels.ErrorRate) && w.Attempts == 0 {
		e.warn("off-error_rate", "the candidate has thresholds for error_rate, which the recording has no values for")
	}
	t.ReadWindow(&s, w, e.m.Config().Rules.MinThroughput)
	return s
}

// warnMeasured warns once about each key that decides what is measured
// (health_check_interval, the error window, the signal sources) where the
// candidate differs from the recording: replay cannot apply those.
func (e *engine) warnMeasured(recorded map[string]string) {
	for k, v := range recorded {
		if c, ok := e.measured[k]; ok && c != v {
			e.warn("measured-"+k, fmt.Sprintf("not replayed, the recording measured with its own %s (%s, the candidate has %s)", k, v, c))
		}
	}
}

func (e *engine) inRange(at time.Time) bool {
	return (e.from.IsZero() || !at.Before(e.from)) && (e.to.IsZero() || !at.After(e.to))
}

func (e *engine) warn(key, msg string) {
	if !e.warned[key] {
		e.warned[key] = true
		e.res.Warnings = append(e.res.Warnings, msg)
	}
}

// finish closes the time accounting at To, or at the last line.
func (e *engine) finish() {
	end := e.res.Last
	if !e.to.IsZero() && e.to.After(end) && !e.res.Last.IsZero() {
		end = e.to
	}
	e.replayed.advance(end, true)
	e.recorded.advance(end, true)
	e.res.Transitions, e.res.Flaps, e.res.TimeAtLevel = e.replayed.done()
	e.res.Recorded, e.res.RecordedFlaps, e.res.RecordedTimeAtLevel = e.recorded.done()
	for _, l := range e.m.Config().Table.Levels() {
		if _, ok := e.res.TimeAtLevel[l.Name]; !ok {
			e.res.TimeAtLevel[l.Name] = 0
		}
	}
}
