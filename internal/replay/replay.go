package replay

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/degraded/degraded/config"
	"github.com/degraded/degraded/errwindow"
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
	// run through the rules, so that the report starts from the state they
	// left; lines after To are not read further.
	From, To time.Time
	// Seed, if set, draws the candidate's recovery jitter from a source
	// seeded with it. Otherwise each level's draw is the recorded one (the
	// jitter_r of the line where the level was entered), capped at the
	// candidate's recovery_jitter, so the recorded config replays as it
	// ran; a candidate with recovery_jitter 0 draws 0.
	Seed *int64
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
	table, err := o.Config.Table()
	if err != nil {
		return nil, err
	}
	c := o.Config
	window := 2 * max(c.MinimumLevelDuration, c.HealthCheckInterval)
	e := &engine{
		table: table,
		rules: levels.Rules{MinimumLevelDuration: c.MinimumLevelDuration, EscalationDelay: c.EscalationDelay, EscalateAfter: c.EscalateAfter,
			Hysteresis: c.Hysteresis, BlindHold: c.BlindHold, ManualOnly: !c.EnableAutoAdjustment},
		minThroughput: c.MinThroughput,
		from:          o.From, to: o.To,
		res:      &Result{TimeAtLevel: map[string]Duration{}, RecordedTimeAtLevel: map[string]Duration{}, FlapWindow: Duration(window)},
		replayed: newTrack(window, o.From),
		recorded: newTrack(window, o.From),
		warned:   map[string]bool{},
		jitter:   c.RecoveryJitter,
	}
	if o.Seed != nil {
		e.rand = rand.New(rand.NewPCG(uint64(*o.Seed), 0)).Float64
	}
	e.res.Warnings = unapplied(c)
	valid := 0
	corrupt, err := each(o.Files, func(l levels.Line) {
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

// engine is the replayed controller: the automatic level under the
// candidate's rules, the recorded overrides layered over it.
type engine struct {
	table         *levels.Table
	rules         levels.Rules
	minThroughput int64
	from, to      time.Time

	started bool
	auto    levels.Auto
	pub     int       // the replayed published level
	since   time.Time // when pub last changed: the dwell clock
	// fleet and local are the recorded fleet and local overrides, in
	// the layers of DESIGN.md "Overrides in layers".
	fleet, local layer

	replayed, recorded *track
	res                *Result
	warned             map[string]bool

	jitter float64        // the candidate's recovery_jitter
	rand   func() float64 // seeded draws; nil: the recorded ones
}

// draw is a new level's recovery jitter r at line l: see Options.Seed.
func (e *engine) draw(l levels.Line) float64 {
	switch {
	case e.jitter <= 0:
		return 0
	case e.rand != nil:
		return e.jitter * e.rand()
	}
	return min(max(l.JitterR, 0), e.jitter)
}

// line runs one recorded evaluation.
func (e *engine) line(l levels.Line) {
	if !e.started {
		e.begin(l)
	}
	e.recorded.advance(l.At, e.inRange(l.At))
	e.replayed.advance(l.At, e.inRange(l.At))
	if l.Trigger == levels.TriggerStart {
		e.auto.Seen = e.blindClocks(l.At) // a new run: every blind clock starts again
	}
	e.override(l)
	s := e.sample(l)
	var m levels.Move
	switch l.Trigger {
	case levels.TriggerStart, levels.TriggerTick:
		e.auto.Since = e.dwellStart()
		e.auto, m = levels.Next(e.auto, e.table, s, l.At, e.rules)
	case levels.TriggerEvent:
		e.auto.Since = e.dwellStart()
		e.auto, m = levels.Event(e.auto, e.table, s, l.At, e.rules)
	}
	if m.Moved() {
		e.auto.JitterR, e.auto.NotBefore = e.draw(l), time.Time{}
		e.publish(l.At, m.Reason)
	}
	if e.inRange(l.At) {
		e.res.Lines++
		if e.res.First.IsZero() {
			e.res.First = l.At
		}
		e.res.Last = l.At
	}
	e.recorded.set(l.At, l.Published, l.Source, "", e.inRange(l.At))
}

// begin starts the replay at the first line: at Normal when the line is
// a daemon's start, else where the recording was (mapped by name).
func (e *engine) begin(l levels.Line) {
	e.started = true
	start := "Normal"
	if l.Trigger != levels.TriggerStart {
		start = l.Published
	}
	if i, err := e.table.Index(start); err == nil {
		e.pub = i
	}
	e.since = l.At
	e.auto = levels.Auto{Level: e.pub, Since: l.At, Seen: e.blindClocks(l.At)}
	e.replayed.begin(l.At, e.table.Level(e.pub).Name)
	e.recorded.begin(l.At, start)
}

func (e *engine) blindClocks(at time.Time) map[levels.Signal]time.Time {
	seen := make(map[levels.Signal]time.Time, len(e.table.Signals()))
	for _, sig := range e.table.Signals() {
		seen[sig] = at
	}
	return seen
}

func (e *engine) inRange(at time.Time) bool {
	return (e.from.IsZero() || !at.Before(e.from)) && (e.to.IsZero() || !at.After(e.to))
}

// layer is one recorded override in force, and its level in the
// candidate's table.
type layer struct {
	ovr   *levels.LineOverride
	index int
}

// levels gives the layer to levels.Layered; nil when none is in force.
func (y *layer) levels() *levels.Layer {
	if y.ovr == nil {
		return nil
	}
	return &levels.Layer{Index: y.index, Pin: y.ovr.Mode == "pin"}
}

// override applies the changes of the recorded overrides since the last
// line, fleet then local, as the controller does.
func (e *engine) override(l levels.Line) {
	e.overrideLayer(l, &e.fleet, l.FleetOverride, "fleet override")
	e.overrideLayer(l, &e.local, l.Override, "override")
}

// overrideLayer applies the change of one recorded override: the first
// override to start hands the automatic level the published one; when the
// last one ends, the automatic level takes over from the published level,
// keeping its dwell clock.
func (e *engine) overrideLayer(l levels.Line, y *layer, cur *levels.LineOverride, name string) {
	index := y.index
	if cur != nil {
		i, err := e.table.Index(cur.Level)
		if err != nil {
			e.warn(name+"-"+cur.Level, fmt.Sprintf("the recording's %s names %s, which the candidate has no level for: it is not replayed", name, cur.Level))
			cur = nil
		} else {
			index = i
		}
	}
	switch {
	case y.ovr == nil && cur == nil:
		return
	case y.ovr == nil:
		if e.fleet.ovr == nil && e.local.ovr == nil {
			e.auto.Level, e.auto.Since = e.pub, e.since
		}
		y.ovr, y.index = cur, index
		e.publish(l.At, fmt.Sprintf("%s set: %s %s: %s", name, cur.Mode, cur.Level, cur.Reason))
	case cur == nil:
		reason := name + " ended: " + y.ovr.Reason
		y.ovr = nil
		if e.fleet.ovr == nil && e.local.ovr == nil {
			r := e.draw(l) // as the controller does when an override ends
			e.auto = levels.Auto{Level: e.pub, Since: e.since, Recommended: e.auto.Recommended, Seen: e.auto.Seen,
				JitterR: r, NotBefore: l.At.Add(time.Duration(float64(e.rules.MinimumLevelDuration) * r))}
		}
		e.publish(l.At, reason)
	case !cur.SetAt.Equal(y.ovr.SetAt) || cur.Level != y.ovr.Level || cur.Mode != y.ovr.Mode:
		y.ovr, y.index = cur, index
		e.publish(l.At, fmt.Sprintf("%s set: %s %s: %s", name, cur.Mode, cur.Level, cur.Reason))
	}
}

// publish moves the published level to what the automatic level and the
// overrides give, recording a transition when it changes.
func (e *engine) publish(at time.Time, reason string) {
	next, by := levels.Layered(e.auto.Level, e.fleet.levels(), e.local.levels())
	if next == e.pub {
		return
	}
	e.pub, e.since = next, at
	source := [...]string{"auto", "fleet", "override"}[by]
	e.replayed.set(at, e.table.Level(next).Name, source, reason, e.inRange(at))
}

// dwellStart is the controller's: while the automatic level is the
// published one, its dwell never starts before the published level's.
func (e *engine) dwellStart() time.Time {
	if e.pub == e.auto.Level && e.since.After(e.auto.Since) {
		return e.since
	}
	return e.auto.Since
}

// sample is the line's sample as the candidate would have seen it: the
// error rate and the latency recomputed from the window's counts with the
// candidate's min_throughput and quantile, and the built-in signals the
// candidate has no threshold for turned off.
func (e *engine) sample(l levels.Line) levels.Sample {
	s := l.Sample()
	a, f := l.Window.Attempts, l.Window.Failures
	e.recompute(s, levels.ErrorRate, a > 0 && a >= e.minThroughput, func() float64 { return float64(f) / float64(a) * 100 }, true)
	if l.Window.LatencyCounts != nil {
		ms, n := errwindow.QuantileOf(l.Window.LatencyCounts, e.table.LatencyQuantile())
		s.LatencyObservations = n
		e.recompute(s, levels.Latency, n > 0 && n >= e.minThroughput, func() float64 { return ms }, true)
	} else {
		e.recompute(s, levels.Latency, false, nil, false)
	}
	for _, sig := range e.table.Signals() {
		if !e.table.Uses(sig) && sig.Builtin() {
			s.States[sig] = levels.Off
			delete(s.Values, sig)
		}
	}
	return s
}

// recompute sets a window signal's value and state from the counts, as
// the controller's sampling does: warming stays warming (with a value once
// there are enough observations), otherwise available or absent. Without
// counts (known false) a signal the recording had off stays off.
func (e *engine) recompute(s levels.Sample, sig levels.Signal, enough bool, value func() float64, known bool) {
	if !e.table.Uses(sig) {
		return
	}
	st := s.States[sig]
	if !known {
		if st == levels.Off {
			e.warn("off-"+string(sig), fmt.Sprintf("the candidate has thresholds for %s, which the recording has no values for", sig))
		}
		return
	}
	delete(s.Values, sig)
	if enough {
		s.Values[sig] = value()
	}
	switch {
	case st == levels.Warming:
	case enough:
		s.States[sig] = levels.Available
	default:
		s.States[sig] = levels.Absent
	}
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
	for _, l := range e.table.Levels() {
		if _, ok := e.res.TimeAtLevel[l.Name]; !ok {
			e.res.TimeAtLevel[l.Name] = 0
		}
	}
}
