package client

import (
	"bytes"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// A proxy's X-Request-Start moves the start of a request's latency to when
// the proxy saw it, in every unit proxies write; without the option, or
// with a start ahead of the clock, the latency is the handler's.
func TestRequestStartCountsTheWaitBeforeTheHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		handler := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { time.Sleep(30 * time.Millisecond) })
		withStart := []MiddlewareOption{WithRequestStart("x-request-start")}
		var without []MiddlewareOption
		ago := func(d time.Duration) time.Time { return time.Now().Add(-d) }
		for _, tc := range []struct {
			opts   []MiddlewareOption
			header func() string // when the request arrives
			bucket int
		}{
			{withStart, func() string { return fmt.Sprintf("t=%.3f", float64(ago(300*time.Millisecond).UnixMilli())/1e3) }, 8}, // nginx's $msec: (200, 500] ms
			{withStart, func() string { return fmt.Sprintf("t=%d", ago(3*time.Second).UnixMicro()) }, 11},                      // Apache's %t: (2, 5] s
			{withStart, func() string { return fmt.Sprint(ago(120 * time.Millisecond).UnixMilli()) }, 7},                       // Heroku's: (100, 200] ms
			{withStart, func() string { return fmt.Sprint(ago(60 * time.Millisecond).UnixNano()) }, 6},                         // (50, 100] ms
			{withStart, func() string { return fmt.Sprint(time.Now().Add(5 * time.Second).UnixMilli()) }, 5},                   // skew: the handler's 30 ms
			{withStart, func() string { return "" }, 5},
			{without, func() string { return fmt.Sprint(ago(3 * time.Second).UnixMilli()) }, 5},
		} {
			header := tc.header()
			c := at(t, majorState(time.Now()))
			r := httptest.NewRequest("GET", "/", nil)
			if header != "" {
				r.Header.Set("X-Request-Start", header)
			}
			Middleware(c, PriorityFromHeader("X-Priority", 80), tc.opts...)(handler).ServeHTTP(httptest.NewRecorder(), r)
			_, _, l := counted(c)
			var want [numLatencyBuckets]int64
			want[tc.bucket] = 1
			if l != want {
				t.Errorf("X-Request-Start %q: latencies %v, want one in bucket %d (<= %vms)", header, l, tc.bucket, LatencyBounds()[tc.bucket])
			}
		}
	})
}

// A start that is not a recent Unix time is not used, and is logged once
// a minute with a count, so that a misconfigured proxy is seen.
func TestRequestStartRefusesWhatItCannotUseAndSaysSo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		c := at(t, majorState(time.Now()), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		h := Middleware(c, PriorityFromHeader("X-Priority", 80), WithRequestStart("X-Request-Start"))(
			http.HandlerFunc(func(http.ResponseWriter, *http.Request) { time.Sleep(30 * time.Millisecond) }))
		bad := []string{
			"abc", "t=", "-1700000000", "1e9", "0x65000000", "17000000.00.1", "Inf", "NaN", " 1700000000",
			fmt.Sprint(time.Now().Add(-2 * time.Minute).UnixMilli()), // a minute is the most a queue is believed
			"99999999999999999999999", strings.Repeat("1", 100),
		}
		for i, v := range bad {
			r := httptest.NewRequest("GET", "/", nil)
			r.Header.Set("X-Request-Start", v)
			h.ServeHTTP(httptest.NewRecorder(), r)
			if _, _, l := counted(c); l[5] != int64(i+1) {
				t.Errorf("X-Request-Start %q: latencies %v, want the handler's 30 ms (bucket 5) for all %d so far", v, l, i+1)
			}
		}
		if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
			t.Fatalf("%d WARN lines for %d unusable starts within a minute, want 1:\n%s", n, len(bad), logs.String())
		}
		if !strings.Contains(logs.String(), "header=X-Request-Start") || !strings.Contains(logs.String(), "value=abc") {
			t.Errorf("the WARN line does not name the header and the value:\n%s", logs.String())
		}
		time.Sleep(time.Minute)
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Request-Start", "abc")
		h.ServeHTTP(httptest.NewRecorder(), r)
		if !strings.Contains(logs.String(), fmt.Sprintf("unusable_since_last_log=%d", len(bad))) {
			t.Errorf("a minute later the next line does not count the %d unusable starts since the first:\n%s", len(bad), logs.String())
		}
	})
}

// FuzzParseRequestStart: whatever a header holds, the parser does not
// panic, and what it accepts is digits with at most one point, read as a
// time between 1973 and 2255.
func FuzzParseRequestStart(f *testing.F) {
	for _, s := range []string{"t=1700000000.123", "t=1700000000123456", "1700000000123", "1700000000123456789", "t=", "abc", "1e9", "-5"} {
		f.Add(s)
	}
	lo, hi := time.Date(1973, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2256, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		at, ok := parseRequestStart(v)
		if !ok {
			return
		}
		digits := strings.TrimPrefix(v, "t=")
		if strings.Trim(digits, "0123456789.") != "" || strings.Count(digits, ".") > 1 {
			t.Fatalf("accepted %q, which is not digits with at most one point", v)
		}
		if at.Before(lo) || at.After(hi) {
			t.Fatalf("read %q as %v, outside 1973..2255", v, at)
		}
	})
}

// serveStamped sends n requests of priority 80 through h, one every
// 10ms, the i-th stamped as a proxy in front saw it at stamp(i).
func serveStamped(h http.Handler, n int, stamp func(i int) time.Time) {
	for i := range n {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Priority", "80")
		r.Header.Set("X-Request-Start", fmt.Sprint(stamp(i).UnixNano()))
		h.ServeHTTP(httptest.NewRecorder(), r)
		time.Sleep(10 * time.Millisecond)
	}
}

// apart stamps the i-th request every apart from first on.
func apart(first time.Time, every time.Duration) func(int) time.Time {
	return func(i int) time.Time { return first.Add(time.Duration(i) * every) }
}

// TestReportGivesTheSpanTheRequestsArrivedOver: 100 requests reach the
// middleware over a second, 10ms apart. Stamped by the proxy 1/300s
// apart, they came over a third of a second (a queue before the handler
// grew, as on a saturated core): the report gives "arrival_seconds"
// 0.333, so that the daemon reads 300/s offered. Stamped 20ms apart, they
// came over two seconds (a queue drained, a burst): 2.0. Stamped as they
// reach it, the report leaves the span out, and so it does when one of
// the first requests was stamped 30s early (a proxy that buffered an
// upload): each end of the interval is read by the median of seven.
func TestReportGivesTheSpanTheRequestsArrivedOver(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stamp func(now time.Time) func(int) time.Time
		want  float64
	}{
		{"a queue grows", func(now time.Time) func(int) time.Time { return apart(now.Add(-50*time.Millisecond), time.Second/300) }, 1.0 / 3},
		{"a queue drains", func(now time.Time) func(int) time.Time {
			return apart(now.Add(-1100*time.Millisecond), 20*time.Millisecond)
		}, 2},
		{"no queue", func(now time.Time) func(int) time.Time {
			return apart(now.Add(-50*time.Millisecond), 10*time.Millisecond)
		}, 0},
		{"one early stamp", func(now time.Time) func(int) time.Time {
			even := apart(now.Add(-50*time.Millisecond), 10*time.Millisecond)
			return func(i int) time.Time {
				if i == 2 {
					return now.Add(-30 * time.Second)
				}
				return even(i)
			}
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d, c := followingMajor(t)
				h := Middleware(c, PriorityFromHeader("X-Priority", 50), WithRequestStart("X-Request-Start"))(okHandler)
				serveStamped(h, 100, tc.stamp(time.Now()))
				synctest.Wait()
				got := d.received()
				if len(got) != 1 || got[0].Seconds != 1 || got[0].Offered["80"] != 100 {
					t.Fatalf("admission objects %+v, want one of the second's 100 requests", got)
				}
				if math.Abs(got[0].Arrival-tc.want) > 1e-3 {
					t.Errorf("arrival_seconds %v, want %.3f (0: left out)", got[0].Arrival, tc.want)
				}
			})
		})
	}
}

// TestAnOlderDaemonRefusingTheArrivalSpanLosesNoReport: a daemon from
// before "arrival_seconds" refuses it as an unknown field; the client
// sends the same report again without it at once (its counts reach the
// daemon), says so once, and leaves it out from then on.
func TestAnOlderDaemonRefusingTheArrivalSpanLosesNoReport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		d := newDaemon(t)
		d.override("Major")
		d.noArrival = true
		d.start()
		c := d.newClient(WithReportInterval(time.Second), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		running(t, c)
		synctest.Wait()
		h := Middleware(c, PriorityFromHeader("X-Priority", 50), WithRequestStart("X-Request-Start"))(okHandler)
		for range 2 {
			serveStamped(h, 100, apart(time.Now().Add(-50*time.Millisecond), time.Second/300))
			synctest.Wait()
		}
		got := d.received()
		if len(got) != 2 || got[0].Offered["80"] != 100 || got[1].Offered["80"] != 100 {
			t.Fatalf("the older daemon got %+v, want both seconds' reports, 100 offered at 80 each", got)
		}
		if n := strings.Count(logs.String(), "does not take admission.arrival_seconds"); n != 1 {
			t.Errorf("%d log lines on the refused field, want 1:\n%s", n, logs.String())
		}
		if strings.Contains(logs.String(), "level=ERROR") {
			t.Errorf("a refused report was logged as dropped:\n%s", logs.String())
		}
	})
}

// TestASurgeBehindAQueueEndsTheIntervalEarly: on a saturated core a step
// of the load reaches the middleware no faster than before; only the wait
// before it grows. Two seconds of 100 requests stamped as they come, then
// requests reaching the middleware at the same 100 a second but stamped
// 1/300 s apart (300/s offered): the report is sent once the interval is
// 500ms old, not at its end, and reads them over the third of its span
// they arrived over. Stamped as they come, the same requests keep the
// cadence.
func TestASurgeBehindAQueueEndsTheIntervalEarly(t *testing.T) {
	for _, tc := range []struct {
		name  string
		every time.Duration
		early bool
	}{
		{"a queue grows before the middleware", time.Second / 300, true},
		{"no queue", 10 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d, c := followingMajor(t)
				h := Middleware(c, PriorityFromHeader("X-Priority", 50), WithRequestStart("X-Request-Start"))(okHandler)
				time.Sleep(25 * time.Millisecond)
				for range 2 {
					serveStamped(h, 100, apart(time.Now(), 10*time.Millisecond))
				}
				synctest.Wait()
				if got := d.received(); len(got) != 2 || got[1].Seconds != 1 {
					t.Fatalf("steady load: reports %+v, want two of 1 s", got)
				}
				start := time.Now()
				serveStamped(h, 80, apart(start, tc.every))
				time.Sleep(300 * time.Millisecond)
				synctest.Wait()
				got := d.received()
				if len(got) < 3 {
					t.Fatalf("reports %+v, want a third", got)
				}
				at := got[2].at.Sub(start)
				if early := at < 700*time.Millisecond; early != tc.early {
					t.Errorf("the third report came %v into the interval (%.2f s, %d offered, arrival %.3f s); want early %v",
						at, got[2].Seconds, got[2].Offered["80"], got[2].Arrival, tc.early)
				}
			})
		})
	}
}
