package levels

import (
	"maps"
	"time"
)

// reporterTTL is how long a reporter's last account of its offered load
// counts after it arrived, at least: a client that stopped reporting
// stops counting. A reporter whose interval is longer counts for three of
// its intervals.
const reporterTTL = 3 * time.Second

// maxReporters bounds the reporters the law remembers; beyond it, the
// least recently heard one is forgotten.
const maxReporters = 256

// reporter is what the law remembers of one client: its last account of
// the load it was offered, in requests per second by priority.
type reporter struct {
	at      time.Time
	ttl     time.Duration
	offered map[int]float64
}

// evidence is what one evaluation's reports say.
type evidence struct {
	// offered is the live reporters' offered load, requests per second by
	// priority; sized reports whether there is any, so that the law can
	// size a step.
	offered map[int]float64
	sized   bool
	// fresh reports whether a report judged wholly after the last change
	// of the automatic admission arrived; the rest is read from such
	// reports only.
	fresh bool
	// over says the service is overloaded: a fresh latency or failure
	// ratio above the lowest threshold of its signal, or a sampled signal
	// (cpu, memory, pressure, custom) above its lowest threshold. quiet
	// says every such signal is well below (half the threshold).
	over, quiet bool
	// success and admitted are the fresh reports' completions and
	// admitted requests per second; seconds the time they cover.
	success, admitted float64
	seconds           float64
	// why names what made over true, for reasons.
	why string
}

// observe takes an evaluation's reports into the reporters and returns
// what they say. It replaces the reporters' map rather than changing it.
func (l *law) observe(c Config, in Input) evidence {
	var ev evidence
	var fresh freshCounts
	reporters := l.reporters
	copied := false
	for _, r := range in.Reports {
		a := r.Admission
		if a == nil || !(a.Seconds > 0) {
			continue
		}
		if !copied {
			reporters, copied = maps.Clone(l.reporters), true
			if reporters == nil {
				reporters = map[string]reporter{}
			}
		}
		span := time.Duration(a.Seconds * float64(time.Second))
		rates := make(map[int]float64, len(a.Offered))
		for p, n := range a.Offered {
			rates[p] = float64(n) / a.Seconds
		}
		reporters[a.Reporter] = reporter{at: r.At, ttl: max(reporterTTL, 3*span), offered: rates}
		if !r.At.Add(-span).Before(l.changedAt) {
			fresh.add(r, a.Seconds)
		}
	}
	if copied || len(reporters) > 0 {
		reporters = l.forget(reporters, copied, in.At)
	}
	l.reporters = reporters
	ev.offered = map[int]float64{}
	for _, rep := range l.reporters {
		for p, v := range rep.offered {
			ev.offered[p] += v
		}
	}
	for _, v := range ev.offered {
		if v > 0 {
			ev.sized = true
			break
		}
	}
	if fresh.seconds > 0 {
		ev.fresh = true
		ev.success, ev.admitted, ev.seconds = fresh.rate(fresh.success), fresh.rate(fresh.success+fresh.failure), fresh.seconds
		ev.over, ev.quiet, ev.why = load(c, in.Sample, fresh)
	}
	return ev
}

// forget drops the reporters not heard from within their ttl, and the
// least recently heard beyond maxReporters. It copies the map before
// changing it unless copied says it already is a copy.
func (l *law) forget(reporters map[string]reporter, copied bool, now time.Time) map[string]reporter {
	drop := func(id string) {
		if !copied {
			reporters, copied = maps.Clone(reporters), true
		}
		delete(reporters, id)
	}
	for id, rep := range reporters {
		if now.Sub(rep.at) > rep.ttl {
			drop(id)
		}
	}
	for len(reporters) > maxReporters {
		oldest, at := "", now
		for id, rep := range reporters {
			if rep.at.Before(at) || oldest == "" {
				oldest, at = id, rep.at
			}
		}
		drop(oldest)
	}
	return reporters
}

// freshCounts sums the fresh reports of one evaluation.
type freshCounts struct {
	success, failure int64
	latency          [NumLatencyBuckets]int64
	hasLatency       bool
	// seconds is the span the counts cover: the longest report's, since
	// several clients report over the same time.
	seconds float64
}

func (f *freshCounts) add(r Report, seconds float64) {
	f.success += r.Success
	f.failure += r.Failure
	if len(r.Latency) > 0 {
		f.hasLatency = true
		for i := range min(len(r.Latency), NumLatencyBuckets) {
			f.latency[i] += r.Latency[i]
		}
	}
	f.seconds = max(f.seconds, seconds)
}

// rate is n per second of the fresh span.
func (f *freshCounts) rate(n int64) float64 { return float64(n) / f.seconds }

// load judges the fresh counts and the sample against the lowest
// threshold of each signal: over when one exceeds it, quiet when all are
// below half of it.
func load(c Config, s Sample, f freshCounts) (over, quiet bool, why string) {
	t := c.Table
	quiet = true
	judge := func(sig Signal, v float64) {
		th, ok := t.lowestThreshold(sig)
		switch {
		case !ok:
		case v > th:
			if !over {
				tr := Trigger{Signal: sig, Value: v, Threshold: th, Level: t.Level(t.lowestLevel(sig)).Name}
				if sig == Latency {
					tr.Label = "latency " + QuantileLabel(t.LatencyQuantile())
				}
				why = tr.String()
			}
			over, quiet = true, false
		case v > th/2:
			quiet = false
		}
	}
	if n := f.success + f.failure; n > 0 && n >= c.Rules.MinThroughput {
		judge(ErrorRate, float64(f.failure)/float64(n)*100)
	}
	if f.hasLatency {
		if ms, n := QuantileOf(f.latency[:], t.LatencyQuantile()); n > 0 && n >= c.Rules.MinThroughput {
			judge(Latency, ms)
		}
	}
	for _, sig := range t.Signals() {
		if sig == ErrorRate || sig == Latency {
			continue // the window lags: the fresh reports say what the last change did
		}
		if v, ok := s.Value(sig); ok {
			judge(sig, v)
		}
	}
	return over, quiet, why
}
