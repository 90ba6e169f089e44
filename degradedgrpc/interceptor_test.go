package degradedgrpc

import (
	"context"
	"slices"
	"testing"

	"github.com/degraded/degraded/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
)

// TestUnaryShedsAndRecords: at a pinned Major (threshold 50) a call of
// priority 80, or without one (the fallback 50), is served, one of 20 is
// shed with ResourceExhausted and the pushback and level trailers; the
// outcomes are recorded by code, with their latency, a panic recovered as
// a failure answered Internal, and a shed call never.
func TestUnaryShedsAndRecords(t *testing.T) {
	d, c, stop := startDaemon(t, level("Major"))
	svc := &service{}
	h := dial(t, serve(t, c, svc))

	for _, tc := range []struct {
		p    int
		what string
		code codes.Code
	}{
		{80, "", codes.OK},
		{-1, "", codes.OK}, // no x-priority: 50
		{80, "notfound", codes.NotFound},
		{80, "internal", codes.Internal},
		{80, "panic", codes.Internal},
	} {
		if code, _ := check(t, h, tc.p, tc.what); code != tc.code {
			t.Errorf("priority %d %q: %v, want %v", tc.p, tc.what, code, tc.code)
		}
	}
	code, tr := check(t, h, 20, "")
	checkShed(t, "unary at priority 20", code, tr, "Major")
	if got := svc.priorities(); !slices.Equal(got, []int{80, 50, 80, 80, 80}) {
		t.Errorf("the handler saw priorities %v in its context, want 80, 50, 80, 80, 80 and the shed call never", got)
	}

	stop()
	success, failure, latency, admitted, shed := d.counts()
	if success != 3 || failure != 2 || latency != 5 {
		t.Errorf("recorded %d successes, %d failures, %d latencies; want 3 (OK, OK, NotFound), 2 (Internal, panic), 5", success, failure, latency)
	}
	if admitted != 5 || shed != 1 {
		t.Errorf("admission report: %d admitted, %d shed; want 5 and 1", admitted, shed)
	}
}

// TestStreamShedsAndRecords: the same for a server stream, recorded
// without latency.
func TestStreamShedsAndRecords(t *testing.T) {
	d, c, stop := startDaemon(t, level("Major"))
	svc := &service{}
	h := dial(t, serve(t, c, svc))

	for _, tc := range []struct {
		p    int
		what string
		code codes.Code
	}{
		{80, "", codes.OK},
		{50, "notfound", codes.NotFound},
		{90, "internal", codes.Internal},
		{90, "panic", codes.Internal},
	} {
		if code, _ := watch(t, h, tc.p, tc.what); code != tc.code {
			t.Errorf("stream at %d %q: %v, want %v", tc.p, tc.what, code, tc.code)
		}
	}
	code, tr := watch(t, h, 49, "")
	checkShed(t, "stream at priority 49", code, tr, "Major")
	stop()
	success, failure, latency, _, _ := d.counts()
	if success != 2 || failure != 2 || latency != 0 {
		t.Errorf("recorded %d successes, %d failures, %d latencies; want 2, 2, none for streams", success, failure, latency)
	}
}

// TestPriorityTravelsTwoHops: a call with x-priority 77 to the first
// server, whose handler calls the second through the client interceptors,
// reaches the second with priority 77 in its context: unary and stream.
func TestPriorityTravelsTwoHops(t *testing.T) {
	_, c, _ := startDaemon(t, level("Normal"))
	last := &service{}
	mid := &service{next: dial(t, serve(t, c, last))}
	h := dial(t, serve(t, c, mid))
	if code, _ := check(t, h, 77, "hop"); code != codes.OK {
		t.Fatalf("unary hop: %v", code)
	}
	if code, _ := watch(t, h, 77, "hop-stream"); code != codes.OK {
		t.Fatalf("stream hop: %v", code)
	}
	if got := last.priorities(); !slices.Equal(got, []int{77, 77}) {
		t.Errorf("the second hop saw priorities %v, want 77 for the call and for the stream", got)
	}
}

// TestClientInterceptorKeepsTheCallersPriority: x-priority set by the
// caller is sent as it is; a context without a priority sends none.
func TestClientInterceptorKeepsTheCallersPriority(t *testing.T) {
	_, c, _ := startDaemon(t, level("Normal"))
	svc := &service{}
	h := dial(t, serve(t, c, svc, WithExempt()))
	ctx := metadata.AppendToOutgoingContext(client.WithPriority(context.Background(), 20), "x-priority", "90")
	if _, err := h.Check(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Check(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if got := svc.priorities(); !slices.Equal(got, []int{90, 50}) {
		t.Errorf("the server saw %v, want 90 (the caller's) and 50 (none sent: the fallback)", got)
	}
}

// TestShadowNeverSheds: in shadow mode at Emergency every call and stream
// is served, and what would have been shed is reported as would_shed.
func TestShadowNeverSheds(t *testing.T) {
	st := level("Emergency")
	st.Shadow = true
	d, c, stop := startDaemon(t, st)
	h := dial(t, serve(t, c, &service{}))
	if code, _ := check(t, h, 0, ""); code != codes.OK {
		t.Errorf("unary in shadow mode: %v, want OK", code)
	}
	if code, _ := watch(t, h, 10, ""); code != codes.OK {
		t.Errorf("stream in shadow mode: %v, want OK", code)
	}
	stop()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.wouldShed["Emergency"] != 2 || d.success != 2 {
		t.Errorf("would_shed %v and %d successes, want Emergency 2 and both served calls recorded", d.wouldShed, d.success)
	}
}

// TestPartialAdmission: at Major with half of 30-49 admitted, calls of
// priority 40 are served about half the time (400 calls: a binomial
// whose 9 standard deviations are 90).
func TestPartialAdmission(t *testing.T) {
	st := level("Major")
	st.Partial = &client.Partial{From: 30, Fraction: 0.5}
	_, c, _ := startDaemon(t, st)
	h := dial(t, serve(t, c, &service{}))
	served := 0
	for range 400 {
		code, tr := check(t, h, 40, "")
		switch code {
		case codes.OK:
			served++
		case codes.ResourceExhausted:
			if first(tr, LevelKey) != "Major" {
				t.Fatalf("shed without the level trailer: %v", tr)
			}
		default:
			t.Fatalf("priority 40: %v", code)
		}
	}
	if served < 110 || served > 290 {
		t.Errorf("served %d of 400 calls in the band, want about half", served)
	}
}

// TestExemptMethods: an exempt method is served at any level and records
// nothing.
func TestExemptMethods(t *testing.T) {
	d, c, stop := startDaemon(t, level("Emergency"))
	h := dial(t, serve(t, c, &service{}, WithExempt("/grpc.health.v1.Health/Check")))
	if code, _ := check(t, h, 0, ""); code != codes.OK {
		t.Errorf("exempt Check at Emergency: %v, want OK", code)
	}
	code, tr := watch(t, h, 0, "")
	checkShed(t, "Watch, not exempt", code, tr, "Emergency")
	stop()
	if s, f, _, _, _ := d.counts(); s+f != 0 {
		t.Errorf("recorded %d outcomes, want none (exempt and shed)", s+f)
	}
}

// TestFailed is the outcome mapping by code.
func TestFailed(t *testing.T) {
	failures := []codes.Code{codes.Unknown, codes.DeadlineExceeded, codes.Internal, codes.Unavailable, codes.DataLoss}
	for code := codes.OK; code <= codes.Unauthenticated; code++ {
		var err error
		if code != codes.OK {
			err = statusErr(code)
		}
		if got, want := Failed(err), slices.Contains(failures, code); got != want {
			t.Errorf("Failed(%v) = %v, want %v", code, got, want)
		}
	}
	if !Failed(context.DeadlineExceeded) || Failed(context.Canceled) || !Failed(errPlain) {
		t.Error("a plain error should read as Unknown (a failure), a context's as its code")
	}
}
