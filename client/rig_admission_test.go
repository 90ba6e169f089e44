package client

import (
	"encoding/json"
	"strconv"
)

// The fake daemon's side of partial admission and the admission report
// (rig_test.go has the rest).

// encode is the state document as this daemon writes it: without the
// key "partial" when it predates partial admission.
func (d *daemon) encode(st State) []byte {
	b, _ := json.Marshal(st)
	d.mu.Lock()
	old := d.noPartial
	d.mu.Unlock()
	if !old {
		return b
	}
	var m map[string]json.RawMessage
	_ = json.Unmarshal(b, &m)
	delete(m, "partial")
	b, _ = json.Marshal(m)
	return b
}

// validAdmission checks an "admission" object as the daemon's api does
// (api/admission.go).
func validAdmission(a *admissionReport) bool {
	if !(a.Seconds > 0 && a.Seconds <= 3600) || a.Arrival != 0 && !(a.Arrival >= 1e-3 && a.Arrival >= a.Seconds/8 && a.Arrival <= a.Seconds*8) || len(a.Offered) > 64 || len(a.Reporter) < 1 || len(a.Reporter) > 32 {
		return false
	}
	for _, r := range a.Reporter {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	var offered int64
	for k, n := range a.Offered {
		p, err := strconv.ParseUint(k, 10, 31)
		if err != nil || strconv.FormatUint(p, 10) != k || n < 0 || n > 1e9 {
			return false
		}
		offered += n
	}
	for _, n := range []int64{a.Admitted, a.ShedPartial, a.ShedBelow} {
		if n < 0 || n > 1e9 {
			return false
		}
	}
	return offered == a.Admitted+a.ShedPartial+a.ShedBelow
}

// received returns the admission objects the daemon accepted.
func (d *daemon) received() []receivedAdmission {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]receivedAdmission(nil), d.admissions...)
}

// setPartial publishes partial admission p at the current level, one
// step of the sequence, as the daemon's law does.
func (d *daemon) setPartial(p *Partial) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.state.Partial = p
	d.state.Sequence++
	close(d.changed)
	d.changed = make(chan struct{})
}
