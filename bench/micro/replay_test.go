package micro

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/degraded/degraded/config"
	"github.com/degraded/degraded/internal/replay"
	"github.com/degraded/degraded/internal/timeline"
	"github.com/degraded/degraded/levels"
)

// weekLines is a week of 1s ticks: 604,800 lines.
const weekLines = 7 * 24 * 3600

// writeWeek writes a synthetic week of 1s ticks into daily files under
// dir, as the recorder names them: cpu drifting through the default
// thresholds (an incident every few hours), memory steady, the error
// window's counts with a small failure rate and latency counts.
func writeWeek(b *testing.B, dir string) {
	b.Helper()
	start := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	var w *bufio.Writer
	var f *os.File
	name := ""
	line := levels.Line{V: 1, Trigger: levels.TriggerTick, Source: "auto", Published: "Normal", Recommended: "Normal"}
	for i := range weekLines {
		at := start.Add(time.Duration(i) * time.Second)
		if n := timeline.FileName(at); n != name {
			if w != nil {
				if err := w.Flush(); err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
			var err error
			if f, err = os.Create(filepath.Join(dir, n)); err != nil {
				b.Fatal(err)
			}
			w, name = bufio.NewWriterSize(f, 1<<20), n
		}
		cpu := 40 + 50*float64((i/60)%240)/240 // a ramp to 90% every 4 hours
		mem := 55.0
		rate := float64(i%7) / 2
		line.At = at
		line.Signals = map[levels.Signal]levels.LineSignal{
			levels.CPU:       {Value: &cpu, State: "available"},
			levels.Memory:    {Value: &mem, State: "available"},
			levels.ErrorRate: {Value: &rate, State: "available"},
			levels.Latency:   {State: "off"},
		}
		line.Window = levels.LineWindow{Attempts: 200, Failures: int64(i % 7), LatencyCounts: []int64{0, 0, 0, 40, 80, 60, 15, 4, 1, 0, 0, 0, 0, 0}}
		j, err := json.Marshal(line)
		if err != nil {
			b.Fatal(err)
		}
		w.Write(append(j, '\n'))
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Close()
}

// BenchmarkReplayWeek replays a week of 1s ticks (about 600k lines, the
// issue's "in seconds") under the default config: read, merge, parse, run
// levels.Next on every line. It reports lines/s; ns/op is one whole week.
func BenchmarkReplayWeek(b *testing.B) {
	dir := b.TempDir()
	writeWeek(b, dir)
	files, err := replay.Files([]string{dir})
	if err != nil {
		b.Fatal(err)
	}
	cfg := config.Default()
	cfg.HealthCheckInterval = time.Second
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, err := replay.Run(replay.Options{Config: cfg, Files: files})
		if err != nil {
			b.Fatal(err)
		}
		if res.Lines != weekLines || len(res.Transitions) == 0 {
			b.Fatalf("replayed %d lines, %d transitions; want %d lines and the ramps' transitions", res.Lines, len(res.Transitions), weekLines)
		}
	}
	b.ReportMetric(float64(weekLines)*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
}
