package signals

import (
	"context"
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

// Instant reports that PSI is read at health checks only
// (controller.Source).
func (p *Pressure) Instant() bool { return false }
