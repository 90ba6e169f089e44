package signals

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/degraded/degraded/internal/testprom"
)

// gauge is a fake exporter: a queue_depth gauge with two shards.
type gauge struct{ shardA, shardB atomic.Int64 }

func (g *gauge) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintf(w, "# TYPE queue_depth gauge\nqueue_depth{shard=\"a\"} %d\nqueue_depth{shard=\"b\"} %d\n",
		g.shardA.Load(), g.shardB.Load())
}

// TestQueryRealPrometheus evaluates queries against Debian's Prometheus
// scraping a fake exporter: the values it scrapes come back through Query,
// a change shows up, and each kind of result reads as the contract says.
func TestQueryRealPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts prometheus")
	}
	exporter := &gauge{}
	exporter.shardA.Store(1234)
	exporter.shardB.Store(7)
	target := httptest.NewServer(exporter)
	t.Cleanup(target.Close)
	base, logs := testprom.Start(t, strings.TrimPrefix(target.URL, "http://"))

	query := func(promQL string) *Query {
		return newTestQuery(t, QueryOptions{URL: base, Query: promQL, Timeout: 2 * time.Second})
	}
	maxDepth := query("max(queue_depth)")
	// waitFor polls until max(queue_depth) reads want, for at most 30s.
	waitFor := func(want float64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			v, err := maxDepth.Sample(t.Context(), time.Now())
			if err == nil && v == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("max(queue_depth) = %v, %v after 30s, want %v; prometheus log:\n%s", v, err, want, logs)
			}
			<-tick.C
		}
	}
	waitFor(1234)

	tests := []struct {
		query   string
		want    float64
		outcome string
		errText string
	}{
		{query: "queue_depth", want: 1234, outcome: "available"},
		{query: `queue_depth{shard="b"}`, want: 7, outcome: "available"},
		{query: "scalar(max(queue_depth))", want: 1234, outcome: "available"},
		{query: "no_such_metric", outcome: "absent", errText: "empty result"},
		{query: "max(queue_depth) / 0", outcome: "failed", errText: "no finite sample (1 infinite, 0 NaN)"},
		{query: "-scalar(max(queue_depth)) / 0", outcome: "failed", errText: "scalar is -Inf"},
		{query: "queue_depth[1m]", outcome: "failed", errText: "got a matrix result"},
		{query: "max(queue_depth", outcome: "failed", errText: "bad_data"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			got, err := query(tt.query).Sample(t.Context(), time.Now())
			if o := outcome(err); o != tt.outcome || got != tt.want {
				t.Fatalf("Sample = %v, %v (%s), want %v (%s)", got, err, o, tt.want, tt.outcome)
			}
			if err != nil && !strings.Contains(err.Error(), tt.errText) {
				t.Errorf("error %q should contain %q", err, tt.errText)
			}
		})
	}

	exporter.shardA.Store(99)
	waitFor(99)
}
