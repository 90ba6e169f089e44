package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/degraded/degraded/fleet"
	"github.com/degraded/degraded/fleet/fleettest"
)

// simFleet is a fleet of members of the real fleet package in this
// process, each with its own etcd client, reporting every tick as a
// daemon does, and noting when each fleet override reaches it.
type simFleet struct {
	ctx       context.Context
	endpoint  string
	tick, ttl time.Duration
	log       *slog.Logger

	mu      sync.Mutex
	members []*simMember
	arrived chan arrival // a fleet override reached a member
	wg      sync.WaitGroup
}

// simMember is one member, and what cuts it off from etcd.
type simMember struct {
	f      *fleet.Fleet
	cut    *fleettest.Cutter
	cancel context.CancelFunc
	done   chan struct{}
}

// arrival is one fleet override's reason reaching one member.
type arrival struct {
	member int
	reason string
	at     time.Time
}

func newSimFleet(ctx context.Context, endpoint string, tick, ttl time.Duration) *simFleet {
	// Members log their warnings (a lost member, a refused value) to
	// stderr: a quiet run logs nothing.
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	return &simFleet{ctx: ctx, endpoint: endpoint, tick: tick, ttl: ttl, log: log, arrived: make(chan arrival, 1<<16)}
}

// start starts n members, 50 at a time a tenth of a tick apart, as a
// rolling start would.
func (s *simFleet) start(n int) error {
	for i := range n {
		cut := &fleettest.Cutter{}
		f, err := fleet.New(fleet.Options{Endpoints: []string{s.endpoint}, Name: "scale", Instance: fmt.Sprintf("m%05d", i),
			InstanceTTL: s.ttl, Tick: s.tick, DialTimeout: 5 * time.Second, Dial: cut.Dial, Logger: s.log})
		if err != nil {
			return err
		}
		ctx, cancel := context.WithCancel(s.ctx)
		m := &simMember{f: f, cut: cut, cancel: cancel, done: make(chan struct{})}
		s.mu.Lock()
		s.members = append(s.members, m)
		s.mu.Unlock()
		s.wg.Go(func() { defer close(m.done); _ = f.Run(ctx) })
		s.wg.Go(func() { s.report(ctx, f) })
		s.wg.Go(func() { s.follow(ctx, i, f) })
		if i%50 == 49 {
			time.Sleep(s.tick / 10)
		}
	}
	return nil
}

// report hands f a daemon-sized report every tick, at a random phase.
func (s *simFleet) report(ctx context.Context, f *fleet.Fleet) {
	sigs := json.RawMessage(`{"cpu_percent":12.5,"memory_percent":41,"error_rate_percent":1,"window_attempts":1000,"window_failures":10}`)
	phase := time.NewTimer(rand.N(s.tick))
	select {
	case <-ctx.Done():
		phase.Stop()
		return
	case <-phase.C:
	}
	t := time.NewTicker(s.tick)
	defer t.Stop()
	for {
		f.Report(fleet.Report{Level: "Normal", Source: "auto", Recommended: "Normal", Signals: sigs, WindowAttempts: 1000, WindowFailures: 10, At: time.Now()})
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// follow notes each fleet override's arrival at member i.
func (s *simFleet) follow(ctx context.Context, i int, f *fleet.Fleet) {
	for {
		u, err := f.Next(ctx)
		if err != nil {
			return
		}
		if u.Override != nil && strings.HasPrefix(u.Override.Reason, "fleet-scale ") {
			select {
			case s.arrived <- arrival{i, u.Override.Reason, time.Now()}:
			default: // the collector fell behind: the measurement fails on a missing arrival
			}
		}
	}
}

// ready waits until every member is connected and member 0 holds an
// aggregate counting all n.
func (s *simFleet) ready(n int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		connected := 0
		for _, m := range s.members {
			if m.f.Connected() {
				connected++
			}
		}
		a := s.members[0].f.Aggregate(time.Now())
		if connected == n && a != nil && a.Instances == n {
			return nil
		}
		if time.Now().After(deadline) {
			got := 0
			if a != nil {
				got = a.Instances
			}
			return fmt.Errorf("after %s: %d of %d members connected, the aggregate counts %d", within, connected, n, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// override sets a fleet pin through member 0 and times its arrival at
// every member: each member's delay, the last one's, and SetOverride's
// own (its commit, and the revoke of the lease it replaced).
func (s *simFleet) override(reason string, within time.Duration) (all []float64, last, commit float64, err error) {
	start := time.Now()
	if _, err := s.members[0].f.SetOverride(s.ctx, fleet.Override{Level: "Major", Mode: "pin", TTL: 10 * time.Minute, Reason: reason, Actor: "degbench"}); err != nil {
		return nil, 0, 0, err
	}
	commit = float64(time.Since(start)) / 1e6
	seen := make(map[int]bool, len(s.members))
	timeout := time.After(within)
	for len(seen) < len(s.members) {
		select {
		case a := <-s.arrived:
			if a.reason != reason || seen[a.member] {
				continue
			}
			seen[a.member] = true
			ms := float64(a.at.Sub(start)) / 1e6
			all = append(all, ms)
			last = max(last, ms)
		case <-timeout:
			return nil, 0, 0, fmt.Errorf("%d of %d members had it after %s", len(seen), len(s.members), within)
		}
	}
	return all, last, commit, nil
}

// failover cuts the aggregator off from etcd (every connection closed,
// new ones refused: its lease is left to run out, as a crash leaves it),
// stops it, and times until another member holds an aggregate of a
// higher term.
func (s *simFleet) failover(within time.Duration) (oldTerm, newTerm int64, secs float64, err error) {
	var agg *simMember
	for _, m := range s.members {
		if t := m.f.Aggregating(); t > 0 {
			agg, oldTerm = m, t
		}
	}
	if agg == nil {
		return 0, 0, 0, errors.New("no member aggregates")
	}
	watcher := s.members[0]
	if watcher == agg {
		watcher = s.members[1]
	}
	start := time.Now()
	agg.cut.Cut()
	agg.cancel()
	for time.Since(start) < within {
		if a := watcher.f.Aggregate(time.Now()); a != nil && a.Term > oldTerm {
			return oldTerm, a.Term, time.Since(start).Seconds(), nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return oldTerm, 0, 0, fmt.Errorf("no aggregate of a term above %d within %s", oldTerm, within)
}

// stop ends every member and waits for them.
func (s *simFleet) stop() {
	s.mu.Lock()
	for _, m := range s.members {
		m.cancel()
	}
	s.mu.Unlock()
	s.wg.Wait()
}
