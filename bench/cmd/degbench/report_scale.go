package main

import (
	"fmt"
	"strings"
)

// projected is the subscriber count the scale section projects to.
const projected = 100000

// projection is the daemon's RSS projected to n subscribers from the
// largest measured point and the per-subscriber cost of its last step.
func (s *scaleResult) projection(n int) (rss, marginal float64) {
	top := s.Points[len(s.Points)-1]
	prevN, prevRSS := 0, s.Before.RSS
	if len(s.Points) > 1 {
		p := s.Points[len(s.Points)-2]
		prevN, prevRSS = p.Subscribers, p.Daemon.RSS
	}
	marginal = (top.Daemon.RSS - prevRSS) / float64(top.Subscribers-prevN)
	return top.Daemon.RSS + float64(n-top.Subscribers)*marginal, marginal
}

func (r *report) writeScale(b *strings.Builder) {
	s := r.scale
	if s == nil || len(s.Points) == 0 {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	top := s.Points[len(s.Points)-1]
	p("\n## 7. Scale: SSE subscribers up to the open-file limit\n\n")
	p("`degbench scale` (bench/cmd/degbench/scale.go). One daemon, configured as in section 3, open-file\n")
	p("limit %s (soft/hard); subscribers are added in steps, each step's held by a child process of its\n", s.NoFile)
	p("own (raw non-blocking sockets read by one epoll loop per core: about 100 bytes and no goroutine\n")
	p("per subscriber on the measuring side). At each step: %d override changes after 2 warm-ups, the\n", s.Changes)
	p("clock from just before the PUT to the last subscriber holding the event, then the daemon's\n")
	p("memory. \"Per subscriber\" is the RSS over the daemon's before any subscriber (%.1f MiB), divided by\n", s.Before.RSS/(1<<20))
	p("the subscribers; \"added\" is the RSS the step added, divided by the subscribers it added. Each\n")
	p("RSS is the median of 5 readings a quarter second apart, so that one reading just before a\n")
	p("collection does not pass for a trend.\n\n")
	p("| subscribers | daemon RSS | per subscriber | added, per subscriber | Go heap in use | goroutines | to last p50 | p99 | p50 per subscriber |\n")
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	prevN, prevRSS := 0, s.Before.RSS
	var added []float64
	for _, pt := range s.Points {
		add := (pt.Daemon.RSS - prevRSS) / float64(pt.Subscribers-prevN)
		added = append(added, add)
		p("| %d | %.1f MiB | %.2f KiB | %.2f KiB | %.1f MiB | %.0f | %.1f ms | %.1f ms | %.1f µs |\n",
			pt.Subscribers, pt.Daemon.RSS/(1<<20), pt.perSubKiB(s.Before), add/1024, pt.Daemon.HeapInuse/(1<<20),
			pt.Daemon.Goroutines, quantile(pt.LastMs, .5), quantile(pt.LastMs, .99), quantile(pt.LastMs, .5)*1000/float64(pt.Subscribers))
		prevN, prevRSS = pt.Subscribers, pt.Daemon.RSS
	}
	rss, marginal := s.projection(projected)
	p("\nProjection to %d subscribers (where the open-file limit allows them): the RSS at %d,\n", projected, top.Subscribers)
	p("%.1f MiB, plus %d more subscribers at the last step's %.2f KiB each: %.1f + %d × %.2f KiB =\n",
		top.Daemon.RSS/(1<<20), projected-top.Subscribers, marginal/1024, top.Daemon.RSS/(1<<20), projected-top.Subscribers, marginal/1024)
	p("**%.0f MiB** of RSS, against the 1 GiB target. The kernel's socket memory is not in RSS: see\n", rss/(1<<20))
	p("\"Scale: 100,000 subscribers\" in the findings for it and for the limits an operator sets.\n")

	perTop := top.perSubKiB(s.Before)
	r.verdicts = append(r.verdicts, verdict{
		fmt.Sprintf("scale: ≤ 8 KiB RSS per subscriber at %d (the fd limit)", top.Subscribers),
		fmt.Sprintf("%.2f KiB", perTop),
		yes(perTop <= 8),
	})
	flat := len(added) < 2 || added[len(added)-1] <= 1.25*added[len(added)-2]
	steps := make([]string, len(added))
	for i, a := range added {
		steps[i] = fmt.Sprintf("%.2f", a/1024)
	}
	r.verdicts = append(r.verdicts, verdict{
		"scale: per-subscriber cost flat up to the fd limit",
		"added per subscriber, step by step: " + strings.Join(steps, ", ") + " KiB",
		yes(flat),
	})
	r.verdicts = append(r.verdicts, verdict{
		fmt.Sprintf("scale: %d subscribers in 1 GiB (projection)", projected),
		fmt.Sprintf("%.0f MiB", rss/(1<<20)),
		yes(rss <= 1<<30),
	})
}
