package client

import (
	"bytes"
	"fmt"
	"log/slog"
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
