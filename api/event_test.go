package api

import (
	"testing"
	"testing/synctest"

	"github.com/degraded/degraded/levels"
)

// TestOutcomesWithFailuresEscalateAtOnce: POST /v1/outcomes hands a report
// with failures to Deps.Reported, so a burst escalates without waiting for
// the next health check; a report of successes only cannot escalate and
// is not handed on.
func TestOutcomesWithFailuresEscalateAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		var r *rig
		r = newRig(t, Deps{Reported: func(rep levels.Report) { calls++; r.c.Reported(rep) }})
		if w := r.do("POST", "/v1/outcomes", `{"success":1000}`); w.Code != 202 || calls != 0 {
			t.Fatalf("successes only: %d, %d calls; want 202 and no call", w.Code, calls)
		}
		if w := r.do("POST", "/v1/outcomes", `{"success":0,"failure":200}`); w.Code != 202 || calls != 1 {
			t.Fatalf("failures: %d, %d calls; want 202 and one call", w.Code, calls)
		}
		synctest.Wait() // the controller's goroutine evaluates the report
		if st := r.c.State(); st.Level != "Major" {
			t.Fatalf("after 200 failures of 1200 (16.7%%): %s, want Major without a health check", st.Level)
		}
	})
}
