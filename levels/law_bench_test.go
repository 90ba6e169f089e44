package levels

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkEvaluateEvent is one event evaluation carrying one client's
// report, with the law following a typical fleet (8 clients offering the
// benchmark's four priorities) and at the bounds it keeps (256 reporters,
// 101 priorities each, within maxKept): what an evaluation costs the
// controller's goroutine, which runs at most one event a millisecond.
func BenchmarkEvaluateEvent(b *testing.B) {
	for _, size := range []struct{ reporters, priorities int }{{8, 4}, {maxReporters, 101}} {
		b.Run(fmt.Sprintf("%d reporters x %d priorities", size.reporters, size.priorities), func(b *testing.B) {
			t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
			m := NewMachine(Config{Table: simTable(b), Rules: Rules{MinimumLevelDuration: 10 * time.Second, Hysteresis: 0.1, MaxOverrideTTL: time.Hour, MinThroughput: 10}}, t0)
			m.Evaluate(Input{At: t0, Trigger: TriggerStart, Sample: Sample{}.Clone()})
			reports := make([]Report, size.reporters)
			for c := range reports {
				offered, admitted := map[int]int64{}, int64(0)
				for p := range size.priorities {
					offered[p*100/size.priorities] = int64(p%7 + 1)
					admitted += int64(p%7 + 1)
				}
				reports[c] = Report{At: t0.Add(time.Second), Success: admitted,
					Admission: &Admission{Admitted: admitted, Seconds: 1, Reporter: fmt.Sprintf("c%d", c), Offered: offered}}
			}
			m.Evaluate(Input{At: t0.Add(time.Second), Trigger: TriggerEvent, Sample: Sample{}.Clone(), Reports: reports})
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				now := t0.Add(time.Second + time.Duration(i+1)*time.Millisecond)
				r := reports[i%len(reports)]
				r.At = now
				r.Admission = &Admission{Admitted: r.Admission.Admitted, Seconds: 0.1, Reporter: r.Admission.Reporter, Offered: r.Admission.Offered}
				m.Evaluate(Input{At: now, Trigger: TriggerEvent, Sample: Sample{}.Clone(), Reports: []Report{r}})
			}
		})
	}
}
