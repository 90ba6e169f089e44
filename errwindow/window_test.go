package errwindow

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/degraded/degraded/levels"
)

// t0 is a fixed time on a whole minute, so it starts a bucket for every
// width used below.
var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func mustNew(tb testing.TB, o Options) *Window {
	tb.Helper()
	w, err := New(o)
	if err != nil {
		tb.Fatalf("New(%+v): %v", o, err)
	}
	return w
}

// A step records success/failure at t0+at (if either is non-zero), then
// expects Totals(t0+at) to be attempts/failures.
type step struct {
	at                 time.Duration
	success, failure   int64
	attempts, failures int64
}

func TestWindowSteps(t *testing.T) {
	minute6 := Options{Window: time.Minute, Buckets: 6} // 10s buckets
	const ms = time.Millisecond
	tests := []struct {
		name  string
		opts  Options
		steps []step
	}{
		{
			name: "rollover keeps the previous buckets",
			opts: minute6,
			steps: []step{
				{at: 0, success: 5, failure: 1, attempts: 6, failures: 1},
				{at: 10 * time.Second, success: 3, attempts: 9, failures: 1},
				{at: 20 * time.Second, failure: 2, attempts: 11, failures: 3},
				{at: 59*time.Second + 999*ms, attempts: 11, failures: 3},
				{at: 60 * time.Second, attempts: 5, failures: 2},
				{at: 70 * time.Second, attempts: 2, failures: 2},
				{at: 80 * time.Second, attempts: 0, failures: 0},
			},
		},
		{
			name: "window expiry is at the bucket edge",
			opts: minute6,
			steps: []step{
				{at: 5 * time.Second, success: 10, failure: 10, attempts: 20, failures: 10},
				{at: 59*time.Second + 999*ms, attempts: 20, failures: 10},
				{at: 60 * time.Second, attempts: 0, failures: 0},
			},
		},
		{
			name: "bucket boundary",
			opts: minute6,
			steps: []step{
				{at: 9*time.Second + 999*ms, success: 1, attempts: 1},
				{at: 10 * time.Second, failure: 1, attempts: 2, failures: 1},
				{at: 59*time.Second + 999*ms, attempts: 2, failures: 1},
				{at: 60 * time.Second, attempts: 1, failures: 1},
				{at: 69*time.Second + 999*ms, attempts: 1, failures: 1},
				{at: 70 * time.Second, attempts: 0, failures: 0},
			},
		},
		{
			name: "idle gap longer than the window",
			opts: minute6,
			steps: []step{
				{at: 0, success: 4, attempts: 4},
				{at: 10 * time.Second, failure: 4, attempts: 8, failures: 4},
				// One hour is 360 buckets: the same slots come round again.
				{at: time.Hour, attempts: 0, failures: 0},
				{at: time.Hour + 10*time.Second, success: 1, attempts: 1},
				{at: time.Hour + 50*time.Second, attempts: 1},
				{at: 2 * time.Hour, attempts: 0},
			},
		},
		{
			name: "same slot one lap later replaces the old bucket",
			opts: minute6,
			steps: []step{
				{at: 0, failure: 9, attempts: 9, failures: 9},
				{at: 60 * time.Second, success: 1, attempts: 1},
			},
		},
		{
			name: "burst is not diluted by expired buckets",
			opts: minute6,
			steps: []step{
				{at: 0, success: 100, attempts: 100},
				{at: 10 * time.Second, success: 100, attempts: 200},
				{at: 20 * time.Second, success: 100, attempts: 300},
				{at: 30 * time.Second, success: 100, attempts: 400},
				{at: 40 * time.Second, success: 100, attempts: 500},
				{at: 50 * time.Second, success: 100, attempts: 600},
				{at: 115 * time.Second, failure: 50, attempts: 50, failures: 50},
			},
		},
		{
			name: "late writers never reach the current window",
			opts: minute6,
			steps: []step{
				{at: 120 * time.Second, success: 2, attempts: 2},
				// Bucket 0 shares its slot with bucket 12: dropped.
				{at: 0, failure: 7, attempts: 0},
				{at: 60 * time.Second, failure: 7, attempts: 0},
				// Bucket 5 has a free slot, but is outside the window at 120s.
				{at: 50 * time.Second, failure: 7, attempts: 7, failures: 7},
				{at: 120 * time.Second, attempts: 2},
			},
		},
		{
			name: "buckets after now are not counted",
			opts: minute6,
			steps: []step{
				{at: 30 * time.Second, success: 1, attempts: 1},
				{at: 20 * time.Second, attempts: 0},
			},
		},
		{
			name: "negative counts are ignored",
			opts: minute6,
			steps: []step{
				{at: 0, success: -5, failure: 3, attempts: 3, failures: 3},
				{at: 0, success: 2, failure: -1, attempts: 5, failures: 3},
				{at: 0, success: -1, failure: -1, attempts: 5, failures: 3},
			},
		},
		{
			name: "single bucket",
			opts: Options{Window: time.Second, Buckets: 1},
			steps: []step{
				{at: 0, success: 1, failure: 1, attempts: 2, failures: 1},
				{at: 999 * ms, success: 1, attempts: 3, failures: 1},
				{at: time.Second, attempts: 0},
				{at: 1500 * ms, failure: 1, attempts: 1, failures: 1},
			},
		},
		{
			name: "narrowest buckets",
			opts: Options{Window: 10 * time.Second, Buckets: MaxBuckets}, // 1ms
			steps: []step{
				{at: 0, success: 1, attempts: 1},
				{at: 9999 * ms, failure: 1, attempts: 2, failures: 1},
				{at: 10 * time.Second, attempts: 1, failures: 1},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := mustNew(t, tt.opts)
			for i, s := range tt.steps {
				now := t0.Add(s.at)
				w.Record(now, s.success, s.failure)
				a, f := w.Totals(now)
				if a != s.attempts || f != s.failures {
					t.Errorf("step %d: after Record(t0+%v, %d, %d), Totals(t0+%v) = %d, %d; want %d, %d",
						i, s.at, s.success, s.failure, s.at, a, f, s.attempts, s.failures)
				}
			}
		})
	}
}

func TestZeroValueRecordsNothing(t *testing.T) {
	var w Window
	w.Record(t0, 1, 1)
	if a, f := w.Totals(t0); a != 0 || f != 0 {
		t.Errorf("zero Window: Totals = %d, %d; want 0, 0", a, f)
	}
}

func TestTimesBefore1970AreIgnored(t *testing.T) {
	w := mustNew(t, Options{Window: time.Minute, Buckets: 6})
	before := time.Date(1969, 12, 31, 23, 59, 0, 0, time.UTC)
	w.Record(before, 1, 1)
	if a, f := w.Totals(before); a != 0 || f != 0 {
		t.Errorf("Totals(1969) = %d, %d; want 0, 0", a, f)
	}
	if a, f := w.Totals(time.Unix(0, 0)); a != 0 || f != 0 {
		t.Errorf("Totals(1970) = %d, %d; want 0, 0", a, f)
	}
}

func TestNewOptions(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{"default config", Options{Window: time.Minute, Buckets: 6}, ""},
		{"one bucket", Options{Window: time.Millisecond, Buckets: 1}, ""},
		{"most buckets at 1ms", Options{Window: 10 * time.Second, Buckets: 10000}, ""},
		{"zero window", Options{Window: 0, Buckets: 6},
			"errwindow: Window (error_rate_window) must be > 0 (was 0s)"},
		{"negative window", Options{Window: -time.Second, Buckets: 6},
			"errwindow: Window (error_rate_window) must be > 0 (was -1s)"},
		{"zero buckets", Options{Window: time.Minute},
			"errwindow: Buckets (error_rate_window_buckets) must be in 1..10000 (was 0)"},
		{"negative buckets", Options{Window: time.Minute, Buckets: -1},
			"errwindow: Buckets (error_rate_window_buckets) must be in 1..10000 (was -1)"},
		{"too many buckets", Options{Window: time.Hour, Buckets: 10001},
			"errwindow: Buckets (error_rate_window_buckets) must be in 1..10000 (was 10001)"},
		{"bucket under 1ms", Options{Window: 5 * time.Millisecond, Buckets: 10},
			"errwindow: bucket width Window/Buckets must be >= 1ms (was 500µs = 5ms/10)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := New(tt.opts)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("New(%+v): unexpected error %v", tt.opts, err)
			case tt.wantErr == "" && w == nil:
				t.Fatalf("New(%+v) = nil, nil", tt.opts)
			case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr):
				t.Fatalf("New(%+v) error = %v; want %q", tt.opts, err, tt.wantErr)
			}
		})
	}
}

// TestConcurrentRollover has many goroutines record into two laps of the
// ring at once: lap A (failures only) and the following lap B (successes
// only), over slots pre-filled with an even older lap. Every slot is reset
// twice while writers race on it, and writers of lap A straggle into slots
// that lap B is claiming. Lap B is the newest, so none of its records may be
// dropped or wiped, and no failure from the older laps may ever show in
// lap B's window.
func TestConcurrentRollover(t *testing.T) {
	const (
		buckets    = 8
		width      = 10 * time.Millisecond
		goroutines = 16
		iterations = 500
		rounds     = 20
	)
	bucketTime := func(lap, k, jitter int) time.Time {
		return t0.Add(time.Duration(lap*buckets+k)*width + time.Duration(jitter)%width)
	}
	for round := range rounds {
		w := mustNew(t, Options{Window: buckets * width, Buckets: buckets})
		for k := range buckets {
			w.Record(bucketTime(0, k, 0), 1000, 1000)
		}
		endB := bucketTime(2, buckets-1, 0)

		var writers, reader sync.WaitGroup
		start := make(chan struct{})
		for g := range goroutines {
			writers.Go(func() {
				<-start
				for i := range iterations {
					k := (g + i) % buckets
					w.Record(bucketTime(1, k, g*7919+i), 0, 1)
					w.Record(bucketTime(2, k, g*104729+i), 1, 0)
				}
			})
		}
		var readerErr atomic.Value
		done := make(chan struct{})
		reader.Go(func() {
			<-start
			var last int64
			for {
				a, f := w.Totals(endB)
				if f != 0 || a < last {
					readerErr.Store([2]int64{a, f})
					return
				}
				last = a
				select {
				case <-done:
					return
				default:
				}
			}
		})
		close(start)
		writers.Wait()
		close(done)
		reader.Wait()

		if v := readerErr.Load(); v != nil {
			t.Fatalf("round %d: concurrent Totals(lap B) saw %v: an old failure leaked or attempts went down", round, v)
		}
		a, f := w.Totals(endB)
		if want := int64(goroutines * iterations); a != want || f != 0 {
			t.Fatalf("round %d: Totals(lap B) = %d, %d; want %d, 0", round, a, f, want)
		}
	}
}

// TestConcurrentLapsNeverMix has goroutines drift through many laps of a
// small ring, so slots are reset constantly while writers of the previous
// lap are still adding. A writer in lap j records 1 success and j+1
// failures, so a count leaking from an older lap shows as a wrong ratio.
// The last lap is the newest, so every slot must end holding exactly its
// records.
func TestConcurrentLapsNeverMix(t *testing.T) {
	const (
		buckets    = 4
		width      = time.Millisecond
		goroutines = 8
		laps       = 300
	)
	w := mustNew(t, Options{Window: buckets * width, Buckets: buckets})
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range goroutines {
		wg.Go(func() {
			<-start
			for lap := range laps {
				for k := range buckets {
					now := t0.Add(time.Duration(lap*buckets+k)*width + time.Duration(g))
					w.Record(now, 1, int64(lap+1))
				}
			}
		})
	}
	close(start)
	wg.Wait()

	base := t0.UnixNano() / int64(width)
	for i, b := range w.ring {
		lap := (b.tag - 1 - base) / buckets
		if lap != laps-1 || b.success != goroutines || b.failure != laps*goroutines {
			t.Errorf("slot %d: lap %d, %d successes, %d failures; want lap %d, %d, %d",
				i, lap, b.success, b.failure, laps-1, goroutines, laps*goroutines)
		}
	}
	a, f := w.Totals(t0.Add(time.Duration(laps*buckets-1) * width))
	if wantA, wantF := int64(buckets*goroutines*(laps+1)), int64(buckets*goroutines*laps); a != wantA || f != wantF {
		t.Errorf("Totals over the last lap = %d, %d; want %d, %d", a, f, wantA, wantF)
	}
}

// FuzzWindow replays random sequences of records, with the clock moving
// forwards and backwards, against a naive model that keeps every record.
//
// The model: a record is kept unless a kept record already sits in the same
// slot (bucket number mod Buckets) with a later bucket; Totals(now) sums the
// kept records whose bucket is in (now-Buckets, now] and is the latest kept
// bucket of its slot. With a clock that only moves forwards this is simply
// "every record in the last Buckets buckets". Quantile(now) counts the
// latencies of the same records, and its value lies inside the latency
// bucket that holds the quantile's rank.
func FuzzWindow(f *testing.F) {
	f.Add(uint8(5), []byte{0, 1, 0, 0, 4, 0, 1, 0x31, 4, 2, 3, 0x7d, 0x80, 1, 1, 0, 0xf0, 9, 0xff, 0x5a})
	f.Add(uint8(0), []byte{1, 1, 1, 0x45, 4, 1, 1, 0x1d, 0xfc, 0, 1, 0x7f})
	f.Add(uint8(7), []byte{0x80, 5, 5, 0x8b, 0x81, 5, 5, 0x70, 0x7f, 0x7f, 0x7f, 0x7f})
	f.Fuzz(func(t *testing.T, nb uint8, ops []byte) {
		n := int64(nb%8) + 1
		const width = 10 * time.Millisecond
		w := mustNew(t, Options{Window: time.Duration(n) * width, Buckets: int(n)})

		type rec struct {
			bucket, success, failure int64
			latency                  [NumLatencyBuckets]int64
		}
		var kept []rec
		latest := map[int64]int64{} // slot -> latest kept bucket
		model := func(now int64) (attempts, failures int64, latency [NumLatencyBuckets]int64) {
			for _, r := range kept {
				if r.bucket > now-n && r.bucket <= now && r.bucket == latest[r.bucket%n] {
					attempts += r.success + r.failure
					failures += r.failure
					for i, c := range r.latency {
						latency[i] += c
					}
				}
			}
			return attempts, failures, latency
		}

		// The clock is in quarter buckets from t0; -128 jumps far ahead.
		// The fourth byte of an op adds int8(l)/14 latencies (none if 0 or
		// negative) to latency bucket l%14; an op whose fourth byte is 0
		// calls Record.
		quarter := int64(width / 4)
		clock := int64(1000 * 4)
		bucketAt := func(q int64) int64 { return (t0.UnixNano() + q*quarter) / int64(width) }
		ops = ops[:min(len(ops), 4*200)]
		for len(ops) >= 4 {
			d, s, fl, l := int8(ops[0]), int64(int8(ops[1])), int64(int8(ops[2])), ops[3]
			ops = ops[4:]
			if d == -128 {
				clock += 4 * 1000 * n
			} else {
				clock = max(clock+int64(d), 0)
			}
			now := t0.Add(time.Duration(clock * quarter))
			var latency [NumLatencyBuckets]int64
			latency[l%NumLatencyBuckets] = int64(int8(l)) / NumLatencyBuckets
			if l == 0 {
				w.Record(now, s, fl)
			} else {
				w.RecordLatency(now, s, fl, latency)
			}
			lc := max(latency[l%NumLatencyBuckets], 0)
			latency[l%NumLatencyBuckets] = lc
			if s, fl := max(s, 0), max(fl, 0); s+fl+lc > 0 {
				b := bucketAt(clock)
				if l, ok := latest[b%n]; !ok || l <= b {
					latest[b%n] = b
					kept = append(kept, rec{b, s, fl, latency})
				}
			}
			for _, q := range []int64{clock, clock + 4*n - 1, max(clock-5, 0)} {
				a, f := w.Totals(t0.Add(time.Duration(q * quarter)))
				wa, wf, wl := model(bucketAt(q))
				if f > a || f < 0 {
					t.Fatalf("Totals(t0+%dq) = %d, %d: failures outside 0..attempts", q, a, f)
				}
				if a != wa || f != wf {
					t.Fatalf("Totals(t0+%dq) = %d, %d; model says %d, %d", q, a, f, wa, wf)
				}
				checkQuantile(t, w, t0.Add(time.Duration(q*quarter)), wl)
			}
		}
	})
}

// checkQuantile checks Quantile at now against the model's latency counts:
// the same number of observations, and for a few q a value inside the
// bucket that holds rank q*n, never decreasing with q.
func checkQuantile(t *testing.T, w *Window, now time.Time, model [NumLatencyBuckets]int64) {
	t.Helper()
	var n int64
	for _, c := range model {
		n += c
	}
	bounds := levels.LatencyBounds()
	prev := 0.0
	for _, q := range []float64{0, 0.5, 0.9, 0.99, 1} {
		ms, got := w.Quantile(now, q)
		if got != n {
			t.Fatalf("Quantile(%v) observations %d; model says %d", q, got, n)
		}
		if n == 0 {
			if ms != 0 {
				t.Fatalf("Quantile(%v) = %v ms with no observations, want 0", q, ms)
			}
			continue
		}
		if ms < prev {
			t.Fatalf("Quantile(%v) = %v ms < %v ms of a lower q", q, ms, prev)
		}
		prev = ms
		// The rank's bucket: the first non-empty one whose cumulative
		// count reaches q*n.
		var cum int64
		for i, c := range model {
			cum += c
			if c == 0 || float64(cum) < q*float64(n) {
				continue
			}
			lower, upper := 0.0, min(bounds[i], 10000)
			if i > 0 {
				lower = bounds[i-1]
			}
			if ms < lower || ms > upper {
				t.Fatalf("Quantile(%v) = %v ms outside its bucket [%v, %v] (counts %v)", q, ms, lower, upper, model)
			}
			break
		}
	}
}
