package timeline

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/degraded/degraded/levels"
)

// MaxPoints is the most buckets a Series may ask for (GET /v1/timeline's
// points parameter).
const MaxPoints = 5000

// maxMarks bounds the marks one Series keeps. Marks are operators'
// actions, reloads and restarts, so a real range holds far fewer; the
// bound only keeps a scripted flood of overrides from growing the answer
// without limit. Series.MarksDropped counts what it left out.
const maxMarks = 10000

// Series is the History view's summary of a time range of the timeline
// (GET /v1/timeline?points=N, and each side of `degraded replay --format
// html`): the published level as bands, each signal's values downsampled
// into at most Points buckets with the minimum and the maximum of each
// bucket kept, the level tables in force over the range, and every
// override, reload and restart as a mark, whatever the downsampling.
type Series struct {
	// From and To are the range summarized (To clamped to now by the API).
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Points is the number of buckets the range is cut into; BucketMS
	// their width in milliseconds.
	Points   int   `json:"points"`
	BucketMS int64 `json:"bucket_ms"`
	// Lines is the number of lines in range; First and Last their times
	// (null without any).
	Lines int        `json:"lines"`
	First *time.Time `json:"first"`
	Last  *time.Time `json:"last"`
	// Tables are the level tables in force over the range, oldest first:
	// the first is the one in force at From (its At may be before From),
	// each further one a start or reload line that changed it.
	Tables []Table `json:"tables"`
	// Bands are the published level over time, oldest first.
	Bands []Band `json:"bands"`
	// Signals are the configured signals (a threshold in some table, or a
	// state other than off in some line), built-in ones first in table
	// order, then custom ones by name.
	Signals []SignalSeries `json:"signals"`
	// Marks are the overrides, fleet overrides, reloads and restarts,
	// oldest first; MarksDropped counts those left out past maxMarks.
	Marks        []Mark `json:"marks"`
	MarksDropped int    `json:"marks_dropped"`
}

// Table is a level table in force from At: its config digest and its
// levels, Normal first, with each level's thresholds by signal name.
type Table struct {
	At     time.Time          `json:"at"`
	Digest string             `json:"digest"`
	Levels []levels.LineLevel `json:"levels"`
}

// Band is a span of time at one published state: the level (its name and
// its index in the table in force), the layer that set it and the partial
// admission. Mixed says that several states fell within less than one
// bucket and were merged into it; it then shows the most severe of them
// (the highest level, the smallest admitted fraction).
type Band struct {
	From    time.Time       `json:"from"`
	To      time.Time       `json:"to"`
	Level   string          `json:"level"`
	Index   int             `json:"index"`
	Source  string          `json:"source"`
	Partial *levels.Partial `json:"partial"`
	Mixed   bool            `json:"mixed"`
}

// SignalSeries is one signal's values, one entry per bucket that holds a
// line mentioning it: T is the time of the bucket's first such line (Unix
// milliseconds), Min and Max the least and greatest value in the bucket
// (null when no line of it had a value) and State the worst state seen in
// it (failed, then warming, then absent, then available).
type SignalSeries struct {
	Name  string    `json:"name"`
	T     []int64   `json:"t"`
	Min   []float64 `json:"min"`
	Max   []float64 `json:"max"`
	State []string  `json:"state"`
}

// Mark is an operator's or the daemon's action on the timeline. Kind is
// override, fleet, reload or restart; Action, for the overrides, is set,
// clear or expired. Level, Mode, TTL and Reason describe the override set
// (or the one cleared or expired); Actor names who did it; Published is
// the level published after it. A reload or restart carries the digest of
// the config then in force and, when it changed the table or the rules,
// Changes in words ("Major.cpu 80 -> 70").
type Mark struct {
	At        time.Time `json:"at"`
	Kind      string    `json:"kind"`
	Action    string    `json:"action"`
	Level     string    `json:"level"`
	Mode      string    `json:"mode"`
	TTL       string    `json:"ttl"`
	Reason    string    `json:"reason"`
	Actor     string    `json:"actor"`
	Published string    `json:"published"`
	Digest    string    `json:"digest,omitempty"`
	Changes   []string  `json:"changes,omitempty"`
}

// The kinds of marks.
const (
	MarkOverride = "override"
	MarkFleet    = "fleet"
	MarkReload   = "reload"
	MarkRestart  = "restart"
)

// Builder makes a Series from lines given in order of time. Lines before
// the range only set the table in force and the overrides the first line
// in range is compared with; lines after it are ignored. Its memory is
// bounded by the number of buckets, signals and marks, never by the
// number of lines. The zero value is not usable; a Builder is not safe
// for concurrent use.
type Builder struct {
	s     Series
	width time.Duration

	table    *levels.LineConfig // the table in force, nil before the first config
	tableAt  time.Time
	digest   string
	primed   bool // a line before the first in range was seen
	override *levels.LineOverride
	fleet    *levels.LineOverride
	lastAt   time.Time // the previous line's time

	band    *openBand
	signals map[levels.Signal]*signalAcc
}

// NewBuilder returns a builder of the range [from, to] cut into points
// buckets (at least one, at most MaxPoints).
func NewBuilder(from, to time.Time, points int) *Builder {
	points = min(max(points, 1), MaxPoints)
	if to.Before(from) {
		to = from
	}
	width := max(to.Sub(from)/time.Duration(points), time.Millisecond)
	return &Builder{s: Series{From: from.UTC(), To: to.UTC(), Points: points, BucketMS: width.Milliseconds(),
		Tables: []Table{}, Bands: []Band{}, Signals: []SignalSeries{}, Marks: []Mark{}},
		width: width, signals: map[levels.Signal]*signalAcc{}}
}

// Add takes the next line.
func (b *Builder) Add(l *levels.Line) {
	switch {
	case l.At.Before(b.s.From):
		b.before(l)
		return
	case l.At.After(b.s.To):
		return
	}
	first := b.s.Lines == 0
	b.s.Lines++
	at := l.At.UTC()
	if first {
		b.s.First = &at
		if b.table != nil {
			b.s.Tables = append(b.s.Tables, Table{At: b.tableAt, Digest: b.digest, Levels: b.table.Levels})
		}
	}
	last := at
	b.s.Last = &last
	b.marks(l, first)
	if l.Config != nil {
		b.setTable(l)
	}
	b.addBand(l)
	b.addSignals(l)
	b.override, b.fleet, b.lastAt, b.primed = l.Override, l.FleetOverride, l.At, true
}

// before takes a line before the range: the table and the overrides in
// force at its start.
func (b *Builder) before(l *levels.Line) {
	if l.Config != nil {
		b.table, b.tableAt, b.digest = l.Config, l.At.UTC(), l.ConfigDigest
	}
	b.override, b.fleet, b.primed = l.Override, l.FleetOverride, true
}

// setTable puts a start or reload line's table in force.
func (b *Builder) setTable(l *levels.Line) {
	if l.ConfigDigest == b.digest && b.table != nil {
		return
	}
	b.table, b.tableAt, b.digest = l.Config, l.At.UTC(), l.ConfigDigest
	if n := len(b.s.Tables); n > 0 && b.s.Tables[n-1].At.Equal(b.tableAt) {
		b.s.Tables = b.s.Tables[:n-1] // a reload at the very line the range starts with
	}
	b.s.Tables = append(b.s.Tables, Table{At: b.tableAt, Digest: l.ConfigDigest, Levels: l.Config.Levels})
}

// Series returns the summary of the lines added so far. The builder must
// not be used after.
func (b *Builder) Series() *Series {
	b.closeBand(b.lastAt)
	if b.s.Lines == 0 && b.table != nil {
		b.s.Tables = append(b.s.Tables, Table{At: b.tableAt, Digest: b.digest, Levels: b.table.Levels})
	}
	names := make([]levels.Signal, 0, len(b.signals))
	for _, t := range b.s.Tables {
		for _, lv := range t.Levels {
			for sig := range lv.Thresholds {
				b.signal(sig)
			}
		}
	}
	for sig := range b.signals {
		names = append(names, sig)
	}
	slices.SortFunc(names, signalOrder)
	for _, sig := range names {
		a := b.signals[sig]
		a.flush()
		b.s.Signals = append(b.s.Signals, SignalSeries{Name: string(sig), T: a.t, Min: a.min, Max: a.max, State: a.state})
	}
	return &b.s
}

// signalOrder sorts built-in signals in their table order before custom
// ones, which sort by name.
func signalOrder(a, b levels.Signal) int {
	ia, ib := slices.Index(levels.AllSignals, a), slices.Index(levels.AllSignals, b)
	switch {
	case ia >= 0 && ib >= 0:
		return ia - ib
	case ia >= 0:
		return -1
	case ib >= 0:
		return 1
	}
	if a < b {
		return -1
	}
	if a > b {
		return 1
	}
	return 0
}

// bucket is the index of the bucket holding t.
func (b *Builder) bucket(t time.Time) int {
	return min(int(t.Sub(b.s.From)/b.width), b.s.Points-1)
}

// ---- signals ----

// signalAcc gathers one signal's buckets; the open one is cur.
type signalAcc struct {
	t     []int64
	min   []float64
	max   []float64
	state []string

	cur      int // the open bucket's index, -1 before the first
	curT     int64
	lo, hi   float64 // NaN without a value
	curState levels.SignalState
}

func (b *Builder) signal(sig levels.Signal) *signalAcc {
	a := b.signals[sig]
	if a == nil {
		a = &signalAcc{cur: -1, lo: math.NaN(), hi: math.NaN(), t: []int64{}, min: []float64{}, max: []float64{}, state: []string{}}
		b.signals[sig] = a
	}
	return a
}

// worse ranks the states for a bucket: the worst one is shown.
var worse = map[levels.SignalState]int{levels.Available: 1, levels.Absent: 2, levels.Warming: 3, levels.Failed: 4}

func (b *Builder) addSignals(l *levels.Line) {
	i := b.bucket(l.At)
	for sig, ls := range l.Signals {
		st := stateOf(ls.State)
		if st == levels.Off && b.signals[sig] == nil {
			continue
		}
		a := b.signal(sig)
		if i > a.cur {
			a.flush()
			a.cur, a.curT, a.curState = i, l.At.UnixMilli(), st
		}
		if worse[st] > worse[a.curState] {
			a.curState = st
		}
		if v := ls.Value; v != nil && !math.IsNaN(*v) && !math.IsInf(*v, 0) {
			if math.IsNaN(a.lo) || *v < a.lo {
				a.lo = *v
			}
			if math.IsNaN(a.hi) || *v > a.hi {
				a.hi = *v
			}
		}
	}
}

// flush closes the open bucket.
func (a *signalAcc) flush() {
	if a.cur < 0 {
		return
	}
	a.t = append(a.t, a.curT)
	a.min = append(a.min, a.lo)
	a.max = append(a.max, a.hi)
	a.state = append(a.state, a.curState.String())
	a.cur, a.lo, a.hi = -1, math.NaN(), math.NaN()
}

// stateOf reads a line's state name; an unknown one reads as off.
func stateOf(name string) levels.SignalState {
	for _, st := range []levels.SignalState{levels.Available, levels.Warming, levels.Failed, levels.Absent} {
		if st.String() == name {
			return st
		}
	}
	return levels.Off
}

// MarshalJSON writes the arrays with null for a bucket without a value.
func (s SignalSeries) MarshalJSON() ([]byte, error) {
	out := make([]byte, 0, 64+len(s.T)*40)
	out = append(out, `{"name":`...)
	out = strconv.AppendQuote(out, s.Name)
	out = append(out, `,"t":[`...)
	for i, t := range s.T {
		if i > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendInt(out, t, 10)
	}
	for _, f := range []struct {
		key string
		v   []float64
	}{{`],"min":[`, s.Min}, {`],"max":[`, s.Max}} {
		out = append(out, f.key...)
		for i, v := range f.v {
			if i > 0 {
				out = append(out, ',')
			}
			if math.IsNaN(v) || math.IsInf(v, 0) {
				out = append(out, "null"...)
			} else {
				out = strconv.AppendFloat(out, v, 'g', -1, 64)
			}
		}
	}
	out = append(out, `],"state":[`...)
	for i, st := range s.State {
		if i > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendQuote(out, st)
	}
	return append(out, "]}"...), nil
}

// UnmarshalJSON reads what MarshalJSON writes; null reads as NaN.
func (s *SignalSeries) UnmarshalJSON(b []byte) error {
	var raw struct {
		Name  string     `json:"name"`
		T     []int64    `json:"t"`
		Min   []*float64 `json:"min"`
		Max   []*float64 `json:"max"`
		State []string   `json:"state"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	values := func(ps []*float64) []float64 {
		out := make([]float64, len(ps))
		for i, p := range ps {
			out[i] = math.NaN()
			if p != nil {
				out[i] = *p
			}
		}
		return out
	}
	*s = SignalSeries{Name: raw.Name, T: raw.T, Min: values(raw.Min), Max: values(raw.Max), State: raw.State}
	return nil
}
