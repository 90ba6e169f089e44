package client

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"
)

func TestWithPriority(t *testing.T) {
	if _, ok := PriorityFrom(context.Background()); ok {
		t.Error("PriorityFrom of a bare context reports a priority")
	}
	for _, tc := range []struct{ in, want int }{{0, 0}, {70, 70}, {-3, 0}, {PriorityCritical, PriorityCritical}} {
		if got, ok := PriorityFrom(WithPriority(context.Background(), tc.in)); !ok || got != tc.want {
			t.Errorf("PriorityFrom(WithPriority(%d)) = %d, %v; want %d", tc.in, got, ok, tc.want)
		}
	}
}

// TestPriorityTravelsTwoHops: an edge service admits a request at the
// priority its header says and, with WithPropagation, puts it in the
// request's context; its call to the next service goes through Transport,
// which sets X-Priority from it; the next service reads it like any
// request, and passes it on the same way to a third.
func TestPriorityTravelsTwoHops(t *testing.T) {
	c := at(t, majorState(time.Now().Add(time.Minute)))
	hc := &http.Client{Transport: Transport(nil)}
	t.Cleanup(hc.CloseIdleConnections)
	seen := make(chan string, 1)
	third := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { seen <- r.Header.Get("X-Priority") }))
	defer third.Close()
	forward := func(to string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			req, _ := http.NewRequestWithContext(r.Context(), "GET", to, nil)
			resp, err := hc.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		})
	}
	second := httptest.NewServer(Middleware(c, PriorityFromHeader("X-Priority", 50), WithPropagation())(forward(third.URL)))
	defer second.Close()
	edge := httptest.NewServer(Middleware(c, PriorityFromHeader("X-Priority", 50), WithPropagation())(forward(second.URL)))
	defer edge.Close()

	req, _ := http.NewRequest("GET", edge.URL, nil)
	req.Header.Set("X-Priority", "90")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := <-seen; got != "90" {
		t.Errorf("the third service saw X-Priority %q, want 90 from the edge", got)
	}
}

// TestTransportNeverOverwritesAPriority: a header the caller set is kept,
// a context without a priority sends none, and the caller's request is
// not changed.
func TestTransportNeverOverwritesAPriority(t *testing.T) {
	var got []string
	rt := Transport(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = append(got, r.Header.Get("X-Priority"))
		return &http.Response{StatusCode: 204, Body: http.NoBody, Request: r}, nil
	}))
	ctx := WithPriority(context.Background(), 20)
	set, _ := http.NewRequestWithContext(ctx, "GET", "http://example.test/", nil)
	set.Header.Set("X-Priority", "80")
	plain, _ := http.NewRequestWithContext(ctx, "GET", "http://example.test/", nil)
	none, _ := http.NewRequest("GET", "http://example.test/", nil)
	for _, r := range []*http.Request{set, plain, none} {
		if _, err := rt.RoundTrip(r); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"80", "20", ""}; !slices.Equal(got, want) {
		t.Errorf("X-Priority sent %q, want %q", got, want)
	}
	if plain.Header.Get("X-Priority") != "" {
		t.Error("Transport changed the caller's request")
	}
}

// TestMiddlewarePropagatesOnlyWhenAsked: without WithPropagation the
// handler's context carries no priority.
func TestMiddlewarePropagatesOnlyWhenAsked(t *testing.T) {
	c := at(t, majorState(time.Now().Add(time.Minute)))
	for _, tc := range []struct {
		opts []MiddlewareOption
		ok   bool
	}{{nil, false}, {[]MiddlewareOption{WithPropagation()}, true}} {
		var got int
		var ok bool
		h := Middleware(c, PriorityFromHeader("X-Priority", 50), tc.opts...)(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			got, ok = PriorityFrom(r.Context())
		}))
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Priority", "77")
		h.ServeHTTP(httptest.NewRecorder(), r)
		if ok != tc.ok || tc.ok && got != 77 {
			t.Errorf("options %d: PriorityFrom = %d, %v; want 77 only with WithPropagation", len(tc.opts), got, ok)
		}
	}
}

// TestFeatureInShadowMode: at a shadow Major, every feature is enabled,
// whatever the fail mode, and what enforcement would have disabled is
// counted per feature (issue 24 finding 3).
func TestFeatureInShadowMode(t *testing.T) {
	for _, tc := range []struct {
		mode  FailMode
		stale bool
	}{{FailOpen, false}, {FailLastKnown, true}, {FailClosed, true}} {
		st := majorState(time.Now().Add(time.Minute)) // disables recommendations, search
		st.Shadow = true
		c := at(t, st, WithFailMode(tc.mode))
		if tc.stale {
			c.setStale(true)
		}
		for _, f := range []string{"recommendations", "search", "search", "checkout"} {
			if !c.Feature(f) {
				t.Errorf("%s stale %v: Feature(%q) = false in shadow mode", tc.mode, tc.stale, f)
			}
		}
		want := map[string]int64{"recommendations": 1, "search": 2}
		if tc.mode == FailClosed { // every feature would be off
			want["checkout"] = 1
		}
		if got := c.WouldDisable(); !maps.Equal(got, want) {
			t.Errorf("%s stale %v: WouldDisable %v, want %v", tc.mode, tc.stale, got, want)
		}
	}
	c := at(t, majorState(time.Now().Add(time.Minute)))
	if c.Feature("search") || c.WouldDisable() != nil {
		t.Error("enforcing at Major: search enabled or counted")
	}
	st := majorState(time.Now().Add(time.Minute))
	st.Shadow = true
	c = at(t, st)
	if n := testing.AllocsPerRun(1000, func() { c.Feature("search") }); n != 0 {
		t.Errorf("Feature in shadow mode allocates %v times, want 0", n)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A header priority is clamped to 0..PriorityCritical whatever its size:
// an integer past int's range is clamped like one inside it, and only a
// value that is not an integer gets the fallback.
func TestPriorityFromHeaderClamps(t *testing.T) {
	prio := PriorityFromHeader("X-Priority", 50)
	for _, tc := range []struct {
		value string
		want  int
	}{
		{"60", 60},
		{"-5", 0},
		{"-99999999999999999999", 0},
		{"2147483648", PriorityCritical},
		{"99999999999999999999", PriorityCritical},
		{"", 50},
		{"high", 50},
		{"1e3", 50},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("X-Priority", tc.value)
		if got := prio(r); got != tc.want {
			t.Errorf("X-Priority %q: %d, want %d", tc.value, got, tc.want)
		}
	}
}
