package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"time"
)

// reactionResult is what `degbench reaction` writes.
type reactionResult struct {
	Interval time.Duration
	Trials   []float64 // ms from the failing outcomes posted to the SSE event
	Levels   []string  // the level each trial's event reported
}

func reactionCmd(args []string) error {
	fs := flag.NewFlagSet("reaction", flag.ExitOnError)
	binary := fs.String("binary", "./degraded", "degraded binary")
	trials := fs.Int("trials", 60, "trials")
	interval := fs.Duration("interval", 100*time.Millisecond, "health_check_interval")
	memory := fs.Bool("memory-state", false, `data_dir: "" (nothing saved per change)`)
	out := fs.String("out", "reaction.json", "result file")
	_ = fs.Parse(args)
	extra := ""
	if *memory {
		extra = "data_dir: \"\"\n"
	}

	// Signals off so only the posted outcomes move the level; a short
	// error window and no dwell so that each trial recovers to Normal
	// quickly (the default table: Emergency steps down one level a tick).
	d, err := startDaemon(*binary, fmt.Sprintf(`
health_check_interval: %s
error_rate_window: %s
error_rate_window_buckets: 30
minimum_level_duration: 0s
signals: {cpu: {source: off}, memory: {source: off}}
log: {level: warn}
`+extra, *interval, 3**interval))
	if err != nil {
		return err
	}
	defer d.stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := dialSSE(ctx, d.url+"/v1/level/stream")
	if err != nil {
		return err
	}
	defer s.Close()
	type level struct {
		at    int64
		index int
		name  string
	}
	events := make(chan level, 64)
	go func() {
		defer close(events)
		_ = s.follow(func(ev sseEvent) {
			if ev.Event != "level" {
				return
			}
			var st struct {
				Level string
				Index int
			}
			if json.Unmarshal(ev.Data, &st) == nil {
				events <- level{ev.At, st.Index, st.Level}
			}
		})
	}()
	next := func(timeout time.Duration) (level, error) {
		select {
		case l, ok := <-events:
			if !ok {
				return level{}, errors.New("stream ended")
			}
			return l, nil
		case <-time.After(timeout):
			return level{}, fmt.Errorf("no level event within %v", timeout)
		}
	}
	// The first event is the state on connect.
	cur, err := next(5 * time.Second)
	if err != nil {
		return err
	}
	res := reactionResult{Interval: *interval}
	hc := &http.Client{Timeout: 10 * time.Second}
	for range *trials {
		for cur.index != 0 {
			if cur, err = next(10 * *interval * 10); err != nil {
				return fmt.Errorf("waiting for Normal: %w", err)
			}
		}
		// A random phase against the health-check ticker.
		time.Sleep(time.Duration(rand.Int64N(int64(*interval))))
		t0 := now()
		if _, err := d.post(hc, "/v1/outcomes", `{"success":0,"failure":100}`); err != nil {
			return err
		}
		if cur, err = next(10 * *interval); err != nil {
			return fmt.Errorf("waiting for the reaction: %w", err)
		}
		if cur.index == 0 {
			return errors.New("reaction event did not leave Normal")
		}
		res.Trials = append(res.Trials, float64(cur.at-t0)/1e6)
		res.Levels = append(res.Levels, cur.name)
	}
	fmt.Fprintf(os.Stderr, "reaction: %d trials, p50 %.1f ms, p99 %.1f ms, max %.1f ms (interval %v)\n",
		len(res.Trials), quantile(res.Trials, .5), quantile(res.Trials, .99), quantile(res.Trials, 1), *interval)
	return writeJSON(*out, res)
}
