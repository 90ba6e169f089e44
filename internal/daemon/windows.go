package daemon

import (
	"sync/atomic"
	"time"

	"github.com/degraded/degraded/api"
	"github.com/degraded/degraded/config"
	"github.com/degraded/degraded/errwindow"
)

// windows is the error window in force, which the API records outcome
// reports into: a reload that changes error_rate_window or its buckets
// swaps in a new, empty window (warming restarts with it; DESIGN.md "What a
// reload applies"), and reports go to it from then on. Safe for concurrent
// use.
type windows struct {
	cur atomic.Pointer[errwindow.Window]
}

var _ api.Outcomes = (*windows)(nil)

// Record adds outcomes to the window in force.
func (w *windows) Record(now time.Time, success, failure int64) {
	w.cur.Load().Record(now, success, failure)
}

// RecordLatency adds outcomes with their latency counts to the window in
// force.
func (w *windows) RecordLatency(now time.Time, success, failure int64, latency [errwindow.NumLatencyBuckets]int64) {
	w.cur.Load().RecordLatency(now, success, failure, latency)
}

// Totals reads the window in force.
func (w *windows) Totals(now time.Time) (attempts, failures int64) { return w.cur.Load().Totals(now) }

// windowFor returns the window for c: the one in force when its span and
// buckets did not change since prev, else a new one (not yet in force:
// the caller stores it once the controller took it).
func (d *Daemon) windowFor(c, prev *config.Config) (*errwindow.Window, error) {
	if cur := d.windows.cur.Load(); cur != nil && prev != nil &&
		prev.ErrorRateWindow == c.ErrorRateWindow && prev.ErrorRateWindowBuckets == c.ErrorRateWindowBuckets {
		return cur, nil
	}
	return errwindow.New(errwindow.Options{Window: c.ErrorRateWindow, Buckets: c.ErrorRateWindowBuckets})
}
