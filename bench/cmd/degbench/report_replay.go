package main

import (
	"fmt"
	"strings"
	"time"
)

// replayWeekLines is BenchmarkReplayWeek's week of 1s ticks.
const replayWeekLines = 7 * 24 * 3600

// writeReplay writes section 8: `degraded replay` over a week of ticks.
func (r *report) writeReplay(b *strings.Builder) {
	ns, _, ok := r.med("BenchmarkReplayWeek")
	if !ok {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	total := time.Duration(ns)
	rate := float64(replayWeekLines) / total.Seconds()
	p("\n## 8. Replay of a recorded week\n\n")
	p("`go test -bench BenchmarkReplayWeek ./micro` (bench/micro/replay_test.go), median of %d runs:\n", r.microRun)
	p("`internal/replay` (what `degraded replay` runs) over a synthetic week of 1s ticks in seven daily\n")
	p("files, %d lines, under the default config: read, merge by time, parse (one worker per CPU)\n", replayWeekLines)
	p("and `levels.Next` on every line.\n\n")
	p("| lines | total | lines/s |\n|---:|---:|---:|\n")
	p("| %d | %.2f s | %.0f |\n", replayWeekLines, total.Seconds(), rate)
	r.verdicts = append(r.verdicts, verdict{
		"replay: a week of 1s ticks in seconds",
		fmt.Sprintf("%.2f s, %.0f lines/s", total.Seconds(), rate),
		yes(total < 10*time.Second),
	})
}
