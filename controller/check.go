package controller

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/degraded/degraded/levels"
)

// Check runs one health check now: sample, evaluate, publish. Run calls it
// on every tick; tests and tools may call it directly. Only one Check or
// Reconfigure runs at a time.
func (c *Controller) Check(ctx context.Context) {
	c.evalMu.Lock()
	defer c.evalMu.Unlock()
	start := time.Now()
	c.mu.Lock()
	o := c.opts
	errSince := c.errSince
	c.mu.Unlock()

	var failed []string
	sample := levels.Sample{
		Values:    make(map[levels.Signal]float64, levels.NumSignals),
		States:    make(map[levels.Signal]levels.SignalState, levels.NumSignals),
		SampledAt: start.UTC(),
	}
	for sig, sampler := range map[levels.Signal]Sampler{levels.CPU: o.CPU, levels.Memory: o.Memory} {
		if st := c.sampleOne(ctx, sig, sampler, start, sample); st == levels.Failed {
			failed = append(failed, sig.String())
		}
	}
	slices.Sort(failed)
	sample = sampleErrors(o, errSince, start, sample)

	c.mu.Lock()
	before := c.seq
	moves := c.evaluate(start, sample)
	st := c.publishLocked(start, SourceAuto, "automatic level now "+c.opts.Table.Level(c.auto.Level).Name)
	c.mu.Unlock()

	if err := c.announce(moves, st.Sequence != before); err == nil && c.unsaved.Load() {
		_ = c.save(false) // retry a save that failed earlier; save logs
	}
	c.sampleCh.broadcast()
	if c.observer != nil {
		c.observer.HealthCheck(time.Since(start), failed)
	}
}

// sampleErrors reads the error window into sample: the rate (with
// min_throughput observations), its state and the window's counts. It also
// turns off each signal that no level has a threshold for.
func sampleErrors(o Options, since, now time.Time, sample levels.Sample) levels.Sample {
	if o.Errors != nil {
		a, f := o.Errors.Totals(now)
		sample.WindowAttempts, sample.WindowFailures = a, f
		enough := a > 0 && a >= o.MinThroughput
		delete(sample.Values, levels.ErrorRate)
		if enough {
			sample.Values[levels.ErrorRate] = float64(f) / float64(a) * 100
		}
		switch {
		case now.Sub(since) < o.ErrorWindow:
			sample.States[levels.ErrorRate] = levels.Warming
		case enough:
			sample.States[levels.ErrorRate] = levels.Available
		default:
			sample.States[levels.ErrorRate] = levels.Absent
		}
	}
	for _, sig := range levels.AllSignals {
		if !o.Table.Uses(sig) {
			sample.States[sig] = levels.Off
			delete(sample.Values, sig)
		}
	}
	return sample
}

// sampleOne samples one resource into sample and returns its state: off
// for a nil sampler, warming, failed (logged) or available.
func (c *Controller) sampleOne(ctx context.Context, sig levels.Signal, s Sampler, now time.Time, sample levels.Sample) levels.SignalState {
	st := levels.Off
	if s != nil {
		x, err := s.Sample(ctx, now)
		switch {
		case errors.Is(err, levels.ErrWarmingUp):
			st = levels.Warming
		case err != nil:
			c.log.Warn("sample failed", "signal", sig.String(), "err", err)
			st = levels.Failed
		default:
			st = levels.Available
			sample.Values[sig] = x
		}
	}
	sample.States[sig] = st
	return st
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
	return c.save(false)
}
