package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// FuzzBodies sends arbitrary bodies to the two JSON inputs. The server
// must answer with a documented status and a JSON error, never panic, and
// never count a rejected report.
func FuzzBodies(f *testing.F) {
	for _, s := range []string{
		`{"success":950,"failure":50}`, `{"success":-1}`, `{"failure":1e9}`, `{"success":1.0}`,
		`{"level":"Major","mode":"pin","ttl":"15m","reason":"INC-42"}`, `{"ttl":"-1s"}`, `[]`, `null`, `{"a":` + strings.Repeat("[", 1000),
		`{"SUCCESS":1}`, `{"success":1,"success":2}`, `{"Level":"Major","ttl":"1m","reason":"x"}`, `{"reason":"a","reason":"b"}`,
		`{"success":9,"admission":{"sequence":4,"admitted":9,"shed_partial":1,"shed_below":2,"seconds":1,"reporter":"9f3a","offered":{"10":3,"100":9}}}`,
		`{"admission":{"seconds":0}}`, `{"admission":{"reporter":"XYZ"}}`, `{"admission":{"offered":{"-1":1}}}`, `{"admission":{"offered":{"1e3":1}}}`,
	} {
		f.Add("/v1/outcomes", s)
		f.Add("/v1/override", s)
	}
	r := newRig(f, Deps{})
	f.Fuzz(func(t *testing.T, path, body string) {
		if path != "/v1/override" {
			path = "/v1/outcomes"
		}
		method := map[string]string{"/v1/outcomes": "POST", "/v1/override": "PUT"}[path]
		before, _ := r.win.Totals(timeZero)
		req := newRequest(method, path, body)
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		r.h.ServeHTTP(w, req)
		switch w.Code {
		case http.StatusOK, http.StatusAccepted:
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			if !strings.HasPrefix(w.Body.String(), `{"error":`) {
				t.Fatalf("%d without a JSON error: %q", w.Code, w.Body)
			}
			if after, _ := r.win.Totals(timeZero); after != before {
				t.Fatalf("a rejected report was counted: %q", body)
			}
		default:
			t.Fatalf("%s %q: unexpected status %d %s", path, body, w.Code, w.Body)
		}
	})
}

var timeZero = time.Time{}
