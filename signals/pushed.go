package signals

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/degraded/degraded/levels"
)

// ErrUnknownSignal is returned by [Pushed.Set] for a name that is not a
// configured custom signal (PUT /v1/signals/{name} answers 404).
var ErrUnknownSignal = levels.ErrUnknownSignal

// ErrQueried is returned by [Pushed.Set] for a custom signal that a
// Prometheus query feeds: it cannot be pushed (409).
var ErrQueried = levels.ErrQueried

// PushedSignal configures one pushed custom signal: a value older than TTL
// is stale, which reads as failed.
type PushedSignal struct {
	Name levels.Signal
	TTL  time.Duration
}

// Pushed holds the values services push for custom signals (PUT
// /v1/signals/{name}). A signal is warming until its first value, failed
// once its value is older than its ttl, and available otherwise. The zero
// value holds no signals; configure it with [Pushed.Configure]. It is safe
// for concurrent use.
type Pushed struct {
	mu      sync.Mutex
	ttl     map[levels.Signal]time.Duration
	queried map[levels.Signal]bool
	values  map[levels.Signal]pushedValue
	order   []levels.Signal
}

type pushedValue struct {
	v  float64
	at time.Time
}

// Configure sets the pushed signals and the names that queries feed. The
// values of signals that stay configured are kept; the others are dropped.
func (p *Pushed) Configure(pushed []PushedSignal, queried []levels.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ttl = make(map[levels.Signal]time.Duration, len(pushed))
	p.order = p.order[:0]
	for _, s := range pushed {
		p.ttl[s.Name] = s.TTL
		p.order = append(p.order, s.Name)
	}
	p.queried = make(map[levels.Signal]bool, len(queried))
	for _, q := range queried {
		p.queried[q] = true
	}
	for name := range p.values {
		if _, ok := p.ttl[name]; !ok {
			delete(p.values, name)
		}
	}
}

// Set records a pushed value at now. It fails with ErrUnknownSignal,
// ErrQueried, or an error naming a value that is not a finite number.
func (p *Pushed) Set(name string, v float64, now time.Time) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("value must be a finite number (was %v)", v)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	sig := levels.Signal(name)
	switch {
	case p.queried[sig]:
		return fmt.Errorf("%s: %w", name, ErrQueried)
	case p.ttl[sig] == 0:
		return fmt.Errorf("%s: %w", name, ErrUnknownSignal)
	}
	if p.values == nil {
		p.values = map[levels.Signal]pushedValue{}
	}
	p.values[sig] = pushedValue{v, now}
	return nil
}

// Read returns one reading per pushed signal, in config order.
func (p *Pushed) Read(_ context.Context, now time.Time) []levels.Reading {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]levels.Reading, 0, len(p.order))
	for _, name := range p.order {
		pv, ok := p.values[name]
		switch age := now.Sub(pv.at); {
		case !ok:
			out = append(out, levels.Reading{Signal: name, State: levels.Warming})
		case age > p.ttl[name]:
			out = append(out, levels.Reading{Signal: name, State: levels.Failed, Err: staleError(name, pv.at, p.ttl[name])})
		default:
			out = append(out, levels.Reading{Signal: name, State: levels.Available, Value: pv.v, HasValue: true})
		}
	}
	return out
}

// staleError says a pushed value is older than its ttl. Its text names
// the time of the last value, not its age, so that it stays the same from
// one health check to the next while no value arrives: the controller logs
// a failing signal once per change of its error (DESIGN.md "Unknown is not
// healthy"), not once per tick. The age follows from the time; the state
// document's signals.status says failed meanwhile.
func staleError(name levels.Signal, last time.Time, ttl time.Duration) error {
	return fmt.Errorf("pushed signal %s: no value since %s (ttl %s)", name,
		last.UTC().Format(time.RFC3339Nano), levels.FormatDuration(ttl))
}

// Instant reports that pushed values change between health checks: an
// event-driven evaluation reads them again (controller.Source).
func (p *Pushed) Instant() bool { return true }
