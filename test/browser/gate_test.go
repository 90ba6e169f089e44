package browser

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// gate stands between the browser and the daemon, a reverse proxy that
// can do what the daemon alone cannot be made to: go away (every
// connection cut, new ones closed at once, as a dead daemon's port does)
// and come back; hold GET /v1/levels until released (a slow table, for
// the first paint); set keys in every state document it passes on (a
// "partial", which the controller does not publish yet); and answer
// chosen paths with hand-written documents.
type gate struct {
	srv  *httptest.Server
	down atomic.Bool

	mu     sync.Mutex
	hold   chan struct{}              // non-nil: GET /v1/levels waits until it is closed
	patch  map[string]json.RawMessage // keys set in every state document
	answer map[string]string          // path -> JSON answered instead of the daemon's
}

func newGate(t *testing.T, backend string) *gate {
	t.Helper()
	target, err := url.Parse(backend)
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{patch: map[string]json.RawMessage{}, answer: map[string]string{}}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ModifyResponse = g.modify
	rp.ErrorLog = log.New(io.Discard, "", 0) // a cut stream is the point, not news
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.down.Load() {
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close() // as a port nobody listens on, near enough
			}
			return
		}
		g.mu.Lock()
		hold := g.hold
		body, ok := g.answer[r.URL.Path]
		g.mu.Unlock()
		if ok {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, body)
			return
		}
		if r.URL.Path == "/v1/levels" && hold != nil {
			select {
			case <-hold:
			case <-r.Context().Done():
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(g.srv.Close)
	return g
}

// setDown takes the daemon away (true), cutting every open connection,
// or brings it back (false).
func (g *gate) setDown(down bool) {
	g.down.Store(down)
	if down {
		g.srv.CloseClientConnections()
	}
}

// holdLevels makes GET /v1/levels wait; the function returned releases
// every request held and those to come.
func (g *gate) holdLevels() (release func()) {
	ch := make(chan struct{})
	g.mu.Lock()
	g.hold = ch
	g.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			g.hold = nil
			g.mu.Unlock()
			close(ch)
		})
	}
}

// set makes every state document carry key = value (JSON).
func (g *gate) set(key, value string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.patch[key] = json.RawMessage(value)
}

// serve answers path with body instead of asking the daemon.
func (g *gate) serve(path, body string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.answer[path] = body
}

// patched is doc with the gate's keys set when doc is a state document
// (it has a level and a sequence); anything else passes unchanged.
func (g *gate) patched(doc []byte) []byte {
	g.mu.Lock()
	patch := maps.Clone(g.patch)
	g.mu.Unlock()
	if len(patch) == 0 {
		return doc
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(doc, &m) != nil || m["level"] == nil || m["sequence"] == nil {
		return doc
	}
	maps.Copy(m, patch)
	out, err := json.Marshal(m)
	if err != nil {
		return doc
	}
	return out
}

// modify patches the daemon's answers: JSON bodies whole, event streams
// line by line as they come.
func (g *gate) modify(resp *http.Response) error {
	switch ct := resp.Header.Get("Content-Type"); {
	case strings.HasPrefix(ct, "application/json"):
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		b = g.patched(b)
		resp.Body = io.NopCloser(bytes.NewReader(b))
		resp.ContentLength = int64(len(b))
		resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
	case strings.HasPrefix(ct, "text/event-stream"):
		resp.Body = &eventPatcher{r: bufio.NewReader(resp.Body), c: resp.Body, g: g}
	}
	return nil
}

// eventPatcher patches the data lines of an event stream, one line per
// read, so that each event passes as soon as it arrives.
type eventPatcher struct {
	r   *bufio.Reader
	c   io.Closer
	g   *gate
	buf []byte
	err error
}

func (e *eventPatcher) Read(p []byte) (int, error) {
	for len(e.buf) == 0 {
		if e.err != nil {
			return 0, e.err
		}
		line, err := e.r.ReadString('\n')
		e.err = err
		if data, ok := strings.CutPrefix(line, "data: "); ok && strings.HasSuffix(data, "\n") {
			line = "data: " + string(e.g.patched([]byte(strings.TrimSuffix(data, "\n")))) + "\n"
		}
		e.buf = []byte(line)
	}
	n := copy(p, e.buf)
	e.buf = e.buf[n:]
	return n, nil
}

func (e *eventPatcher) Close() error { return e.c.Close() }
