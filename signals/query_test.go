package signals

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakePrometheus answers every request with status and body, as a
// Prometheus server's /api/v1/query would, and records the request's
// parameters.
type fakePrometheus struct {
	*httptest.Server
	mu    sync.Mutex
	path  string
	form  url.Values
	calls int
}

func newFakePrometheus(t *testing.T, status int, body string) *fakePrometheus {
	t.Helper()
	f := &fakePrometheus{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			t.Errorf("fake prometheus: %v", err)
		}
		f.mu.Lock()
		f.path, f.form, f.calls = r.URL.Path, r.Form, f.calls+1
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(f.Close)
	return f
}

// request returns the path and parameters of the last request.
func (f *fakePrometheus) request() (string, url.Values) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.path, f.form
}

func success(resultType, result string) string {
	return fmt.Sprintf(`{"status":"success","data":{"resultType":%q,"result":%s}}`, resultType, result)
}

func vector(values ...string) string {
	samples := make([]string, len(values))
	for i, v := range values {
		samples[i] = fmt.Sprintf(`{"metric":{"__name__":"queue_depth","instance":"i%d"},"value":[1700000000,%q]}`, i, v)
	}
	return success("vector", "["+strings.Join(samples, ",")+"]")
}

func newTestQuery(t *testing.T, o QueryOptions) *Query {
	t.Helper()
	q, err := NewQuery(o)
	if err != nil {
		t.Fatalf("NewQuery(%+v): %v", o, err)
	}
	return q
}

// outcome names what Sample's result means to the controller.
func outcome(err error) string {
	switch {
	case err == nil:
		return "available"
	case errors.Is(err, ErrAbsent):
		return "absent"
	default:
		return "failed"
	}
}

func TestQueryResults(t *testing.T) {
	const query = "max(queue_depth)"
	tests := []struct {
		name    string
		status  int
		body    string
		want    float64
		outcome string
		errText string // a part of the error's text
	}{
		{name: "scalar", status: 200, body: success("scalar", `[1700000000,"42.5"]`), want: 42.5, outcome: "available"},
		{name: "negative scalar", status: 200, body: success("scalar", `[1700000000,"-3"]`), want: -3, outcome: "available"},
		{name: "one sample", status: 200, body: vector("1234"), want: 1234, outcome: "available"},
		{name: "several samples read as the largest", status: 200, body: vector("3", "1234", "-7", "99"), want: 1234, outcome: "available"},
		{name: "NaN and infinite samples are skipped", status: 200, body: vector("NaN", "+Inf", "7", "-Inf", "3"), want: 7, outcome: "available"},
		{name: "empty vector is absent", status: 200, body: success("vector", `[]`), outcome: "absent", errText: "empty result"},
		{name: "all-NaN vector is absent", status: 200, body: vector("NaN", "NaN"), outcome: "absent", errText: "all 2 samples are NaN"},
		{name: "NaN scalar is absent", status: 200, body: success("scalar", `[1700000000,"NaN"]`), outcome: "absent", errText: "scalar is NaN"},
		{name: "infinite scalar fails", status: 200, body: success("scalar", `[1700000000,"+Inf"]`), outcome: "failed", errText: "scalar is +Inf, want a finite number"},
		{name: "only infinite and NaN samples fail", status: 200, body: vector("NaN", "+Inf"), outcome: "failed", errText: "no finite sample (1 infinite, 1 NaN)"},
		{name: "matrix fails", status: 200, body: success("matrix", `[{"metric":{},"values":[[1700000000,"1"],[1700000001,"2"]]}]`), outcome: "failed", errText: "got a matrix result, want a scalar or an instant vector"},
		{name: "string fails", status: 200, body: success("string", `[1700000000,"hello"]`), outcome: "failed", errText: `unexpected value type "string"`},
		{name: "server error fails", status: 500, body: "boom", outcome: "failed", errText: "server error: 500"},
		{name: "PromQL error fails", status: 400, body: `{"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": 1:5: parse error"}`, outcome: "failed", errText: "bad_data: invalid parameter"},
		{name: "success without data fails", status: 200, body: `{"status":"success","data":null}`, outcome: "failed", errText: "no result"},
		{name: "not JSON fails", status: 200, body: "<html>", outcome: "failed", errText: "bad_response"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFakePrometheus(t, tt.status, tt.body)
			q := newTestQuery(t, QueryOptions{URL: srv.URL, Query: query})
			got, err := q.Sample(t.Context(), time.Unix(1700000000, 0))
			if o := outcome(err); o != tt.outcome {
				t.Fatalf("Sample = %v, %v: want %s, got %s", got, err, tt.outcome, o)
			}
			if got != tt.want {
				t.Errorf("Sample = %v, want %v", got, tt.want)
			}
			if err == nil {
				return
			}
			for _, part := range []string{tt.errText, fmt.Sprintf("%q", query), srv.URL} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("error %q should contain %q", err, part)
				}
			}
		})
	}
}

func TestQuerySendsQueryTimeAndTimeout(t *testing.T) {
	srv := newFakePrometheus(t, 200, vector("1"))
	q := newTestQuery(t, QueryOptions{URL: srv.URL + "/prom/", Query: `sum(rate(x[1m]))`, Timeout: 1500 * time.Millisecond})
	if _, err := q.Sample(t.Context(), time.Unix(1700000000, 250_000_000)); err != nil {
		t.Fatal(err)
	}
	path, form := srv.request()
	want := map[string]string{"query": `sum(rate(x[1m]))`, "time": "1700000000.25", "timeout": "1.5s"}
	for k, v := range want {
		if got := form.Get(k); got != v {
			t.Errorf("parameter %s = %q, want %q", k, got, v)
		}
	}
	if path != "/prom/api/v1/query" {
		t.Errorf("path = %q, want /prom/api/v1/query (under the URL's path)", path)
	}

	// The zero time leaves the evaluation time to the server; a zero
	// Timeout is the default.
	q = newTestQuery(t, QueryOptions{URL: srv.URL, Query: "up"})
	if _, err := q.Sample(t.Context(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	_, form = srv.request()
	if form.Has("time") {
		t.Errorf("time = %q, want none for the zero time", form.Get("time"))
	}
	if got := form.Get("timeout"); got != "5s" {
		t.Errorf("timeout = %q, want the default 5s", got)
	}
}

// TestQueryTimeout runs against a server that never answers: Sample fails
// once the timeout has passed.
func TestQueryTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The server notices a closed connection only once the body is read.
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	q := newTestQuery(t, QueryOptions{URL: srv.URL, Query: "up", Timeout: 100 * time.Millisecond})
	start := time.Now()
	_, err := q.Sample(t.Context(), time.Now())
	if outcome(err) != "failed" || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Sample error = %v, want a failure wrapping context.DeadlineExceeded", err)
	}
	want := fmt.Sprintf(`prometheus query "up" at %s: no answer within 100ms`, srv.URL)
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q should contain %q", err, want)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Sample returned after %v, want about the 100ms timeout", d)
	}
}

// blockingTransport never answers: each request waits for its context.
type blockingTransport struct{}

func (blockingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	<-r.Context().Done()
	return nil, r.Context().Err()
}

func TestQueryDefaultTimeoutIsFiveSeconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newTestQuery(t, QueryOptions{URL: "http://prometheus:9090", Query: "up", RoundTripper: blockingTransport{}})
		start := time.Now()
		_, err := q.Sample(t.Context(), start)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Sample error = %v, want context.DeadlineExceeded", err)
		}
		if d := time.Since(start); d != DefaultQueryTimeout {
			t.Errorf("Sample gave up after %v, want %v", d, DefaultQueryTimeout)
		}
	})
}

func TestQueryCallerContextEndsFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newTestQuery(t, QueryOptions{URL: "http://prometheus:9090", Query: "up", Timeout: time.Minute, RoundTripper: blockingTransport{}})
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start := time.Now()
		_, err := q.Sample(ctx, start)
		if err != context.DeadlineExceeded {
			t.Errorf("Sample error = %v, want the caller's ctx.Err() unchanged", err)
		}
		if d := time.Since(start); d != time.Second {
			t.Errorf("Sample returned after %v, want 1s (the caller's deadline)", d)
		}
	})
}

func TestQueryUnreachableHidesCredentials(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	q := newTestQuery(t, QueryOptions{URL: "http://alice:s3cret@" + addr, Query: "up"})
	_, err = q.Sample(t.Context(), time.Now())
	if outcome(err) != "failed" {
		t.Fatalf("Sample error = %v, want a failure", err)
	}
	msg := err.Error()
	if want := fmt.Sprintf(`prometheus query "up" at http://%s: `, addr); !strings.HasPrefix(msg, want) {
		t.Errorf("error %q should start with %q", msg, want)
	}
	for _, secret := range []string{"alice", "s3cret"} {
		if strings.Contains(msg, secret) {
			t.Errorf("error %q shows the URL's credentials", msg)
		}
	}
}

func TestQueryAuthenticatesWithURLCredentials(t *testing.T) {
	var user, pass string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, _ = r.BasicAuth()
		_, _ = io.WriteString(w, vector("5"))
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	u.User = url.UserPassword("alice", "s3cret")
	q := newTestQuery(t, QueryOptions{URL: u.String(), Query: "up"})
	if v, err := q.Sample(t.Context(), time.Now()); err != nil || v != 5 {
		t.Fatalf("Sample = %v, %v; want 5", v, err)
	}
	if user != "alice" || pass != "s3cret" {
		t.Errorf("basic auth = %q:%q, want alice:s3cret", user, pass)
	}
}

func TestNewQueryRefusesBadOptions(t *testing.T) {
	tests := []struct {
		name string
		o    QueryOptions
		want string
	}{
		{"no url", QueryOptions{Query: "up"}, `signals: prometheus url "": want an http or https URL`},
		{"other scheme", QueryOptions{URL: "ftp://prometheus", Query: "up"}, `signals: prometheus url "ftp://prometheus": want an http or https URL`},
		{"relative url", QueryOptions{URL: "prometheus:9090", Query: "up"}, `want an http or https URL`},
		{"no host", QueryOptions{URL: "http:///api", Query: "up"}, `signals: prometheus url "http:///api": no host`},
		{"unparsable url", QueryOptions{URL: "http://alice:s3cret@[::1", Query: "up"}, `signals: prometheus url is not a URL`},
		{"credentials never shown", QueryOptions{URL: "ftp://alice:s3cret@prometheus", Query: "up"}, `signals: prometheus url "ftp://prometheus": want an http or https URL`},
		{"no query", QueryOptions{URL: "http://prometheus:9090"}, `signals: prometheus query is empty`},
		{"negative timeout", QueryOptions{URL: "http://prometheus:9090", Query: "up", Timeout: -time.Second}, `signals: prometheus query "up": negative timeout -1s`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := NewQuery(tt.o)
			if err == nil {
				t.Fatalf("NewQuery(%+v) = %v, want an error", tt.o, q)
			}
			if got := err.Error(); !strings.Contains(got, tt.want) {
				t.Errorf("error = %q, want %q", got, tt.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error %q shows the URL's password", err)
			}
		})
	}
}
