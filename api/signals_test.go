package api

import (
	"context"
	"testing"
	"time"

	"github.com/degraded/degraded/levels"
	"github.com/degraded/degraded/signals"
)

// TestPushedSignals: PUT /v1/signals/{name} stores a value of a configured
// custom signal, checks the token before the name, and refuses unknown,
// queried and non-numeric values with the documented status.
func TestPushedSignals(t *testing.T) {
	p := &signals.Pushed{}
	p.Configure([]signals.PushedSignal{{Name: "queue_depth", TTL: time.Minute}}, []levels.Signal{"p95_from_prom"})
	calls := 0
	r := newRig(t, Deps{Pusher: p, Reported: func(levels.Report) { calls++ }})
	r.tokens.Store(&Tokens{Admin: "adm", Report: "rep"})
	auth := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }
	for _, tt := range []struct {
		name, path, body string
		hdr              []string
		want             int
	}{
		{"no token, unknown name: 401 first", "/v1/signals/nope", `{"value":1}`, nil, 401},
		{"unknown name", "/v1/signals/nope", `{"value":1}`, auth("rep"), 404},
		{"queried name", "/v1/signals/p95_from_prom", `{"value":1}`, auth("rep"), 409},
		{"missing value", "/v1/signals/queue_depth", `{}`, auth("rep"), 400},
		{"not a finite number", "/v1/signals/queue_depth", `{"value":1e999}`, auth("rep"), 400},
		{"a string", "/v1/signals/queue_depth", `{"value":"12"}`, auth("rep"), 400},
		{"an unknown field", "/v1/signals/queue_depth", `{"value":1,"ttl":"1m"}`, auth("rep"), 400},
		{"the report token", "/v1/signals/queue_depth", `{"value":1234.5}`, auth("rep"), 204},
		{"the admin token too", "/v1/signals/queue_depth", `{"value":1234.5}`, auth("adm"), 204},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if w := r.do("PUT", tt.path, tt.body, tt.hdr...); w.Code != tt.want {
				t.Fatalf("PUT %s %s: %d %s, want %d", tt.path, tt.body, w.Code, w.Body, tt.want)
			}
		})
	}
	if calls != 2 {
		t.Errorf("Reported called %d times, want once per accepted value (2)", calls)
	}
	got := p.Read(context.Background(), time.Now())
	if len(got) != 1 || got[0].State != levels.Available || got[0].Value != 1234.5 {
		t.Errorf("pushed store holds %+v, want queue_depth 1234.5 available", got)
	}
}
