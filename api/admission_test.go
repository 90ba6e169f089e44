package api

import (
	"net/http"
	"testing"
	"time"
)

// An outcome report's "admission" object is checked field by field: a
// bad one is refused whole with a 400 naming the field and the value, and
// nothing of the report reaches the window.
func TestOutcomesAdmissionBadInput(t *testing.T) {
	adm := func(fields string) string {
		return `{"success":10,"admission":{` + fields + `}}`
	}
	for _, tt := range []struct {
		name, body, want string
	}{
		{"no sequence", adm(`"seconds":1`), "admission.sequence is required"},
		{"sequence past 2^53", adm(`"sequence":9007199254740992,"seconds":1`), "admission.sequence must be an integer 0..9007199254740991 (was 9007199254740992)"},
		{"no seconds", adm(`"sequence":1`), "admission.seconds is required"},
		{"seconds zero", adm(`"sequence":1,"seconds":0`), "admission.seconds must be in [0.001, 3600] (was 0)"},
		{"seconds denormal", adm(`"sequence":1,"seconds":5e-324`), "admission.seconds must be in [0.001, 3600] (was 5e-324)"},
		{"seconds past float64", adm(`"sequence":1,"seconds":1e400`), "a number 1e400 is out of range: it must be a number"},
		{"sequence fractional", adm(`"sequence":1.5,"seconds":1`), `field "admission.sequence" must be an integer (was a number 1.5)`},
		{"sequence negative", adm(`"sequence":-1,"seconds":1`), `field "admission.sequence" must be an integer (was a number -1)`},
		{"seconds over an hour", adm(`"sequence":1,"seconds":3601`), "admission.seconds must be in [0.001, 3600] (was 3601)"},
		{"offered more than decided", adm(`"sequence":1,"seconds":3600,"admitted":1,"offered":{"100":1000000000}`), "admission.offered sums to 1000000000, more than admitted + shed_partial + shed_below (1)"},
		{"reporter not hex", adm(`"sequence":1,"seconds":1,"reporter":"XYZ"`), `admission.reporter must match ^[0-9a-f]{1,32}$ (was "XYZ")`},
		{"negative count", adm(`"sequence":1,"seconds":1,"shed_below":-1`), "admission.shed_below must be an integer 0..1000000000 (was -1)"},
		{"offered by name", adm(`"sequence":1,"seconds":1,"offered":{"high":1}`), `admission.offered keys must be priorities 0..2147483647 in decimal (was "high")`},
		{"offered with a sign", adm(`"sequence":1,"seconds":1,"offered":{"+5":1}`), `admission.offered keys must be priorities 0..2147483647 in decimal (was "+5")`},
		{"offered count over 1e9", adm(`"sequence":1,"seconds":1,"offered":{"5":1000000001}`), `admission.offered["5"] must be an integer 0..1000000000 (was 1000000001)`},
		{"arrival 9 times seconds", adm(`"sequence":1,"seconds":1,"arrival_seconds":9`), "admission.arrival_seconds must be in [0.001, 3600] and within a factor 8 of seconds (was 9, seconds 1)"},
		{"arrival a ninth of seconds", adm(`"sequence":1,"seconds":0.9,"arrival_seconds":0.1`), "admission.arrival_seconds must be in [0.001, 3600] and within a factor 8 of seconds (was 0.1, seconds 0.9)"},
		{"arrival zero", adm(`"sequence":1,"seconds":1,"arrival_seconds":0`), "admission.arrival_seconds must be in [0.001, 3600] and within a factor 8 of seconds (was 0, seconds 1)"},
		{"arrival without seconds", adm(`"sequence":1,"arrival_seconds":0.5`), "admission.seconds is required"},
		{"unknown field", adm(`"sequence":1,"seconds":1,"shed":3`), `unknown field "admission.shed"`},
		{"field name case", adm(`"sequence":1,"Seconds":1`), `unknown field "admission.Seconds" (field names are case-sensitive: "admission.seconds")`},
		{"duplicated key", adm(`"sequence":1,"seconds":1,"seconds":2`), `duplicate field "admission.seconds"`},
	} {
		t.Run(tt.name, func(t *testing.T) { refusesOutcomes(t, tt.body, tt.want) })
	}
	r, win := latencyRig(t)
	if w := r.do("POST", "/v1/outcomes", adm(`"sequence":1,"admitted":10,"seconds":1,"arrival_seconds":0.25,"reporter":"9f3a","offered":{"60":10}`)); w.Code != http.StatusAccepted {
		t.Errorf("a valid admission object: %d %s, want 202", w.Code, w.Body)
	}
	if a, _ := win.Totals(time.Now()); a != 10 {
		t.Errorf("the accepted report's outcomes: %d attempts in the window, want 10", a)
	}
}
