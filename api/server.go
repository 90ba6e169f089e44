package api

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/levels"
	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes is the error window that POST /v1/outcomes feeds and whose live
// totals GET /v1/level shows under "reports".
type Outcomes interface {
	Record(now time.Time, success, failure int64)
	Totals(now time.Time) (attempts, failures int64)
}

// Tokens are the bearer tokens in force; an empty token leaves its
// endpoints open.
type Tokens struct {
	// Admin protects override and fleet override changes, reload and
	// GET /v1/timeline; the report routes accept it too.
	Admin string
	// Report protects POST /v1/outcomes and PUT /v1/signals/{name}.
	Report string
	// Operators are named admin tokens (auth.operators): each works
	// wherever Admin does, and a change made with one is recorded under
	// its name.
	Operators []Operator
}

// Deps is everything NewServer needs. Zero fields take the documented
// defaults; Controller and Outcomes are required.
type Deps struct {
	// Controller is read by every endpoint and commanded by the override
	// ones. It is the concrete type: the handlers serve its documents
	// as they are, and no other implementation exists.
	Controller *controller.Controller
	Outcomes   Outcomes
	// Tokens returns the tokens in force. It is called on each request, so
	// a reload that swaps them applies at once; nil means no tokens (open).
	Tokens func() Tokens
	// Reload re-reads the configuration, for the actor the request's token
	// names; nil makes POST /-/reload a 404. Its error, if any, is shown
	// to the (authenticated) caller.
	Reload func(actor string) error
	// Gatherer serves /metrics; nil serves an empty registry.
	Gatherer prometheus.Gatherer
	// Metrics counts outcomes and subscribers; nil counts nothing.
	Metrics *Metrics
	// SSE are the event stream settings (sse.*) at start; Server.SetSSE
	// replaces them.
	SSE SSE
	// MaxStreams bounds SSE streams and waiting long-polls together
	// (sse.max_subscribers aside); beyond it they are 503. Set it to
	// StreamLimit(max_connections) so that short requests always find a
	// connection. 0 means no bound besides SSE.MaxSubscribers.
	MaxStreams int
	// MaxWait bounds long-poll waits (default 60s).
	MaxWait time.Duration
	// ListenHost is the host part of the listen address. Without an admin
	// token, Host headers naming it are served (see AllowedHosts).
	ListenHost string
	// AllowedHosts returns the host names (no ports, no wildcards) served
	// without an admin token besides loopback names and ListenHost. It is
	// called on each such request, so a reload applies at once; nil allows
	// none.
	AllowedHosts func() []string
	// Reported is called after an outcome report reached the window (with
	// its counts and admission object) and after a pushed value (with a
	// zero Report), so that a burst escalates at once and the admission
	// law sees every report (controller.Controller.Reported); nil waits
	// for the next tick.
	Reported func(levels.Report)
	// Pusher takes PUT /v1/signals/{name}; nil makes it a 404.
	Pusher Pusher
	// Timeline serves GET /v1/timeline; nil (no data_dir) makes it a 404.
	Timeline Timeline
	// Fleet serves /v1/fleet*; nil (fleet mode off) makes them 404.
	Fleet FleetService
	// Logger; nil discards.
	Logger *slog.Logger
}

// Server is the daemon's HTTP API: Handler serves the requests, and Run
// owns the goroutines that serve the hijacked event streams and ends every
// stream and long-poll when its context ends. Build it with NewServer; its
// methods are safe for concurrent use.
type Server struct {
	s       *server
	handler http.Handler
	ran     atomic.Bool
}

// NewServer builds the API over d, applying the defaults Deps documents.
// It starts nothing: plain HTTP/1.1 event streams are hijacked and wait
// for Run, which serves them (before Run they have had the current
// state and get nothing more).
func NewServer(d Deps) *Server {
	s := newServer(d)
	return &Server{s: s, handler: s.routes()}
}

// Handler returns the API's HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Run serves the hijacked event streams until ctx ends: its goroutine
// sends every change, sample and ping, with writer goroutines it joins
// and, while streams are open, a watcher for subscribers that leave (see
// hub). When ctx ends it ends every stream and waiting long-poll, counted
// as sse_dropped_total{reason="shutdown"}, refuses new ones, and returns
// ctx.Err() once its goroutines have exited. Call it once; a second call
// panics.
func (s *Server) Run(ctx context.Context) error {
	if s.ran.Swap(true) {
		panic("api: Server.Run called twice")
	}
	s.s.hub.serve(ctx)
	return ctx.Err()
}

// SetSSE puts v in force at once (a reload's sse.*): a stream's next ping
// comes one new heartbeat after the call, the next write is bounded by
// the new write timeout, and the new subscriber limit applies to streams
// that connect from then on (one that lowers it ends no open stream).
func (s *Server) SetSSE(v SSE) { s.s.setSSE(v) }

type server struct {
	Deps
	subscribers atomic.Int64
	streams     atomic.Int64                 // SSE streams and waiting long-polls
	lastLevel   atomic.Pointer[encodedLevel] // shared encoding of the latest level event
	refusals    refusals
	hub         hub // the hijacked streams
	sse         atomic.Pointer[sseInForce]
	shutdown    chan struct{} // closed when Run's context ends
}

// newServer applies the defaults NewServer documents.
func newServer(d Deps) *server {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.MaxWait <= 0 {
		d.MaxWait = 60 * time.Second
	}
	if d.Tokens == nil {
		d.Tokens = func() Tokens { return Tokens{} }
	}
	if d.Gatherer == nil {
		d.Gatherer = prometheus.NewRegistry()
	}
	s := &server{Deps: d, shutdown: make(chan struct{})}
	s.hub.s = s
	s.hub.start = make(chan struct{}, 1)
	s.hub.wake = make(chan struct{}, 1)
	s.setSSE(d.SSE)
	return s
}
