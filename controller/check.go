package controller

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/degraded/degraded/levels"
)

// Check runs one health check now: sample, evaluate, publish. Run calls it
// on every tick; tests and tools may call it directly. Only one Check or
// Reconfigure runs at a time.
func (c *Controller) Check(ctx context.Context) { c.check(ctx, levels.TriggerTick) }

// check is Check, recorded in the timeline with the given trigger.
func (c *Controller) check(ctx context.Context, trigger string) {
	c.evalMu.Lock()
	defer c.evalMu.Unlock()
	start := time.Now()
	c.mu.Lock()
	o := c.opts
	errSince := c.errSince
	c.mu.Unlock()

	var readings []levels.Reading
	readings = append(readings, readSampler(ctx, levels.CPU, o.CPU, start), readSampler(ctx, levels.Memory, o.Memory, start))
	for _, src := range o.Sources {
		readings = append(readings, src.Read(ctx, start)...)
	}
	sample := levels.Sample{SampledAt: start.UTC()}.Clone()
	failed := c.apply(sample, readings)
	sample = sampleWindow(o, errSince, start, sample)
	counts := c.latencyCounts(o, start)

	c.mu.Lock()
	before := c.seq
	moves := c.evaluate(start, sample)
	st := c.publishLocked(start, SourceAuto, "automatic level now "+c.opts.Table.Level(c.auto.Level).Name)
	c.mu.Unlock()

	c.recordLine(start, trigger, st, counts)
	if err := c.announce(moves, st.Sequence != before); err == nil && c.unsaved.Load() {
		_ = c.save(false) // retry a save that failed earlier; save logs
	}
	c.sampleCh.broadcast()
	if c.observer != nil {
		c.observer.HealthCheck(time.Since(start), failed)
	}
}

// sampleWindow reads the error window into sample: the error rate and,
// from a LatencyWindow, the latency quantile (each with min_throughput
// observations), their states and the window's counts. It also turns off
// each signal that no level has a threshold for.
func sampleWindow(o Options, since, now time.Time, sample levels.Sample) levels.Sample {
	warming := now.Sub(since) < o.ErrorWindow
	state := func(enough bool) levels.SignalState {
		switch {
		case warming:
			return levels.Warming
		case enough:
			return levels.Available
		}
		return levels.Absent
	}
	if o.Errors != nil {
		a, f := o.Errors.Totals(now)
		sample.WindowAttempts, sample.WindowFailures = a, f
		a, f = fleetWindow(o.FleetErrors, &sample, a, f)
		enough := a > 0 && a >= o.MinThroughput
		delete(sample.Values, levels.ErrorRate)
		if enough {
			sample.Values[levels.ErrorRate] = float64(f) / float64(a) * 100
		}
		sample.States[levels.ErrorRate] = state(enough)
	}
	if lw, ok := o.Errors.(LatencyWindow); ok {
		ms, n := lw.Quantile(now, o.Table.LatencyQuantile())
		sample.LatencyObservations = n
		enough := n > 0 && n >= o.MinThroughput
		delete(sample.Values, levels.Latency)
		if enough {
			sample.Values[levels.Latency] = ms
		}
		sample.States[levels.Latency] = state(enough)
	}
	for _, sig := range o.Table.Signals() {
		if !o.Table.Uses(sig) && sig.Builtin() {
			sample.States[sig] = levels.Off
			delete(sample.Values, sig)
			delete(sample.Recovery, sig)
		}
	}
	return sample
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
			if sample.Recovery == nil {
				sample.Recovery = map[levels.Signal]float64{}
			}
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
	c.logMu.Lock()
	defer c.logMu.Unlock()
	if c.failing == nil {
		c.failing = map[levels.Signal]string{}
	}
	was, failing := c.failing[r.Signal]
	switch {
	case r.State == levels.Failed:
		msg := fmt.Sprint(r.Err)
		if !failing || msg != was {
			c.log.Warn("sample failed", "signal", r.Signal.String(), "err", msg)
		}
		c.failing[r.Signal] = msg
	case failing:
		c.log.Info("sample recovered", "signal", r.Signal.String(), "state", r.State.String())
		delete(c.failing, r.Signal)
	}
}

// announce notifies observers and subscribers and saves the state after a
// change, outside the lock. It returns the save's error.
func (c *Controller) announce(moves []Transition, changed bool) error {
	if c.observer != nil {
		// Under obsMu the latest state, not st: whichever call comes last
		// leaves the observer with the newest document.
		c.obsMu.Lock()
		c.observer.Published(c.state.Load())
		c.obsMu.Unlock()
	}
	for _, m := range moves {
		if m.From != m.To {
			c.log.Info("level changed", "from", m.From, "to", m.To, "source", m.Source, "reason", m.Reason, "sequence", m.Sequence)
			if c.observer != nil {
				c.observer.Transition(m.From, m.To, m.Source)
			}
		} else {
			c.log.Info("state changed", "level", m.To, "source", m.Source, "reason", m.Reason, "sequence", m.Sequence)
		}
	}
	if !changed {
		return nil
	}
	// Publish, then save: subscribers see a change at once. The sequence
	// stays safe across a crash (save reserves blocks; see SequenceBlock),
	// and callers that must not answer before the change is durable
	// (override PUT and DELETE) wait for this save's result.
	c.levelCh.broadcast()
	// The stream writers just woken wait in this P's run queue: let them
	// run before the save's fsync holds the P for milliseconds (measured:
	// the event reached subscribers up to 10 ms late without this).
	runtime.Gosched()
	return c.save(false)
}
