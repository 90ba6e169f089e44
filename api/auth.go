package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/degraded/degraded/controller"
)

type tokenKind int

const (
	adminToken tokenKind = iota
	reportToken
)

// Routes as auth_failures_total{route} names them. Routes this build does
// not serve are still exported at 0, so dashboards and alerts are the same
// for every daemon.
const (
	routeOutcomes      = "outcomes"
	routeSignals       = "signals"
	routeOverride      = "override"
	routeFleetOverride = "fleet_override"
	routeReload        = "reload"
	routeTimeline      = "timeline"
)

var authRoutes = []string{routeOutcomes, routeSignals, routeOverride, routeFleetOverride, routeReload, routeTimeline}

// refusalLogEvery is how often at most a refused request is logged per route.
const refusalLogEvery = 10 * time.Second

// Operator is a named admin token: see Tokens.Operators.
type Operator struct {
	Name, Token string
}

// requireToken checks the bearer token of the given kind in constant time;
// an empty configured token leaves the endpoint open. Admin routes take
// the admin token or an operator's; report routes take the report token
// or any of those. The request's context carries who made it (see
// actorOf). A refused request is counted for route and logged at WARN, at
// most once per 10s per route.
func (s *server) requireToken(kind tokenKind, route string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tokens := s.Tokens()
			got, sent := bearer(r)
			var actor string // "" until a token (or the lack of one) lets the request in
			if sent {
				actor = tokens.admin(got)
			}
			switch kind {
			case adminToken:
				if tokens.Admin == "" && len(tokens.Operators) == 0 {
					actor = controller.ActorAnonymous // no admin token configured: open
				}
			case reportToken:
				if actor == "" && (tokens.Report == "" || sent && tokenEqual(got, tokens.Report)) {
					actor = controller.ActorAnonymous // a service: report routes make no history
				}
			}
			if actor == "" {
				s.refused(route, r, sent)
				w.Header().Set("WWW-Authenticate", `Bearer realm="degraded"`)
				writeError(w, http.StatusUnauthorized, "missing or wrong bearer token")
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), actorKey{}, actor)))
		})
	}
}

// admin names whom the bearer token got belongs to among the admin
// tokens: "admin" for Admin, an operator's name, or "" for none of them.
// Every token is compared, each in constant time, whichever matches.
func (t Tokens) admin(got string) string {
	var actor string
	if t.Admin != "" && tokenEqual(got, t.Admin) {
		actor = "admin"
	}
	for _, o := range t.Operators {
		if tokenEqual(got, o.Token) && actor == "" {
			actor = o.Name
		}
	}
	return actor
}

// actorKey is the request context's key of the actor requireToken found.
type actorKey struct{}

// actorOf names who made the request, for the history: an operator's
// name for their token, "admin" for the admin token, "anonymous" where no
// admin token is configured.
func actorOf(r *http.Request) string {
	if a, ok := r.Context().Value(actorKey{}).(string); ok {
		return a
	}
	return controller.ActorAnonymous
}

// refused counts and, rate-limited, logs a request refused for its token.
// The log names the route and the peer, never the token.
func (s *server) refused(route string, r *http.Request, hadToken bool) {
	now := time.Now()
	s.Metrics.authFailed(route)
	if suppressed, log := s.refusals.add(route, now); log {
		why := "missing bearer token"
		if hadToken {
			why = "wrong bearer token"
		}
		s.Logger.Warn("request refused: "+why, "route", route, "method", r.Method, "path", r.URL.Path,
			"remote_addr", r.RemoteAddr, "suppressed_since_last_log", suppressed)
	}
}

// refusals counts requests refused for their token, per route. Safe for
// concurrent use.
type refusals struct {
	mu      sync.Mutex
	byRoute map[string]*refusal
}

type refusal struct {
	total      int64
	last       time.Time
	logged     time.Time
	suppressed int64 // refusals not logged since logged
}

// add records a refusal at now and says whether to log it, with how many
// refusals went unlogged before it.
func (rs *refusals) add(route string, now time.Time) (suppressed int64, log bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.byRoute == nil {
		rs.byRoute = map[string]*refusal{}
	}
	f := rs.byRoute[route]
	if f == nil {
		f = &refusal{}
		rs.byRoute[route] = f
	}
	f.total++
	f.last = now
	if !f.logged.IsZero() && now.Sub(f.logged) < refusalLogEvery {
		f.suppressed++
		return 0, false
	}
	suppressed, f.suppressed, f.logged = f.suppressed, 0, now
	return suppressed, true
}

// get returns the refusals of route so far and the time of the last one
// (nil if none).
func (rs *refusals) get(route string) (int64, *time.Time) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	f := rs.byRoute[route]
	if f == nil {
		return 0, nil
	}
	last := f.last.UTC()
	return f.total, &last
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	const prefix = "Bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	return h[len(prefix):], true
}

// tokenEqual compares in constant time, hashing first so that not even the
// length of the configured token leaks.
func tokenEqual(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}
