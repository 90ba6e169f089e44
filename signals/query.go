package signals

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"time"

	"github.com/degraded/degraded/levels"
	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// DefaultQueryTimeout is the evaluation timeout of a [Query] whose
// QueryOptions.Timeout is zero: the default of signals.prometheus.timeout.
const DefaultQueryTimeout = 5 * time.Second

// MaxAnswerBytes caps the body of one Prometheus answer, counted after
// decompression: 1 MiB holds thousands of samples, far more than a query
// that feeds a signal should return (aggregate it: max(...)). client_golang
// reads the whole body into memory before it decodes it, so without a cap
// one huge answer (a mistaken query, a hostile server) takes all the memory
// there is, and the Go runtime keeps it.
const MaxAnswerBytes = 1 << 20

// ErrAnswerTooLarge is wrapped by the error of [Query.Sample] when an
// answer's body is over [MaxAnswerBytes]: the query failed (levels.Failed),
// and the body was read no further.
var ErrAnswerTooLarge = errors.New("answer larger than the 1 MiB cap on a Prometheus answer")

// ErrAbsent is returned by [Query.Sample] when Prometheus answered but the
// result holds no value: an empty vector, a vector whose samples are all
// NaN, or a NaN scalar. Like low traffic, a series that does not exist right
// now is not an incident: the caller records the signal as absent
// (levels.Absent), not failed. Test with errors.Is; the error's text names
// the query, the URL and which of the cases it was.
//
// Sample's result maps to a signal state as follows: a nil error is
// levels.Available, ErrAbsent is levels.Absent, and any other error is
// levels.Failed.
var ErrAbsent = levels.ErrAbsent

// QueryOptions configures a [Query]. URL and Query are required; the other
// fields' zero values are documented defaults.
type QueryOptions struct {
	// URL is the Prometheus server's base URL (signals.prometheus.url), such
	// as http://prometheus:9090; the query goes to URL/api/v1/query. Basic
	// auth credentials in the URL are sent but never appear in errors.
	URL string
	// Query is the PromQL expression to evaluate.
	Query string
	// Timeout bounds one evaluation, both the HTTP round trip and the
	// server's evaluation (sent as the timeout parameter). Zero means
	// [DefaultQueryTimeout]; negative is an error.
	Timeout time.Duration
	// RoundTripper carries the requests; nil means client_golang's
	// api.DefaultRoundTripper. Tests pass fakes here. Whichever it is,
	// answers are cut off at [MaxAnswerBytes].
	RoundTripper http.RoundTripper
}

// Query is one PromQL instant query, evaluated on demand against one
// Prometheus server: the sampler behind a signals.prometheus.queries entry.
// It holds no state between calls and is safe for concurrent use; it starts
// no goroutines. It does not schedule itself: the caller calls
// [Query.Sample] every interval.
type Query struct {
	api     promv1.API
	query   string
	where   string // the URL without credentials, for errors
	timeout time.Duration
}

// NewQuery checks o and returns its Query. It makes no request: an
// unreachable server shows up as errors from Sample. The URL must be an
// absolute http or https URL with a host, the query must not be empty and
// the timeout must not be negative; each error names the bad field.
func NewQuery(o QueryOptions) (*Query, error) {
	u, err := url.Parse(o.URL)
	if err != nil {
		// url.Error quotes the raw URL, credentials and all.
		return nil, errors.New("signals: prometheus url is not a URL")
	}
	where := withoutCredentials(u)
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("signals: prometheus url %q: want an http or https URL", where)
	case u.Host == "":
		return nil, fmt.Errorf("signals: prometheus url %q: no host", where)
	case o.Query == "":
		return nil, errors.New("signals: prometheus query is empty")
	case o.Timeout < 0:
		return nil, fmt.Errorf("signals: prometheus query %q: negative timeout %v", o.Query, o.Timeout)
	}
	rt := o.RoundTripper
	if rt == nil {
		rt = api.DefaultRoundTripper
	}
	client, err := api.NewClient(api.Config{Address: o.URL, RoundTripper: cappedTransport{rt}})
	if err != nil {
		return nil, fmt.Errorf("signals: prometheus url %q: %w", where, err)
	}
	timeout := o.Timeout
	if timeout == 0 {
		timeout = DefaultQueryTimeout
	}
	return &Query{api: promv1.NewAPI(client), query: o.Query, where: where, timeout: timeout}, nil
}

// Sample evaluates the query at now and returns its value:
//
//   - a scalar reads as its value;
//   - a vector reads as the largest of its finite samples, whatever their
//     labels (NaN and infinite samples are skipped);
//   - an empty vector, a vector of only NaN samples or a NaN scalar is
//     [ErrAbsent];
//   - an infinite scalar, a vector whose samples are infinite or NaN but not
//     all NaN, a matrix or a string is an error;
//   - so is a failed request: an unreachable server, an HTTP or PromQL error,
//     an answer over [MaxAnswerBytes] ([ErrAnswerTooLarge]), or no answer
//     within the timeout.
//
// now is sent as the evaluation time; the zero time lets the server use
// its own clock. When ctx ends first, Sample returns ctx.Err() unchanged.
// Every other error names the query and the URL (without credentials).
func (q *Query) Sample(ctx context.Context, now time.Time) (float64, error) {
	evalCtx, cancel := context.WithTimeout(ctx, q.timeout)
	defer cancel()
	res, _, _, err := q.api.Query(evalCtx, q.query, now, promv1.WithTimeout(q.timeout))
	switch {
	case err != nil && ctx.Err() != nil:
		return 0, ctx.Err()
	case err != nil && evalCtx.Err() != nil:
		return 0, q.errorf("no answer within %v: %w", q.timeout, evalCtx.Err())
	case err != nil:
		return 0, q.errorf("%w", withoutURL(err))
	}
	v, err := value(res)
	if err != nil {
		return 0, q.errorf("%w", err)
	}
	return v, nil
}

// value reads one query result as described on [Query.Sample].
func value(res model.Value) (float64, error) {
	switch r := res.(type) {
	case *model.Scalar:
		return number(float64(r.Value), "scalar")
	case model.Vector:
		if len(r) == 0 {
			return 0, fmt.Errorf("empty result: %w", ErrAbsent)
		}
		best, found, nan := math.Inf(-1), false, 0
		for _, s := range r {
			switch x := float64(s.Value); {
			case math.IsNaN(x):
				nan++
			case !math.IsInf(x, 0):
				best, found = max(best, x), true
			}
		}
		switch {
		case found:
			return best, nil
		case nan == len(r):
			return 0, fmt.Errorf("all %d samples are NaN: %w", len(r), ErrAbsent)
		default:
			return 0, fmt.Errorf("no finite sample (%d infinite, %d NaN)", len(r)-nan, nan)
		}
	case nil:
		return 0, errors.New("no result")
	default:
		return 0, fmt.Errorf("got a %s result, want a scalar or an instant vector", res.Type())
	}
}

// number reads a scalar: NaN is absent, an infinity is an error.
func number(x float64, what string) (float64, error) {
	switch {
	case math.IsNaN(x):
		return 0, fmt.Errorf("%s is NaN: %w", what, ErrAbsent)
	case math.IsInf(x, 0):
		return 0, fmt.Errorf("%s is %v, want a finite number", what, x)
	}
	return x, nil
}

func (q *Query) errorf(format string, args ...any) error {
	return fmt.Errorf("prometheus query %q at %s: "+format, append([]any{q.query, q.where}, args...)...)
}

// withoutCredentials renders u without its user information.
func withoutCredentials(u *url.URL) string {
	c := *u
	c.User = nil
	return c.String()
}

// withoutURL drops the request URL that net/http puts in transport errors:
// the caller names the server already, and the URL may carry a user name.
func withoutURL(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Err
	}
	return err
}

// cappedTransport cuts every answer's body off at MaxAnswerBytes.
type cappedTransport struct{ next http.RoundTripper }

func (t cappedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	resp.Body = &cappedBody{rc: resp.Body}
	return resp, nil
}

// cappedBody fails with ErrAnswerTooLarge once more than MaxAnswerBytes
// have been read, so that the reader stops growing its buffer there.
type cappedBody struct {
	rc io.ReadCloser
	n  int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.n > MaxAnswerBytes {
		return 0, ErrAnswerTooLarge
	}
	if room := MaxAnswerBytes + 1 - b.n; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := b.rc.Read(p)
	b.n += int64(n)
	if b.n > MaxAnswerBytes {
		return n, ErrAnswerTooLarge
	}
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }
