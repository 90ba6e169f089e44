package timeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/degraded/degraded/levels"
	"github.com/google/go-cmp/cmp"
)

// s0 is the start of the incidents below.
var s0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// table is a two-level table on cpu, Major's threshold at majorCPU.
func table(majorCPU float64) *levels.LineConfig {
	return &levels.LineConfig{Levels: []levels.LineLevel{
		{Name: "Normal", Thresholds: map[levels.Signal]float64{}},
		{Name: "Minor", PriorityThreshold: 10, Thresholds: map[levels.Signal]float64{levels.CPU: 60}},
		{Name: "Major", PriorityThreshold: 50, Thresholds: map[levels.Signal]float64{levels.CPU: majorCPU}},
	}, Rules: levels.LineRules{MinimumLevelDuration: "1m0s", EscalateAfter: 1}}
}

// tick is a line at s0+sec publishing level with cpu at v (NaN: failed).
func tick(sec float64, level string, v float64) levels.Line {
	ls := levels.LineSignal{State: "available"}
	if math.IsNaN(v) {
		ls.State = "failed"
	} else {
		ls.Value = &v
	}
	return levels.Line{V: 1, At: s0.Add(time.Duration(sec * float64(time.Second))), Trigger: levels.TriggerTick, Published: level, Recommended: level,
		Source: "auto", ConfigDigest: "d80", Signals: map[levels.Signal]levels.LineSignal{levels.CPU: ls, levels.Memory: {State: "off"}}}
}

// incident is ten minutes of 1s ticks: an escalation at 60s, a pin by
// alice at 120s that expires at 180s, a reload that lowers Major's cpu
// threshold at 240s, recovery at 300s, the daemon down from 400s to
// 420s, and a fleet floor at 500s cleared at 520s.
func incident() []levels.Line {
	var out []levels.Line
	ov := &levels.LineOverride{Level: "Major", Mode: "pin", Reason: "INC-42 checkout slow", SetAt: s0.Add(120 * time.Second), ExpiresAt: s0.Add(180 * time.Second), Actor: "alice"}
	fleet := &levels.LineOverride{Level: "Minor", Mode: "floor", Reason: "INC-43 fleet", SetAt: s0.Add(500 * time.Second), ExpiresAt: s0.Add(time.Hour), Actor: "bob"}
	for sec := 0; sec < 600; sec++ {
		if sec > 400 && sec < 420 {
			continue // down
		}
		level, cpu := "Normal", 40.0
		switch {
		case sec >= 60 && sec < 300:
			level, cpu = "Minor", 70
		}
		l := tick(float64(sec), level, cpu)
		switch {
		case sec == 0 || sec == 420:
			l.Trigger, l.Config = levels.TriggerStart, table(80)
		case sec == 120:
			l.Trigger, l.Request, l.Actor = levels.TriggerOverride, &levels.LineRequest{Action: "set", Level: "Major", Mode: "pin", TTL: "1m0s", Reason: ov.Reason}, "alice"
		case sec == 240:
			l.Trigger, l.Config, l.Actor, l.ConfigDigest = levels.TriggerReload, table(75), "signal", "d75"
		case sec == 500:
			l.Trigger, l.Fleet, l.Actor = levels.TriggerFleet, &levels.LineFleet{Override: fleet, TTL: "1h0m0s", Revision: 7}, "bob"
		case sec == 520:
			l.Trigger, l.Fleet = levels.TriggerFleet, &levels.LineFleet{Revision: 8}
		}
		if sec > 240 && sec < 420 {
			l.ConfigDigest = "d75"
		}
		if sec >= 120 && sec < 180 {
			l.Override, l.Published, l.Source = ov, "Major", "override"
		}
		if sec >= 500 && sec < 520 {
			l.FleetOverride, l.Published, l.Source = fleet, "Minor", "fleet"
		}
		out = append(out, l)
	}
	return out
}

func build(from, to time.Time, points int, lines []levels.Line) *Series {
	b := NewBuilder(from, to, points)
	for i := range lines {
		b.Add(&lines[i])
	}
	return b.Series()
}

// TestSeriesOfAnIncident: one bucket a second, so every band edge, every
// value and every mark is exact.
func TestSeriesOfAnIncident(t *testing.T) {
	s := build(s0, s0.Add(600*time.Second), 600, incident())
	at := func(sec int) time.Time { return s0.Add(time.Duration(sec) * time.Second) }

	type band struct {
		From, To      time.Time
		Level, Source string
		Index         int
	}
	var bands []band
	for _, b := range s.Bands {
		bands = append(bands, band{b.From, b.To, b.Level, b.Source, b.Index})
	}
	want := []band{
		{at(0), at(60), "Normal", "auto", 0},
		{at(60), at(120), "Minor", "auto", 1},
		{at(120), at(180), "Major", "override", 2},
		{at(180), at(300), "Minor", "auto", 1},
		{at(300), at(400), "Normal", "auto", 0}, // the daemon went down after 400s: a gap
		{at(420), at(500), "Normal", "auto", 0},
		{at(500), at(520), "Minor", "fleet", 1},
		{at(520), at(599), "Normal", "auto", 0},
	}
	if d := cmp.Diff(want, bands); d != "" {
		t.Errorf("bands (-want +got):\n%s", d)
	}

	type mark struct {
		At                               time.Time
		Kind, Action, Level, Mode, Actor string
		Reason                           string
	}
	var marks []mark
	for _, m := range s.Marks {
		marks = append(marks, mark{m.At, m.Kind, m.Action, m.Level, m.Mode, m.Actor, m.Reason})
	}
	wantMarks := []mark{
		{at(0), MarkRestart, "", "", "", "degraded", "daemon started"},
		{at(120), MarkOverride, "set", "Major", "pin", "alice", "INC-42 checkout slow"},
		{at(180), MarkOverride, "expired", "Major", "pin", "degraded", "INC-42 checkout slow"},
		{at(240), MarkReload, "", "", "", "signal", "config reload"},
		{at(420), MarkRestart, "", "", "", "degraded", "daemon started"},
		{at(500), MarkFleet, "set", "Minor", "floor", "bob", "INC-43 fleet"},
		{at(520), MarkFleet, "clear", "Minor", "floor", "bob", "INC-43 fleet"},
	}
	if d := cmp.Diff(wantMarks, marks); d != "" {
		t.Errorf("marks (-want +got):\n%s", d)
	}
	if got := s.Marks[3].Changes; !slicesEqual(got, []string{"Major.cpu 80 -> 75"}) {
		t.Errorf("the reload's changes = %q, want Major's cpu threshold", got)
	}
	if got := s.Marks[4].Changes; !slicesEqual(got, []string{"Major.cpu 75 -> 80"}) {
		t.Errorf("the restart's changes = %q, want the table it went back to", got)
	}

	if len(s.Tables) != 3 || s.Tables[0].Levels[2].Thresholds[levels.CPU] != 80 || !s.Tables[1].At.Equal(at(240)) ||
		s.Tables[1].Levels[2].Thresholds[levels.CPU] != 75 || !s.Tables[2].At.Equal(at(420)) {
		t.Errorf("tables %+v, want 80 from the start, 75 from the reload at 240s, 80 again from the restart", s.Tables)
	}
	if len(s.Signals) != 1 || s.Signals[0].Name != "cpu" {
		t.Fatalf("signals %+v, want cpu alone (memory is off and has no threshold)", s.Signals)
	}
	cpu := s.Signals[0]
	if len(cpu.T) != 581 || cpu.T[60] != at(60).UnixMilli() || cpu.Max[60] != 70 || cpu.Min[59] != 40 {
		t.Errorf("cpu has %d points (want 581, one per line), t[60]=%d max[60]=%v min[59]=%v", len(cpu.T), cpu.T[60], cpu.Max[60], cpu.Min[59])
	}
	if s.Lines != 581 || !s.First.Equal(at(0)) || !s.Last.Equal(at(599)) {
		t.Errorf("lines %d from %v to %v, want 581 from 0s to 599s", s.Lines, s.First, s.Last)
	}
}

func slicesEqual(a, b []string) bool { return strings.Join(a, "\n") == strings.Join(b, "\n") }

// TestSeriesDownsamples: a day of 1s lines into 100 buckets keeps the
// minimum and the maximum of each bucket (a one-second spike survives),
// bounds the bands however often the partial admission changes, and keeps
// every mark.
func TestSeriesDownsamples(t *testing.T) {
	const day = 86400
	b := NewBuilder(s0, s0.Add(day*time.Second), 100)
	for sec := range day {
		v := 40 + 10*math.Sin(float64(sec)/300)
		if sec == 50000 {
			v = 99 // a spike of one line
		}
		l := tick(float64(sec), "Minor", v)
		if sec == 0 {
			l.Trigger, l.Config = levels.TriggerStart, table(80)
		}
		// The partial admission changes with every line.
		l.Partial = &levels.Partial{From: 0, Fraction: 0.5 + float64(sec%10)/40}
		if sec == 30000 {
			l.Trigger, l.Request, l.Actor = levels.TriggerOverride, &levels.LineRequest{Action: "clear"}, "alice"
		}
		b.Add(&l)
	}
	s := b.Series()
	cpu := s.Signals[0]
	if len(cpu.T) != 100 {
		t.Fatalf("%d cpu points, want 100", len(cpu.T))
	}
	spike := 50000 * 100 / day
	if cpu.Max[spike] != 99 {
		t.Errorf("bucket %d max %v, want the spike's 99", spike, cpu.Max[spike])
	}
	for i := range cpu.T {
		if cpu.Min[i] < 30-1e-9 || cpu.Min[i] > cpu.Max[i] || (i != spike && cpu.Max[i] > 50+1e-9) {
			t.Fatalf("bucket %d: min %v max %v, want 30 <= min <= max <= 50", i, cpu.Min[i], cpu.Max[i])
		}
	}
	if n := len(s.Bands); n > 2*s.Points+1 {
		t.Errorf("%d bands for %d buckets, want at most %d", n, s.Points, 2*s.Points+1)
	}
	for _, band := range s.Bands {
		if !band.Mixed || band.Partial == nil || band.Partial.Fraction != 0.5 {
			t.Errorf("band %+v, want mixed, showing the smallest admitted share, 0.5", band)
			break
		}
	}
	if len(s.Marks) != 2 || s.Marks[1].Kind != MarkOverride || s.Marks[1].Actor != "alice" {
		t.Errorf("marks %+v, want the start and alice's clear", s.Marks)
	}
	enc, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a day in 100 buckets: %d bytes of JSON", len(enc))
}

// TestSeriesSettlesAfterAFlurry: a few quick changes make one mixed band;
// the state they settle on gets its own band from its last change.
func TestSeriesSettlesAfterAFlurry(t *testing.T) {
	var lines []levels.Line
	for sec := 0; sec < 100; sec++ {
		level := "Normal"
		if sec == 40 || sec == 42 || sec >= 44 {
			level = "Major"
		}
		l := tick(float64(sec), level, 50)
		if sec == 0 {
			l.Config = table(80)
		}
		lines = append(lines, l)
	}
	s := build(s0, s0.Add(100*time.Second), 10, lines)
	type band struct {
		From, To int
		Level    string
		Mixed    bool
	}
	var got []band
	for _, b := range s.Bands {
		got = append(got, band{int(b.From.Sub(s0) / time.Second), int(b.To.Sub(s0) / time.Second), b.Level, b.Mixed})
	}
	want := []band{{0, 40, "Normal", false}, {40, 44, "Major", true}, {44, 99, "Major", false}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("bands (-want +got):\n%s", d)
	}
}

// writeDays writes lines into their daily files in dir.
func writeDays(t *testing.T, dir string, lines []levels.Line) {
	t.Helper()
	files := map[string]*bytes.Buffer{}
	for _, l := range lines {
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		name := FileName(l.At)
		if files[name] == nil {
			files[name] = &bytes.Buffer{}
		}
		files[name].Write(append(b, '\n'))
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReadSeries: the table in force at from comes from a config line
// before it, in an earlier day's file when its own has none; a line still
// being written, lines that do not parse and a line over 1 MiB are left
// out; a range without
// lines still names the table; an ended context is an error.
func TestReadSeries(t *testing.T) {
	dir := t.TempDir()
	start := tick(-86400, "Normal", 40) // the day before
	start.Trigger, start.Config = levels.TriggerStart, table(85)
	lines := []levels.Line{start}
	for sec := range 120 {
		lines = append(lines, tick(float64(sec), "Normal", 40+float64(sec)/10))
	}
	writeDays(t, dir, lines)
	today := filepath.Join(dir, FileName(s0))
	f, err := os.OpenFile(today, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	torn, _ := json.Marshal(tick(121, "Major", 99))
	huge := `{"v":1,"at":"2026-12-01T10:01:00.7Z","trigger":"tick","published":"Emergency","x":"` + strings.Repeat("x", 2<<20) + `"}`
	f.WriteString("not json\n" + `{"v":1,"at":"2026-12-01T10:01:00.5Z","trigger":` + "\n" + huge + "\n" + string(torn[:40]))
	f.Close()

	s, err := ReadSeries(context.Background(), dir, s0.Add(30*time.Second), s0.Add(time.Hour), 60)
	if err != nil {
		t.Fatal(err)
	}
	if s.Lines != 90 || len(s.Tables) != 1 || s.Tables[0].Levels[2].Thresholds[levels.CPU] != 85 || !s.Tables[0].At.Equal(start.At) {
		t.Errorf("%d lines, tables %+v; want 90 lines and the table of the start line a day before", s.Lines, s.Tables)
	}
	if n := len(s.Bands); n != 1 || s.Bands[0].Level != "Normal" {
		t.Errorf("bands %+v, want one Normal band (the torn Major line is being written, the Emergency one too long)", s.Bands)
	}

	empty, err := ReadSeries(context.Background(), dir, s0.Add(2*time.Hour), s0.Add(3*time.Hour), 60)
	if err != nil {
		t.Fatal(err)
	}
	if empty.Lines != 0 || len(empty.Tables) != 1 || empty.First != nil {
		t.Errorf("a range without lines: %+v, want no lines and the table in force", empty)
	}

	none, err := ReadSeries(context.Background(), filepath.Join(dir, "missing"), s0, s0.Add(time.Hour), 60)
	if err != nil || none.Lines != 0 {
		t.Errorf("no directory: %+v %v, want an empty series", none, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ReadSeries(ctx, dir, s0, s0.Add(time.Hour), 60); !errors.Is(err, context.Canceled) {
		t.Errorf("an ended context: %v, want context.Canceled", err)
	}
}

// BenchmarkReadSeriesDay summarizes a day of 1s ticks into 2000 points,
// the History view's 24h range.
func BenchmarkReadSeriesDay(b *testing.B) {
	dir := b.TempDir()
	var buf bytes.Buffer
	from := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for sec := range 86400 {
		l := tick(float64(sec), "Normal", 40)
		l.At = from.Add(time.Duration(sec) * time.Second)
		for _, sig := range levels.AllSignals[1:] { // as a daemon records them: every built-in signal
			v := float64(sec % 100)
			l.Signals[sig] = levels.LineSignal{Value: &v, State: "available"}
		}
		l.Signals[levels.CPUPressure] = levels.LineSignal{State: "off"}
		l.Window = levels.LineWindow{Attempts: 12000, Failures: 48, LatencyCounts: []int64{120, 800, 2400, 3100, 2600, 1900, 700, 250, 90, 30, 8, 2, 0, 0}}
		if sec == 0 {
			l.Config = table(80)
		}
		enc, _ := json.Marshal(l)
		buf.Write(append(enc, '\n'))
	}
	if err := os.WriteFile(filepath.Join(dir, FileName(from)), buf.Bytes(), 0o600); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReadSeries(context.Background(), dir, from, from.Add(24*time.Hour), 2000); err != nil {
			b.Fatal(err)
		}
	}
}
