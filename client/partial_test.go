package client

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// draws is how many requests of the band the statistical tests judge.
// At a fraction F the admitted count is binomial(draws, F), with a
// standard deviation of at most 250 (F = 0.5); the tests accept 10 of
// them either side, a bound a correct draw misses with a probability
// below 1e-22: the tests cannot flake, and a wrong fraction (off by 0.02
// or more) always fails.
const (
	draws     = 250_000
	drawSlack = 2_500
)

// withinBand reports whether n admitted out of draws is what fraction f
// admits.
func withinBand(n int, f float64) bool {
	return math.Abs(float64(n)-f*draws) <= drawSlack
}

// TestAllowHonoursPartialAdmission: at Major (threshold 50) with 40% of
// 30-49 admitted, every priority of 50 and up is admitted and every one
// below 30 shed, each without a draw, and the band is admitted at 40%.
func TestAllowHonoursPartialAdmission(t *testing.T) {
	c := at(t, partialState())
	for _, p := range []int{50, 51, 99, PriorityCritical} {
		for range 1000 {
			if !c.Allow(p) {
				t.Fatalf("Allow(%d) = false, want always admitted (>= the threshold 50)", p)
			}
		}
	}
	for _, p := range []int{-1, 0, 10, 29} {
		for range 1000 {
			if c.Allow(p) {
				t.Fatalf("Allow(%d) = true, want always shed (below the band 30-49)", p)
			}
		}
	}
	for _, p := range []int{30, 40, 49} {
		n := 0
		for range draws {
			if c.Allow(p) {
				n++
			}
		}
		if !withinBand(n, 0.4) {
			t.Errorf("Allow(%d) admitted %d of %d, want about 40%% (%d ± %d)", p, n, draws, int(0.4*draws), drawSlack)
		}
	}
}

// TestPartialEdges: a fraction of 1 (or more) admits the whole band, as
// the previous level would; none, a fraction of 0 or NaN, or a band that
// does not start below the threshold sheds the band, as the plain level
// does. A client that ignores "partial" sheds the whole band: it sheds
// more than one that honours it, never less.
func TestPartialEdges(t *testing.T) {
	for _, tc := range []struct {
		name    string
		partial *Partial
		want    []bool // Allow(29), Allow(30), Allow(49), Allow(50)
	}{
		{"ignored (nil)", nil, []bool{false, false, false, true}},
		{"fraction 1", &Partial{From: 30, Fraction: 1}, []bool{false, true, true, true}},
		{"fraction 0", &Partial{From: 30, Fraction: 0}, []bool{false, false, false, true}},
		{"fraction NaN", &Partial{From: 30, Fraction: math.NaN()}, []bool{false, false, false, true}},
		{"from above the threshold", &Partial{From: 60, Fraction: 0.5}, []bool{false, false, false, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := majorState(time.Now().Add(time.Minute))
			st.Partial = tc.partial
			c := at(t, st)
			for i, p := range []int{29, 30, 49, 50} {
				for range 200 {
					if got := c.Allow(p); got != tc.want[i] {
						t.Fatalf("Allow(%d) = %v, want %v", p, got, tc.want[i])
					}
				}
			}
		})
	}
}

// TestPartialUnderFailModes: a stale state's partial admission holds
// under FailLastKnown, and neither FailOpen nor FailClosed draws.
func TestPartialUnderFailModes(t *testing.T) {
	for _, tc := range []struct {
		mode FailMode
		want float64 // share of priority 40 admitted once stale
	}{{FailLastKnown, 0.4}, {FailOpen, 1}, {FailClosed, 0}} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			c := at(t, partialState(), WithFailMode(tc.mode))
			c.setStale(true)
			n := 0
			for range draws {
				if c.Allow(40) {
					n++
				}
			}
			if !withinBand(n, tc.want) {
				t.Errorf("stale: Allow(40) admitted %d of %d, want a share of %v", n, draws, tc.want)
			}
		})
	}
}

// TestPartialAdmissionDoesNotAllocate: Allow and Admit on each path, and
// the middleware's admitted requests, cost no allocation.
func TestPartialAdmissionDoesNotAllocate(t *testing.T) {
	c := at(t, partialState())
	for _, p := range []int{80, 40, 10} {
		if n := testing.AllocsPerRun(1000, func() { c.Allow(p) }); n != 0 {
			t.Errorf("Allow(%d) allocates %v times, want 0", p, n)
		}
		if n := testing.AllocsPerRun(1000, func() { c.Admit(p).Done(true) }); n != 0 {
			t.Errorf("Admit(%d) allocates %v times, want 0", p, n)
		}
	}
	// The band's admitted path, drawn every time: a fraction just below
	// 1, so that the draw is made and (but for once in 10^9) admits.
	st := partialState()
	st.Partial.Fraction = 1 - 1e-9
	h := Middleware(at(t, st), func(*http.Request) int { return 40 })(okHandler)
	r := httptest.NewRequest("GET", "/", nil)
	w := &discardWriter{h: http.Header{}}
	if n := testing.AllocsPerRun(1000, func() { h.ServeHTTP(w, r) }); n != 0 {
		t.Errorf("the middleware admitting in the band allocates %v times a request, want 0", n)
	}
}

// discardWriter is a ResponseWriter that keeps nothing.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}

// TestShadowCountsPartialShedsAsWouldShed: in shadow mode with partial
// admission everything is served, and what enforcement would shed counts
// as a would-shed: all of the requests below the band and the band's
// share that the draw would shed.
func TestShadowCountsPartialShedsAsWouldShed(t *testing.T) {
	st := partialState()
	st.Shadow = true
	c := at(t, st)
	for range draws {
		if !c.Allow(40) {
			t.Fatal("Allow(40) = false in shadow mode")
		}
	}
	for range 100 {
		c.Allow(10)
		c.Allow(80)
	}
	got := c.shadow.take(nil)["Major"]
	if !withinBand(int(got-100), 0.6) {
		t.Errorf("would_shed Major = %d, want 100 below the band plus about 60%% of %d in it", got, draws)
	}
}

// TestMiddlewareAndDoHonourPartialAdmission: the middleware sheds the
// band's share that the draw sheds, with 503, and Do falls back for it.
func TestMiddlewareAndDoHonourPartialAdmission(t *testing.T) {
	c := at(t, partialState())
	served := 0
	h := Middleware(c, PriorityFromHeader("X-Priority", 50))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ }))
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Priority", "40")
	shed := 0
	for range draws / 10 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code == http.StatusServiceUnavailable {
			shed++
			if w.Header().Get("X-Degraded-Level") != "Major" || w.Header().Get("Retry-After") == "" {
				t.Fatalf("shed without X-Degraded-Level Major and Retry-After: %v", w.Header())
			}
		}
	}
	if served+shed != draws/10 || math.Abs(float64(served)-0.4*draws/10) > drawSlack/3 {
		t.Errorf("middleware served %d and shed %d of %d at priority 40, want about 40%% served", served, shed, draws/10)
	}

	primary := 0
	op := Operation[string]{Priority: 40,
		Primary:   func(context.Context) (string, error) { primary++; return "full", nil },
		Fallbacks: map[string]func(context.Context) (string, error){"Major": func(context.Context) (string, error) { return "cached", nil }},
	}
	for range draws / 10 {
		if _, err := Do(context.Background(), c, op); err != nil {
			t.Fatal(err)
		}
	}
	if math.Abs(float64(primary)-0.4*draws/10) > drawSlack/3 {
		t.Errorf("Do ran Primary %d times of %d at priority 40, want about 40%%", primary, draws/10)
	}
}
