package api

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/degraded/degraded/controller"
)

// actorFleet records who asked for each fleet override change.
type actorFleet struct {
	fakeFleet
	mu     sync.Mutex
	actors []string
}

func (f *actorFleet) SetOverride(ctx context.Context, r controller.OverrideRequest) error {
	f.mu.Lock()
	f.actors = append(f.actors, r.Actor)
	f.mu.Unlock()
	return f.fakeFleet.SetOverride(ctx, r)
}

func (f *actorFleet) last() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.actors) == 0 {
		return ""
	}
	return f.actors[len(f.actors)-1]
}

// TestActorOfEachRoute: every route that changes something records who
// asked (DESIGN.md "Who did it"): an operator's name for their token,
// "admin" for auth.token, "anonymous" where no admin token is configured;
// operator tokens open every admin route, and the report routes, as the
// admin token does; the report token opens no admin route.
func TestActorOfEachRoute(t *testing.T) {
	ops := []Operator{{Name: "alice", Token: "alice-tok"}, {Name: "bob", Token: "bob-tok"}}
	tests := []struct {
		name   string
		tokens Tokens
		sent   string // the bearer token, "" for none
		want   string // the actor, "" for 401
	}{
		{"no tokens configured, none sent", Tokens{}, "", "anonymous"},
		{"no tokens configured, one sent", Tokens{}, "alice-tok", "anonymous"},
		{"admin token", Tokens{Admin: "adm"}, "adm", "admin"},
		{"admin token configured, none sent", Tokens{Admin: "adm"}, "", ""},
		{"operators beside the admin token: the admin token", Tokens{Admin: "adm", Report: "rep", Operators: ops}, "adm", "admin"},
		{"operators beside the admin token: alice", Tokens{Admin: "adm", Report: "rep", Operators: ops}, "alice-tok", "alice"},
		{"operators beside the admin token: bob", Tokens{Admin: "adm", Report: "rep", Operators: ops}, "bob-tok", "bob"},
		{"operators beside the admin token: the report token", Tokens{Admin: "adm", Report: "rep", Operators: ops}, "rep", ""},
		{"operators beside the admin token: a wrong token", Tokens{Admin: "adm", Report: "rep", Operators: ops}, "alice-to", ""},
		{"operators only: bob", Tokens{Operators: ops}, "bob-tok", "bob"},
		{"operators only: none sent", Tokens{Operators: ops}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var reloadedBy []string
			fleet := &actorFleet{}
			r := newRig(t, Deps{Reload: func(actor string) error { reloadedBy = append(reloadedBy, actor); return nil }, Fleet: fleet})
			fleet.c = r.c
			r.tokens.Store(&tt.tokens)
			var hdr []string
			if tt.sent != "" {
				hdr = []string{"Authorization", "Bearer " + tt.sent}
			}
			wantCode := func(ok int) int {
				if tt.want == "" {
					return http.StatusUnauthorized
				}
				return ok
			}
			lastActor := func() string {
				doc := decodeBody[struct {
					Transitions []controller.Transition `json:"transitions"`
				}](t, r.do("GET", "/v1/history?limit=1", ""))
				if len(doc.Transitions) == 0 {
					return ""
				}
				return doc.Transitions[0].Actor
			}

			steps := []struct {
				method, path, body string
				ok                 int
				actor              func() string
			}{
				{"PUT", "/v1/override", `{"level":"Major","mode":"pin","ttl":"15m","reason":"INC-42"}`, 200, lastActor},
				{"DELETE", "/v1/override", "", 200, lastActor},
				{"PUT", "/v1/fleet/override", `{"level":"Minor","mode":"floor","ttl":"15m","reason":"INC-43"}`, 200, fleet.last},
				{"POST", "/-/reload", "", 200, func() string {
					if len(reloadedBy) == 0 {
						return ""
					}
					return reloadedBy[len(reloadedBy)-1]
				}},
			}
			for _, s := range steps {
				w := r.do(s.method, s.path, s.body, hdr...)
				if w.Code != wantCode(s.ok) {
					t.Fatalf("%s %s: %d %s, want %d", s.method, s.path, w.Code, w.Body, wantCode(s.ok))
				}
				if tt.want == "" {
					continue
				}
				if got := s.actor(); got != tt.want {
					t.Errorf("%s %s: actor %q, want %q", s.method, s.path, got, tt.want)
				}
			}
			if tt.want == "" && (len(reloadedBy) > 0 || fleet.last() != "" || lastActor() != "") {
				t.Errorf("a refused request changed something: reloads %v, fleet %q, history %q", reloadedBy, fleet.last(), lastActor())
			}
			if w := r.do("POST", "/v1/outcomes", `{"success":1}`, hdr...); tt.want != "" && w.Code != http.StatusAccepted {
				t.Errorf("POST /v1/outcomes with a token that opens the admin routes: %d, want 202", w.Code)
			}
		})
	}
}
