package replay

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/degraded/degraded/internal/timeline"
	"github.com/degraded/degraded/levels"
)

// collector gathers, as Run feeds the machine (Options.Observe), what the
// HTML report draws: the recorded and the candidate sides as timeline
// series (the History view's own summary, so both are downsampled alike)
// and the shed estimate.
type collector struct {
	from, to   time.Time
	rec, cand  *timeline.Builder
	recTable   *levels.LineConfig // the recording's table in force
	candTable  *levels.Table      // the candidate's table the digest below is of
	candDigest string
	candLine   levels.LineConfig
	started    bool
	shed       Shed

	// The admission each side published before the line being taken:
	// the reports a line carries were judged against it.
	recBefore, candBefore admission
}

// admission is a published level's priority threshold and partial
// admission; known is false before the first line.
type admission struct {
	threshold int
	partial   *levels.Partial
	known     bool
}

// shedShare is the share of requests of priority p the admission sheds.
func (a admission) shedShare(p int) float64 {
	switch {
	case !a.known || p >= a.threshold:
		return 0
	case a.partial != nil && p >= a.partial.From:
		return 1 - a.partial.Fraction
	}
	return 1
}

// Shed estimates what each side shed in range, from the offered load the
// clients reported by priority (admission.offered): each report's counts
// judged by the admission each side published before it. Reported is
// what the clients said they shed (shed_partial + shed_below) of
// Admitted + Reported.
type Shed struct {
	Offered   int64   `json:"offered"`
	Candidate float64 `json:"candidate"`
	Recorded  float64 `json:"recorded"`
	Admitted  int64   `json:"admitted"`
	Reported  int64   `json:"reported"`
}

func newCollector(from, to time.Time, points int) *collector {
	return &collector{from: from, to: to, rec: timeline.NewBuilder(from, to, points), cand: timeline.NewBuilder(from, to, points)}
}

// observe takes one line as the machine did (Options.Observe).
func (c *collector) observe(l levels.Line, p levels.Published, cfg levels.Config) {
	if l.Config != nil {
		c.recTable = l.Config
	}
	inRange := !l.At.Before(c.from) && !l.At.After(c.to)
	if inRange {
		c.estimate(l)
	}
	c.rec.Add(&l)

	if cfg.Table != c.candTable {
		c.candTable, c.candDigest, c.candLine = cfg.Table, cfg.Digest(), cfg.Line()
	}
	t := cfg.Table
	cl := levels.Line{V: levels.LineVersion, At: l.At, Trigger: l.Trigger, Published: t.Level(p.Index).Name, Recommended: t.Level(p.Recommended).Name,
		Source: p.Source, Partial: p.Partial, Override: levels.LineOf(p.Override), ConfigDigest: c.candDigest, Actor: l.Actor}
	if p.Fleet != nil {
		cl.FleetOverride = levels.LineOf(&p.Fleet.Override)
	}
	if !c.started || l.Config != nil {
		lc := c.candLine
		cl.Config = &lc
		c.started = true
	}
	c.cand.Add(&cl)

	c.candBefore = admission{threshold: t.Level(p.Index).PriorityThreshold, partial: p.Partial, known: true}
	c.recBefore = admission{}
	if l.Partial != nil {
		part := *l.Partial
		c.recBefore.partial = &part
	}
	if lv, ok := c.recordedLevel(l.Published, t); ok {
		c.recBefore.threshold, c.recBefore.known = lv, true
	}
}

// recordedLevel is the priority threshold of the recorded level name: from
// the recording's table, else the candidate's level of that name.
func (c *collector) recordedLevel(name string, cand *levels.Table) (int, bool) {
	if c.recTable != nil {
		for _, lv := range c.recTable.Levels {
			if lv.Name == name {
				return lv.PriorityThreshold, true
			}
		}
	}
	if i, err := cand.Index(name); err == nil {
		return cand.Level(i).PriorityThreshold, true
	}
	return 0, false
}

// estimate adds a line's reports to the shed estimate.
func (c *collector) estimate(l levels.Line) {
	for _, r := range l.Reports {
		a := r.Admission
		if a == nil {
			continue
		}
		c.shed.Admitted += a.Admitted
		c.shed.Reported += a.ShedPartial + a.ShedBelow
		for prio, n := range a.Offered {
			c.shed.Offered += n
			c.shed.Candidate += float64(n) * c.candBefore.shedShare(prio)
			c.shed.Recorded += float64(n) * c.recBefore.shedShare(prio)
		}
	}
}

// span finds the first and last "at" of the files' lines within [from, to]
// (a zero end is open), reading only each line's at. A file that is not a
// regular one (a pipe, which the replay could not read again) is an
// error, as is ctx ending (nil: never).
func span(ctx context.Context, files []string, from, to time.Time) (first, last time.Time, err error) {
	if ctx == nil {
		ctx = context.Background()
	}
	for _, name := range files {
		if st, err := os.Stat(name); err != nil {
			return first, last, fmt.Errorf("timeline: %w", err)
		} else if !st.Mode().IsRegular() {
			return first, last, fmt.Errorf("timeline %s is not a regular file: the HTML report reads it twice; give --from and --to, or copy it to a file", name)
		}
		if err := eachAt(ctx, name, func(at time.Time) {
			if (!from.IsZero() && at.Before(from)) || (!to.IsZero() && at.After(to)) {
				return
			}
			if first.IsZero() || at.Before(first) {
				first = at
			}
			if at.After(last) {
				last = at
			}
		}); err != nil {
			return first, last, err
		}
	}
	return first, last, nil
}

// eachAt calls fn with the "at" of every line of the file that has one,
// until ctx ends.
func eachAt(ctx context.Context, name string, fn func(time.Time)) error {
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("timeline: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 256<<10)
	for n := 0; ; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		b, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer is damaged (the replay skips
			// it): pass over it without holding it.
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			b = nil
		}
		if at, ok := atOf(b); ok {
			fn(at)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("timeline %s: %w", name, err)
		}
	}
}
