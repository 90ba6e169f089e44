package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/degraded/degraded/levels"
)

// eventEvery is the least time between two event-driven evaluations: the
// reports of a flood are merged into at most four evaluations (and
// timeline lines) a second. A report that would escalate is evaluated at
// once all the same.
const eventEvery = 250 * time.Millisecond

// maxPending bounds the reports kept between two evaluations; beyond it
// they are merged as they come (levels.MergeReports).
const maxPending = 1024

// Reported tells the controller that an outcome report reached the error
// window (r carries its counts and admission object), or that a pushed
// value arrived (a zero r). It never blocks: the report is queued for the
// controller's goroutine, which evaluates it at once if that escalates (an
// error burst is shed within milliseconds) or at most every 250ms
// otherwise, merged with the reports that came meanwhile. See DESIGN.md
// "Transitions": an event evaluates the automatic level only, upward only,
// and in graduated mode the admission law re-evaluates the partial
// admission up or down.
func (c *Controller) Reported(r levels.Report) {
	c.pendMu.Lock()
	c.pending = append(c.pending, r)
	if len(c.pending) > maxPending {
		c.pending = levels.MergeReports(c.pending)
	}
	c.pendMu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default: // a wake is pending already: it will take this report too
	}
}

// takePending returns the queued reports, merged, and empties the queue.
func (c *Controller) takePending() []levels.Report {
	c.pendMu.Lock()
	rs := c.pending
	c.pending = nil
	c.pendMu.Unlock()
	return levels.MergeReports(rs)
}

// reported decides when to evaluate the queued reports: now, if the last
// event evaluation was eventEvery ago or they escalate; else when that
// time comes.
func (c *Controller) reported(ctx context.Context) {
	r := &c.run
	if !r.m.Ready() || r.timer != nil {
		return // the first health check, or the armed evaluation, takes them
	}
	now := time.Now()
	if wait := eventEvery - now.Sub(r.lastEvent); wait > 0 {
		if !r.m.WouldEscalate(c.eventSample(ctx, now), now) {
			r.timer = time.NewTimer(wait)
			return
		}
	}
	c.event(ctx)
}

// tick runs one health check: sample, evaluate, publish.
func (c *Controller) tick(ctx context.Context, trigger string) {
	r := &c.run
	start := time.Now()
	o := r.opts
	readings := []levels.Reading{readSampler(ctx, levels.CPU, o.CPU, start), readSampler(ctx, levels.Memory, o.Memory, start)}
	for _, src := range o.Sources {
		readings = append(readings, src.Read(ctx, start)...)
	}
	sample := levels.Sample{SampledAt: start.UTC()}.Clone()
	failed := c.apply(sample, readings)
	w := c.window(start)
	o.Table.ReadWindow(&sample, w, o.Rules.MinThroughput)
	in := levels.Input{At: start, Trigger: trigger, Sample: sample, Reports: c.takePending(), Jitter: c.draw()}
	out := r.m.Evaluate(in)
	c.keepSample(sample)
	l := c.evalLine(in, w)
	if trigger == levels.TriggerStart {
		cfg := r.m.Config()
		lc := cfg.Line()
		lc.Measured = o.Measured
		l.Config = &lc
	}
	c.changed(start, out, l)
	if r.unsaved {
		_ = c.save(false) // retry a save that failed earlier; save logs
	}
	c.sampleCh.broadcast()
	if c.observer != nil {
		c.observer.HealthCheck(time.Since(start), failed)
	}
}

// event runs one event-driven evaluation of the queued reports and the
// pushed values.
func (c *Controller) event(ctx context.Context) {
	r := &c.run
	now := time.Now()
	r.lastEvent = now
	sample := c.eventSample(ctx, now)
	in := levels.Input{At: now, Trigger: levels.TriggerEvent, Sample: sample, Reports: c.takePending(), Jitter: c.draw()}
	out := r.m.Evaluate(in)
	c.changed(now, out, c.evalLine(in, c.window(now)))
	c.sampleCh.broadcast()
}

// eventSample is the last sample with the pushed values and the error
// window read again at now.
func (c *Controller) eventSample(ctx context.Context, now time.Time) levels.Sample {
	r := &c.run
	sample := r.m.Published().Signals.Clone()
	var readings []levels.Reading
	for _, src := range r.opts.Sources {
		if src.Instant() {
			readings = append(readings, src.Read(ctx, now)...)
		}
	}
	c.apply(sample, readings)
	r.opts.Table.ReadWindow(&sample, c.window(now), r.opts.Rules.MinThroughput)
	sample.SampledAt = now.UTC()
	return sample
}

// window reads the error window (and the fleet's, with error_rate_scope
// fleet) at now.
func (c *Controller) window(now time.Time) levels.Window {
	o := c.run.opts
	if o.Errors == nil {
		return levels.Window{}
	}
	var w levels.Window
	w.Attempts, w.Failures = o.Errors.Totals(now)
	w.Warming = now.Sub(c.run.errSince) < o.ErrorWindow
	if lw, ok := o.Errors.(LatencyWindow); ok {
		counts := lw.LatencyCounts(now)
		w.Latency = counts[:]
	}
	if o.FleetErrors != nil {
		fw := o.FleetErrors.ErrorRate()
		if fw.Local != "" {
			w.Local = fw.Local
		} else {
			w.Fleet = &levels.LineFleetWindow{Attempts: fw.Attempts, Failures: fw.Failures, Instances: fw.Instances}
		}
	}
	return w
}

// keepSample adds a health check's sample to the ring Samples reads.
func (c *Controller) keepSample(s levels.Sample) {
	keep := min(SamplesLimit, max(1, int(SamplesSpan/c.run.opts.HealthCheckInterval)))
	c.mu.Lock()
	c.samples = append(c.samples, s)
	if len(c.samples) > keep {
		c.samples = append(c.samples[:0], c.samples[len(c.samples)-keep:]...)
	}
	c.mu.Unlock()
}

// readSampler reads one single-valued sampler: off for a nil sampler.
func readSampler(ctx context.Context, sig levels.Signal, s Sampler, now time.Time) levels.Reading {
	if s == nil {
		return levels.Reading{Signal: sig, State: levels.Off}
	}
	x, err := s.Sample(ctx, now)
	return levels.ReadingOf(sig, x, err)
}

// apply writes readings into sample and returns the names of the signals
// that failed, sorted; each failure is logged.
func (c *Controller) apply(sample levels.Sample, readings []levels.Reading) (failed []string) {
	for _, r := range readings {
		sample.States[r.Signal] = r.State
		delete(sample.Values, r.Signal)
		if r.Recovery != nil {
			sample.Recovery[r.Signal] = *r.Recovery
		}
		if r.HasValue || r.State == levels.Available {
			sample.Values[r.Signal] = r.Value
		}
		if r.State == levels.Failed {
			failed = append(failed, r.Signal.String())
		}
		c.logFailure(r)
	}
	slices.Sort(failed)
	return failed
}

// logFailure logs a signal that starts failing (or fails for another
// reason) at WARN, and its return at INFO: once per change, not once per
// health check. Every failed sample is still counted
// (sample_errors_total) and shown in signals.status.
func (c *Controller) logFailure(r levels.Reading) {
	failing := c.run.failing
	was, isFailing := failing[r.Signal]
	switch {
	case r.State == levels.Failed:
		msg := fmt.Sprint(r.Err)
		if !isFailing || msg != was {
			c.log.Warn("sample failed", "signal", r.Signal.String(), "err", msg)
		}
		failing[r.Signal] = msg
	case isFailing:
		c.log.Info("sample recovered", "signal", r.Signal.String(), "state", r.State.String())
		delete(failing, r.Signal)
	}
}
