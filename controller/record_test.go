package controller

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/degraded/degraded/levels"
)

// lines is a Recorder that keeps what it is given.
type lines struct {
	mu  sync.Mutex
	got []levels.Line
}

func (l *lines) Record(line levels.Line) { l.mu.Lock(); l.got = append(l.got, line); l.mu.Unlock() }

func (l *lines) all() []levels.Line {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]levels.Line(nil), l.got...)
}

// events returns the event lines.
func (l *lines) events() []levels.Line {
	var out []levels.Line
	for _, line := range l.all() {
		if line.Trigger == levels.TriggerEvent {
			out = append(out, line)
		}
	}
	return out
}

// count is the number of lines with the trigger.
func (l *lines) count(trigger string) int {
	n := 0
	for _, line := range l.all() {
		if line.Trigger == trigger {
			n++
		}
	}
	return n
}

// countingErrors is fakeErrors with latency counts.
type countingErrors struct{ fakeErrors }

func (*countingErrors) LatencyCounts(time.Time) (c [14]int64) { c[6] = 7; return c }

// TestRecorderGetsOneLinePerEvaluation: the first health check of a run
// is recorded as start, then each tick, each event-driven evaluation and
// each reload, with what the state published after it.
func TestRecorderGetsOneLinePerEvaluation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &lines{}
		errs := &countingErrors{}
		cpu := &fakeSampler{}
		o := Options{Table: defaultTable(t), HealthCheckInterval: 10 * time.Second, CPU: cpu, Errors: errs, Recorder: rec, Rules: levels.Rules{Hysteresis: 0.1}}
		c, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		cpu.set(50)
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- c.Run(ctx) }()
		synctest.Wait()
		time.Sleep(10 * time.Second) // one tick
		synctest.Wait()
		errs.set(100, 15)
		c.Reported(levels.Report{}) // an event: Major at once
		synctest.Wait()
		if _, err := c.SetOverride(OverrideRequest{Level: "Severe", Mode: ModePin, TTL: time.Hour, Reason: "INC-1"}); err != nil {
			t.Fatal(err)
		}
		if err := c.Reconfigure(o, "alice"); err != nil {
			t.Fatal(err)
		}
		stop()
		<-done

		got := rec.all()
		want := []struct{ trigger, published, source string }{
			{levels.TriggerStart, "Normal", SourceAuto},
			{levels.TriggerTick, "Normal", SourceAuto},
			{levels.TriggerEvent, "Major", SourceAuto},
			{levels.TriggerOverride, "Severe", SourceOverride},
			{levels.TriggerReload, "Severe", SourceOverride},
		}
		if len(got) != len(want) {
			t.Fatalf("recorded %d lines, want %d: %+v", len(got), len(want), got)
		}
		for i, w := range want {
			if g := got[i]; g.Trigger != w.trigger || g.Published != w.published || g.Source != w.source {
				t.Errorf("line %d: %s %s %s, want %s %s %s", i, g.Trigger, g.Published, g.Source, w.trigger, w.published, w.source)
			}
		}
		ev := got[2]
		if ev.Window.Attempts != 100 || ev.Window.Failures != 15 || len(ev.Window.LatencyCounts) != 14 || ev.Window.LatencyCounts[6] != 7 {
			t.Errorf("event line window = %+v, want 100 attempts, 15 failures and the latency counts", ev.Window)
		}
		if s := ev.Signals[levels.CPU]; s.Value == nil || *s.Value != 50 || s.State != "available" {
			t.Errorf("event line cpu = %+v, want 50 available", s)
		}
		if ev.Recommended != "Major" || ev.V != 1 || ev.Override != nil {
			t.Errorf("event line = %+v, want v 1, recommended Major, no override", ev)
		}
		if o := got[4].Override; o == nil || o.Level != "Severe" || o.Mode != "pin" || o.Reason != "INC-1" {
			t.Errorf("reload line override = %+v, want pin Severe INC-1", o)
		}
		if r := got[3].Request; r == nil || r.Action != "set" || r.Level != "Severe" || r.TTL != "1h0m0s" || got[3].Actor != "" {
			t.Errorf("override line request = %+v by %q, want set Severe for 1h0m0s", r, got[3].Actor)
		}
		if got[0].Config == nil || got[4].Config == nil || got[0].ConfigDigest == "" || got[0].ConfigDigest != got[4].ConfigDigest {
			t.Errorf("start and reload lines: config %v and %v, digests %q and %q; want the table on both and one digest",
				got[0].Config != nil, got[4].Config != nil, got[0].ConfigDigest, got[4].ConfigDigest)
		}
	})
}
