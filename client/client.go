package client

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// FailMode decides admission while the client has no current state: before
// the first state arrives, and after StaleAfter without contact.
type FailMode int

const (
	// FailOpen admits every request and enables every feature. It is the
	// default: losing the daemon must not take the service down.
	FailOpen FailMode = iota
	// FailLastKnown keeps applying the last state received; before any
	// state arrives it admits everything, like FailOpen.
	FailLastKnown
	// FailClosed admits only PriorityCritical and disables every feature:
	// for services that must not run expensive work unsupervised.
	FailClosed
)

// String returns "open", "last-known" or "closed".
func (m FailMode) String() string {
	switch m {
	case FailOpen:
		return "open"
	case FailLastKnown:
		return "last-known"
	case FailClosed:
		return "closed"
	}
	return fmt.Sprintf("FailMode(%d)", int(m))
}

// Defaults of the options.
const (
	DefaultStaleAfter     = time.Minute
	DefaultReportInterval = time.Second
)

// Option configures a Client in New.
type Option func(*Client)

// WithToken sends "Authorization: Bearer token" on every request: a
// service passes the daemon's report token, an operator tool the admin
// token.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithStaleAfter sets how long without contact with the daemon (no event,
// ping or poll answer) before the state is stale and the fail mode decides
// (default DefaultStaleAfter). It also bounds how long a silent stream is
// kept before reconnecting. Values <= 0 keep the default.
func WithStaleAfter(d time.Duration) Option {
	return func(c *Client) {
		if d > 0 {
			c.staleAfter = d
		}
	}
}

// WithFailMode sets the fail mode (default FailOpen).
func WithFailMode(m FailMode) Option { return func(c *Client) { c.mode = m } }

// WithReportInterval sets how often Run flushes the counts of Record and
// Observe to the daemon (default DefaultReportInterval). Values <= 0 keep the default.
func WithReportInterval(d time.Duration) Option {
	return func(c *Client) {
		if d > 0 {
			c.reportEvery = d
		}
	}
}

// WithHTTPClient sets the HTTP client for every request. It must not set
// a Timeout shorter than a long-poll (about 40s): the client bounds each
// request itself. Default: a client with its own transport and no Timeout.
func WithHTTPClient(h *http.Client) Option {
	return func(c *Client) {
		if h != nil {
			c.http = h
		}
	}
}

// Client follows the daemon's level and answers admission questions from
// memory. Create it with New and keep it running with Run. All methods are
// safe for concurrent use; Allow, Admit and Feature are a lock-free atomic
// load and never allocate (Feature locks only in shadow mode while
// FailClosed decides). Without Run the client never contacts the daemon and
// the fail mode decides.
type Client struct {
	base        *url.URL
	token       string
	staleAfter  time.Duration
	mode        FailMode
	reportEvery time.Duration
	http        *http.Client
	ownHTTP     bool // http is the client's own: Run closes its idle connections
	log         *slog.Logger

	view        atomic.Pointer[view]
	names       atomic.Pointer[[]string] // level names in table order, once known
	lastContact atomic.Int64             // UnixNano of the last sign of life; 0: never

	mu    sync.Mutex // guards the writers of view and the callbacks below
	subs  map[int]func(old, new State)
	subID int

	running atomic.Bool

	success, failure atomic.Int64 // recorded, not yet taken by a flush
	// observed are Observe's counts by outcome (0 failure, 1 success) and
	// latency bucket, not yet taken by a flush: one counter per pair, so
	// that an outcome and its latency are always taken together.
	observed [2][numLatencyBuckets]atomic.Int64
	shadow   shadowCounts // would-shed counts of shadow mode, not yet taken by a flush
	// timing is the middleware's latency sampling, set by each flush.
	timing  timing
	pending counts // taken but not yet accepted; owned by the flusher
	// pendingShed are would-shed counts taken but not yet accepted, by
	// level name; nil when none. Owned by the flusher.
	pendingShed map[string]int64
	refusals    limiter     // refused reports logged; owned by the flusher
	contactLog  contactLog  // owned by Run's follow loop
	undelivered undelivered // owned by the flusher
	wentBack    limiter     // a sequence going back; owned by Run's follow loop

	// The admission report (tally.go, report.go). reporter is this
	// client's random id; partialKnown is whether the last state
	// document had the key "partial" (null or not), that is came from a
	// daemon that takes "admission"; ended holds the tallies of intervals
	// ended by a new sequence, not yet taken by a flush (guarded by mu);
	// newSequence wakes the reporter to send them at once; pendingAdm are
	// reports taken but not yet accepted (owned by the flusher); lastRate
	// is the offered load per second of the last interval of surgeAfter or
	// more (owned by the flusher); arrivalRefused is whether the daemon
	// refused "admission.arrival_seconds", as one older than the field
	// does (owned by the flusher).
	reporter       string
	partialKnown   atomic.Bool
	ended          []*tally
	newSequence    chan struct{}
	pendingAdm     []*admissionReport
	lastRate       float64
	arrivalRefused bool
}

// New returns a client of the daemon at baseURL (e.g.
// "http://127.0.0.1:8470"). It contacts nothing and starts no goroutine.
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil {
		return nil, fmt.Errorf("client: base url: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("client: base url must be http(s)://host[:port] (was %q)", baseURL)
	}
	c := &Client{
		base:        u,
		staleAfter:  DefaultStaleAfter,
		reportEvery: DefaultReportInterval,
		log:         slog.Default(),
		subs:        map[int]func(old, new State){},
		reporter:    strconv.FormatUint(rand.Uint64(), 16),
		newSequence: make(chan struct{}, 1),
	}
	for _, o := range opts {
		o(c)
	}
	if c.mode < FailOpen || c.mode > FailClosed {
		return nil, fmt.Errorf("client: unknown fail mode %d", int(c.mode))
	}
	if c.http == nil {
		c.http = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
		c.ownHTTP = true
	}
	c.view.Store(newView(nil, true, c.mode, &c.shadow, newTally(nil, time.Now())))
	return c, nil
}

// Addr returns the daemon's base URL as given to New.
func (c *Client) Addr() string { return c.base.String() }

// Allow reports whether a request of the given priority should be served
// now: priority >= the current level's threshold, or, when the state
// publishes partial admission (State.Partial), priority in the band
// [From, threshold) and a uniform draw below Fraction. PriorityCritical
// is always admitted; a negative priority counts as 0. It is an atomic
// load and a compare, plus one draw from math/rand/v2's per-thread
// generator for a priority in the band: no lock, no allocation.
//
// When the last state says shadow (State.Shadow), Allow admits everything,
// whatever the fail mode, and counts per level what it would have shed,
// partial sheds included (one more atomic add); Run reports the counts
// with the outcomes.
//
// Allow does not count its decisions for the admission report (see
// Admit): a service that calls it directly gives the daemon's law only
// its outcomes, the coarser input. Prefer Admit, Middleware or Do, which
// count what they decide.
func (c *Client) Allow(priority int) bool {
	return c.view.Load().admit(max(priority, 0))
}

// Feature reports whether the named feature is enabled: false when the
// current level disables it, or when FailClosed decides. It does not
// allocate.
//
// When the last state says shadow, every feature is enabled, whatever
// the fail mode, as Allow admits everything; what would have been
// disabled is counted per feature (see WouldDisable).
func (c *Client) Feature(name string) bool {
	v := c.view.Load()
	if v.allDisabled {
		if v.shadow {
			c.shadow.feature(name).Add(1)
			return true
		}
		return false
	}
	for i, f := range v.disabled {
		if f == name {
			if v.shadow {
				v.wouldDisable[i].Add(1)
				return true
			}
			return false
		}
	}
	return true
}

// State returns the last state received, even when stale; the zero State
// before the first one arrives.
func (c *Client) State() State {
	if st := c.view.Load().state; st != nil {
		return st.clone()
	}
	return State{}
}

// Stale reports whether the fail mode is deciding: no state has arrived
// yet, or none for StaleAfter without contact with the daemon.
func (c *Client) Stale() bool { return c.view.Load().stale }

// OnChange calls f with the previous and the new state each time a state
// with a new sequence arrives (the first one with a zero old State). Calls
// are made one at a time, in order, from Run's goroutine and outside any
// lock: keep f short. The returned func stops further calls.
func (c *Client) OnChange(f func(old, new State)) (cancel func()) {
	c.mu.Lock()
	id := c.subID
	c.subID++
	c.subs[id] = f
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.subs, id)
		c.mu.Unlock()
	}
}

// accept publishes a state document received from the daemon and, if its
// sequence is new, tells the OnChange callbacks.
func (c *Client) accept(st *State, now time.Time) {
	c.lastContact.Store(now.UnixNano())
	c.mu.Lock()
	prev := c.view.Load()
	old := prev.state
	t := prev.tally
	newSeq := old == nil || old.Sequence != st.Sequence
	if newSeq {
		// Decisions from here on are judged against st: a new interval.
		if len(c.ended) == maxEnded {
			c.ended = append(c.ended[:0], c.ended[1:]...) // the reporter is far behind: drop the oldest
		}
		t.end = now
		c.ended = append(c.ended, t)
		t = newTally(st, now)
	}
	c.view.Store(newView(st, false, c.mode, &c.shadow, t))
	var subs []func(old, new State)
	if newSeq || old.Level != st.Level {
		subs = make([]func(old, new State), 0, len(c.subs))
		for _, f := range c.subs {
			subs = append(subs, f)
		}
	}
	c.mu.Unlock()
	if old != nil && st.Sequence < old.Sequence {
		if ok, _ := c.wentBack.allow(now); ok {
			// Adopted all the same: refused, a daemon whose data_dir was
			// wiped would strand every client until it passed the old number.
			c.log.Warn("degraded's sequence went back: its saved state was lost or replaced (a new data_dir?); following it",
				slog.String("daemon", c.base.String()), slog.Uint64("was", old.Sequence), slog.Uint64("now", st.Sequence))
		}
	}
	if newSeq && old != nil {
		select { // wake the reporter: the ended interval goes out at once
		case c.newSequence <- struct{}{}:
		default:
		}
	}
	var o State
	if old != nil {
		o = old.clone()
	}
	for _, f := range subs {
		f(o, st.clone())
	}
}

// contact notes a sign of life (an SSE line, a poll answer); it ends
// staleness if a state is known.
func (c *Client) contact(now time.Time) {
	c.lastContact.Store(now.UnixNano())
	if v := c.view.Load(); v.stale && v.state != nil {
		c.setStale(false)
	}
}

// setStale republishes the view with the given staleness and reports
// whether that changed it.
func (c *Client) setStale(stale bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.view.Load()
	if v.stale == stale || !stale && v.state == nil {
		return false
	}
	c.view.Store(newView(v.state, stale, c.mode, &c.shadow, v.tally))
	return true
}

// APIError is a non-2xx answer from the daemon.
type APIError struct {
	// StatusCode is the HTTP status, e.g. 400 or 401.
	StatusCode int
	// Message is the daemon's "error" sentence, or the status text.
	Message string
}

// Error returns "daemon answered STATUS: MESSAGE".
func (e *APIError) Error() string {
	return fmt.Sprintf("daemon answered %d: %s", e.StatusCode, e.Message)
}

// ErrShed is returned by Do when the operation's priority is not admitted
// and no fallback applies at the current level.
var ErrShed = errors.New("client: shed at the current degradation level")
