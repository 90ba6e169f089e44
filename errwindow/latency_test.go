package errwindow

import (
	"math"
	"testing"
	"time"

	"github.com/degraded/degraded/levels"
)

// lat returns latency counts with counts[i] = n for each pair i, n.
func lat(pairs ...int64) (counts [NumLatencyBuckets]int64) {
	for k := 0; k+1 < len(pairs); k += 2 {
		counts[pairs[k]] = pairs[k+1]
	}
	return counts
}

func TestLatencyBounds(t *testing.T) {
	want := [NumLatencyBuckets]float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, math.Inf(1)}
	if got := levels.LatencyBounds(); got != want {
		t.Errorf("levels.LatencyBounds() = %v, want the DESIGN.md buckets %v", got, want)
	}
}

// closeTo reports whether got is want within floating-point rounding.
func closeTo(got, want float64) bool { return math.Abs(got-want) <= 1e-9*max(1, math.Abs(want)) }

func TestQuantile(t *testing.T) {
	tests := []struct {
		name   string
		counts [NumLatencyBuckets]int64
		q      float64
		want   float64
		n      int64
	}{
		{"empty window", lat(), 0.99, 0, 0},
		{"first bucket starts at 0", lat(0, 100), 0.5, 0.5, 100},
		{"interpolated inside its bucket", lat(8, 100), 0.99, 200 + 300*0.99, 100},
		// 90 at <=100ms, 10 in (200, 500]: the p99 is 9/10 into (200, 500].
		{"p99 in the slow tail", lat(6, 90, 8, 10), 0.99, 470, 100},
		{"p50 below the tail", lat(6, 90, 8, 10), 0.5, 50 + 50*(50.0/90), 100},
		{"rank on a bucket edge stays in the lower bucket", lat(6, 90, 8, 10), 0.9, 100, 100},
		{"+Inf reads as 10000", lat(13, 5), 0.99, 10000, 5},
		{"+Inf tail over a finite bucket", lat(12, 1, 13, 99), 0.5, 10000, 100},
		{"q 1 is the top of the last non-empty bucket", lat(2, 3, 4, 1), 1, 20, 4},
		{"q 0 is the bottom of the first non-empty bucket", lat(2, 3, 4, 1), 0, 2, 4},
		{"q above 1 reads as 1", lat(2, 3, 4, 1), 7, 20, 4},
		{"NaN q reads as 0", lat(2, 3, 4, 1), math.NaN(), 2, 4},
		{"empty buckets between are skipped", lat(0, 1, 12, 1), 0.75, 5000 + 5000*0.5, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := mustNew(t, Options{Window: time.Minute, Buckets: 6})
			var total int64
			for _, c := range tt.counts {
				total += c
			}
			w.RecordLatency(t0, total, 0, tt.counts)
			ms, n := w.Quantile(t0, tt.q)
			if !closeTo(ms, tt.want) || n != tt.n {
				t.Errorf("Quantile(%v) over %v = %v ms, %d; want %v ms, %d", tt.q, tt.counts, ms, n, tt.want, tt.n)
			}
		})
	}
}

// A latencyStep records a report at t0+at (if it has any count), then
// expects Totals and Quantile(p99) at t0+at.
type latencyStep struct {
	at                 time.Duration
	success, failure   int64
	latency            [NumLatencyBuckets]int64
	attempts, failures int64
	p99                float64
	observations       int64
}

func TestLatencyWindowSteps(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name  string
		steps []latencyStep
	}{
		{
			name: "a spike shows at once and clears with its buckets",
			steps: []latencyStep{
				{at: 0, success: 100, latency: lat(4, 100), attempts: 100, p99: 10 + 10*0.99, observations: 100},
				// 100 more at (200, 500] ms: p99 is 98/100 into that bucket.
				{at: 10 * s, success: 100, latency: lat(8, 100), attempts: 200, p99: 200 + 300*0.98, observations: 200},
				{at: 59 * s, attempts: 200, p99: 200 + 300*0.98, observations: 200},
				{at: 60 * s, attempts: 100, p99: 200 + 300*0.99, observations: 100},
				{at: 70 * s, attempts: 0, p99: 0, observations: 0},
			},
		},
		{
			name: "reports without latencies count outcomes only",
			steps: []latencyStep{
				{at: 0, success: 50, failure: 50, attempts: 100, failures: 50},
				{at: 1 * s, success: 10, latency: lat(0, 10), attempts: 110, failures: 50, p99: 0.99, observations: 10},
			},
		},
		{
			name: "late writers are dropped whole, latencies too",
			steps: []latencyStep{
				{at: 120 * s, success: 1, latency: lat(0, 1), attempts: 1, p99: 0.99, observations: 1},
				// Bucket 0 shares its slot with bucket 12: dropped.
				{at: 0, failure: 5, latency: lat(13, 5), attempts: 0},
				{at: 120 * s, attempts: 1, p99: 0.99, observations: 1},
			},
		},
		{
			name: "negative latency counts are ignored",
			steps: []latencyStep{
				{at: 0, success: 3, latency: lat(1, -4, 3, 3), attempts: 3, p99: 5 + 5*0.99, observations: 3},
			},
		},
		{
			name: "latencies alone are kept",
			steps: []latencyStep{
				{at: 0, latency: lat(5, 2), attempts: 0, p99: 20 + 30*0.99, observations: 2},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := mustNew(t, Options{Window: time.Minute, Buckets: 6})
			for i, st := range tt.steps {
				now := t0.Add(st.at)
				w.RecordLatency(now, st.success, st.failure, st.latency)
				a, f := w.Totals(now)
				ms, n := w.Quantile(now, 0.99)
				if a != st.attempts || f != st.failures || !closeTo(ms, st.p99) || n != st.observations {
					t.Errorf("step %d at t0+%v: Totals = %d, %d, Quantile(0.99) = %v ms, %d; want %d, %d, %v ms, %d",
						i, st.at, a, f, ms, n, st.attempts, st.failures, st.p99, st.observations)
				}
			}
		})
	}
}

func TestRecordKeepsLatenciesOfTheBucket(t *testing.T) {
	w := mustNew(t, Options{Window: time.Minute, Buckets: 6})
	w.RecordLatency(t0, 4, 0, lat(3, 4))
	w.Record(t0, 6, 0)
	if ms, n := w.Quantile(t0, 0.5); !closeTo(ms, 7.5) || n != 4 {
		t.Errorf("after RecordLatency then Record in one bucket: Quantile(0.5) = %v ms, %d; want 7.5 ms, 4 (Record must not wipe latencies)", ms, n)
	}
}

func TestZeroValueHasNoLatency(t *testing.T) {
	var w Window
	w.RecordLatency(t0, 1, 0, lat(0, 1))
	if ms, n := w.Quantile(t0, 0.99); ms != 0 || n != 0 {
		t.Errorf("zero Window: Quantile = %v, %d; want 0, 0", ms, n)
	}
	before := time.Date(1969, 1, 1, 0, 0, 0, 0, time.UTC)
	if ms, n := mustNew(t, Options{Window: time.Minute, Buckets: 6}).Quantile(before, 0.99); ms != 0 || n != 0 {
		t.Errorf("Quantile(1969) = %v, %d; want 0, 0", ms, n)
	}
}

// A replay computes the quantile from recorded counts: QuantileOf of
// LatencyCounts is exactly what Quantile answered.
func TestLatencyCountsReplayTheQuantile(t *testing.T) {
	w, err := New(Options{Window: time.Minute, Buckets: 6})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	w.RecordLatency(now, 90, 0, lat(6, 90))
	w.RecordLatency(now.Add(10*time.Second), 0, 10, lat(8, 10))
	at := now.Add(20 * time.Second)
	counts := w.LatencyCounts(at)
	if counts != lat(6, 90, 8, 10) {
		t.Fatalf("LatencyCounts = %v, want 90 in bucket 6 and 10 in bucket 8", counts)
	}
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		wantMS, wantN := w.Quantile(at, q)
		gotMS, gotN := levels.QuantileOf(counts[:], q)
		if gotMS != wantMS || gotN != wantN {
			t.Errorf("levels.QuantileOf(counts, %g) = %g, %d; Quantile gave %g, %d", q, gotMS, gotN, wantMS, wantN)
		}
	}
	if ms, n := levels.QuantileOf(nil, 0.99); ms != 0 || n != 0 {
		t.Errorf("levels.QuantileOf(nil) = %g, %d, want 0, 0", ms, n)
	}
}
