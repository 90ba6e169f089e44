package client

import (
	"context"
	"net/http"
	"strconv"
)

// PriorityHeader is the header that carries a request's priority between
// services: Transport sets it, PriorityFromHeader(PriorityHeader, ...)
// reads it.
const PriorityHeader = "X-Priority"

// priorityKey is the context key of WithPriority.
type priorityKey struct{}

// WithPriority returns a copy of ctx carrying the priority p (clamped to
// 0..PriorityCritical), for PriorityFrom: the priority a request was
// admitted at, which the calls it makes carry on (Transport over HTTP,
// degradedgrpc's client interceptors over gRPC), so that a checkout
// request stays a checkout request three services down. Middleware sets it
// with WithPropagation; degradedgrpc's server interceptors always do.
func WithPriority(ctx context.Context, p int) context.Context {
	return context.WithValue(ctx, priorityKey{}, clampPriority(p))
}

// PriorityFrom returns the priority WithPriority put in ctx, and whether
// there was one.
func PriorityFrom(ctx context.Context) (int, bool) {
	p, ok := ctx.Value(priorityKey{}).(int)
	return p, ok
}

// Transport returns an http.RoundTripper that sets the X-Priority header
// of each outgoing request from its context's priority (PriorityFrom)
// before passing it to rt (http.DefaultTransport when nil). A request
// that already has the header keeps it: the caller's choice wins, and a
// request whose context has no priority goes out unchanged. The request
// is copied before the header is set, as RoundTrippers must not change
// theirs.
//
//	http.Client{Transport: client.Transport(nil)}
//
// Only send priorities to services whose edge you trust with them: the
// receiving service reads the header as it would its own gateway's.
func Transport(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	return &transport{rt: rt}
}

type transport struct{ rt http.RoundTripper }

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	p, ok := PriorityFrom(r.Context())
	if !ok {
		return t.rt.RoundTrip(r)
	}
	if _, set := r.Header[PriorityHeader]; set {
		return t.rt.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	if r.Header == nil {
		r.Header = http.Header{}
	}
	r.Header.Set(PriorityHeader, strconv.Itoa(p))
	return t.rt.RoundTrip(r)
}

// CloseIdleConnections passes http.Client.CloseIdleConnections on to the
// wrapped RoundTripper.
func (t *transport) CloseIdleConnections() {
	if c, ok := t.rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
