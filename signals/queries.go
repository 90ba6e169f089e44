package signals

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/degraded/degraded/levels"
)

// QuerySpec configures one Prometheus-query signal, evaluated every
// Interval.
type QuerySpec struct {
	Name     levels.Signal
	Query    string
	Interval time.Duration
}

// Queries evaluates Prometheus-query signals, each on its own interval,
// and keeps the last result of each for the health check to read. A
// signal is warming until its first result. Build it with NewQueries and
// run it with Run; it is safe for concurrent use.
type Queries struct {
	specs   []QuerySpec
	queries []*Query

	mu   sync.Mutex
	last map[levels.Signal]levels.Reading
}

// NewQueries builds the queries against url with the per-evaluation
// timeout; rt may be nil for the default transport. It makes no request.
func NewQueries(url string, timeout time.Duration, specs []QuerySpec, rt http.RoundTripper) (*Queries, error) {
	q := &Queries{specs: specs, last: map[levels.Signal]levels.Reading{}}
	for _, s := range specs {
		one, err := NewQuery(QueryOptions{URL: url, Query: s.Query, Timeout: timeout, RoundTripper: rt})
		if err != nil {
			return nil, err
		}
		q.queries = append(q.queries, one)
	}
	return q, nil
}

// Run evaluates every query at once and then on its interval, until ctx
// ends; it returns ctx.Err() after all its goroutines have ended.
func (q *Queries) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for i, s := range q.specs {
		wg.Go(func() {
			t := time.NewTicker(s.Interval)
			defer t.Stop()
			for {
				now := time.Now()
				v, err := q.queries[i].Sample(ctx, now)
				if ctx.Err() != nil {
					return
				}
				q.mu.Lock()
				q.last[s.Name] = levels.ReadingOf(s.Name, v, err)
				q.mu.Unlock()
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		})
	}
	wg.Wait()
	<-ctx.Done()
	return ctx.Err()
}

// Read returns the last result of each query, in config order; a query
// not yet evaluated is warming.
func (q *Queries) Read(context.Context, time.Time) []levels.Reading {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]levels.Reading, 0, len(q.specs))
	for _, s := range q.specs {
		r, ok := q.last[s.Name]
		if !ok {
			r = levels.Reading{Signal: s.Name, State: levels.Warming}
		}
		out = append(out, r)
	}
	return out
}

// Instant reports that query results are read at health checks only
// (controller.Source): each query runs on its own interval.
func (q *Queries) Instant() bool { return false }
