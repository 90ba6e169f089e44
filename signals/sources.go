package signals

import (
	"context"
	"errors"
	"time"

	"github.com/degraded/degraded/levels"
)

// pressureSignals maps each PSI resource to its signal.
var pressureSignals = map[PressureResource]levels.Signal{
	PressureCPU:    levels.CPUPressure,
	PressureMemory: levels.MemoryPressure,
	PressureIO:     levels.IOPressure,
}

// Read samples the three pressure files as readings of cpu_pressure,
// memory_pressure and io_pressure: each some avg10 as the value, with its
// avg60 as the recovery value. A resource whose file failed is a Failed
// reading naming the file; the others are still read.
func (p *Pressure) Read(ctx context.Context, _ time.Time) []levels.Reading {
	r, err := p.Sample(ctx)
	out := make([]levels.Reading, 0, len(pressureResources))
	for _, res := range pressureResources {
		sig := pressureSignals[res]
		psi, rerr := r.Get(res)
		if rerr == nil && err != nil && r.Errs == nil {
			rerr = err // the whole sample failed (a cancelled context)
		}
		if rerr != nil {
			out = append(out, levels.Reading{Signal: sig, State: levels.Failed, Err: rerr})
			continue
		}
		avg60 := psi.Avg60
		out = append(out, levels.Reading{Signal: sig, State: levels.Available, Value: psi.Avg10, HasValue: true, Recovery: &avg60})
	}
	return out
}

// readingOf turns a sampler's answer into a reading of sig: a value is
// available, ErrWarmingUp is warming, ErrAbsent is absent, any other
// error is failed.
func readingOf(sig levels.Signal, v float64, err error) levels.Reading {
	switch {
	case err == nil:
		return levels.Reading{Signal: sig, State: levels.Available, Value: v, HasValue: true}
	case errors.Is(err, levels.ErrWarmingUp):
		return levels.Reading{Signal: sig, State: levels.Warming}
	case errors.Is(err, levels.ErrAbsent):
		return levels.Reading{Signal: sig, State: levels.Absent}
	}
	return levels.Reading{Signal: sig, State: levels.Failed, Err: err}
}
