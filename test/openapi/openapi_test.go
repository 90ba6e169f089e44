package openapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/degraded/degraded/api"
	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/controller/controllertest"
	"github.com/degraded/degraded/levels"
	"github.com/degraded/degraded/signals"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// specCheck says what api/openapi.yaml must make of a request.
type specCheck int

const (
	// specAccepts: the document accepts the request.
	specAccepts specCheck = iota
	// specRejects: the document rejects it too, as the server does.
	specRejects
	// specSilent: the document cannot tell (a configured limit, a pair of
	// parameters that must come together, a body only the server parses).
	specSilent
)

// exchange is one request to the running server and the status it must get.
type exchange struct {
	name   string
	method string
	target string
	header []string // name, value pairs
	body   string
	want   int
	spec   specCheck
	// stream leaves a 200's event stream open for the caller to close.
	stream bool
}

// contract is api/openapi.yaml with a record of what the exchanges showed.
type contract struct {
	doc    *openapi3.T
	router routers.Router
	base   string                  // the document's server URL, for routing
	seen   map[string]map[int]bool // "GET /v1/level" -> statuses answered
}

func loadContract(t *testing.T) *contract {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(specPath)
	if err != nil {
		t.Fatalf("load openapi.yaml: %v", err)
	}
	if doc.OpenAPI != "3.1.0" || !doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi.yaml is OpenAPI %q, want 3.1.0", doc.OpenAPI)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("openapi.yaml is not a valid OpenAPI document: %v", err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &contract{doc: doc, router: router, base: doc.Servers[0].URL, seen: map[string]map[int]bool{}}
}

func (c *contract) saw(key string, status int) {
	if c.seen[key] == nil {
		c.seen[key] = map[int]bool{}
	}
	c.seen[key][status] = true
}

// do sends ex to the server at url and validates the exchange against the
// document: the request as specCheck says, the status, the headers, the
// content type and the body. With ex.stream and a 200 the body is left open
// for the caller to close; otherwise it is read and closed.
func (c *contract) do(t *testing.T, client *http.Client, url string, ex exchange) *http.Response {
	t.Helper()
	ctx := context.Background()
	vreq := httptest.NewRequest(ex.method, c.base+ex.target, strings.NewReader(ex.body))
	req, err := http.NewRequest(ex.method, url+ex.target, strings.NewReader(ex.body))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*http.Request{vreq, req} {
		if ex.body != "" {
			r.Header.Set("Content-Type", "application/json")
		}
		for i := 0; i+1 < len(ex.header); i += 2 {
			r.Header.Set(ex.header[i], ex.header[i+1])
		}
	}
	if h := req.Header.Get("Host"); h != "" { // the server's Host; vreq stays routable
		req.Host = h
		req.Header.Del("Host")
	}
	route, params, routeErr := c.router.FindRoute(vreq)

	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var body []byte
	switch mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); {
	case mt == "text/event-stream" && ex.stream:
		defer func() {
			if t.Failed() { // the caller may never get it: end the stream here
				resp.Body.Close()
			}
		}()
	case mt == "text/event-stream":
		resp.Body.Close() // never read an endless body
	default:
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	if resp.StatusCode != ex.want {
		t.Fatalf("%s %s: %d %s, want %d", ex.method, ex.target, resp.StatusCode, body, ex.want)
	}

	if routeErr != nil {
		// Unknown paths and methods are described in info.description: an
		// Error body, and for 405 an Allow header.
		want := map[int]error{http.StatusNotFound: routers.ErrPathNotFound, http.StatusMethodNotAllowed: routers.ErrMethodNotAllowed}[resp.StatusCode]
		if want == nil || !errors.Is(routeErr, want) {
			t.Fatalf("%s %s: the document has no route (%v), yet the server answered %d", ex.method, ex.target, routeErr, resp.StatusCode)
		}
		c.saw("unlisted", resp.StatusCode)
		c.checkUnlisted(t, resp, body)
		return resp
	}

	input := &openapi3filter.RequestValidationInput{
		Request: vreq, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true},
	}
	reqErr := openapi3filter.ValidateRequest(ctx, input)
	switch {
	case ex.spec == specAccepts && reqErr != nil:
		t.Errorf("the document rejects a request the server takes as written: %v", reqErr)
	case ex.spec == specRejects && reqErr == nil:
		t.Errorf("the document accepts a request the server rejects with %d", resp.StatusCode)
	}
	c.saw(ex.method+" "+route.Path, resp.StatusCode)

	ref := route.Operation.Responses.Status(resp.StatusCode)
	if ref == nil {
		t.Fatalf("%s %s: status %d is not documented", ex.method, route.Path, resp.StatusCode)
	}
	doc := ref.Value
	if resp.StatusCode == http.StatusNotModified {
		// openapi3filter skips 304; check its headers and empty body here.
		checkRequiredHeaders(t, doc, resp.Header)
		if len(body) != 0 {
			t.Errorf("304 with a body: %q", body)
		}
		return resp
	}
	ct := resp.Header.Get("Content-Type")
	var media *openapi3.MediaType
	if len(doc.Content) > 0 {
		if media = doc.Content.Get(ct); media == nil {
			t.Fatalf("%s %s %d: Content-Type %q is not documented", ex.method, route.Path, resp.StatusCode, ct)
		}
	} else if len(body) != 0 {
		t.Errorf("%s %s %d: a body the document does not describe: %q", ex.method, route.Path, resp.StatusCode, body)
	}
	// Bodies openapi3filter has no decoder for (HTML, SSE, protobuf) are
	// checked here: content type above, schema below; headers by the filter.
	mt, _, _ := mime.ParseMediaType(ct)
	opaque := media != nil && openapi3filter.RegisteredBodyDecoder(mt) == nil
	rin := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: input,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true, ExcludeResponseBody: opaque},
	}
	rin.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(ctx, rin); err != nil {
		t.Errorf("%s %s %d does not match the document: %v\nbody: %s", ex.method, route.Path, resp.StatusCode, err, body)
	}
	if opaque && media.Schema != nil && !ex.stream {
		if err := media.Schema.Value.VisitJSON(string(body), openapi3.EnableJSONSchema2020()); err != nil {
			t.Errorf("%s %s %d body: %v", ex.method, route.Path, resp.StatusCode, err)
		}
	}
	return resp
}

// checkUnlisted validates a 404 or 405 for a path or method the document
// does not list: an Error body, and for 405 the methods in Allow.
func (c *contract) checkUnlisted(t *testing.T, resp *http.Response, body []byte) {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%d: Content-Type %q, want application/json", resp.StatusCode, ct)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%d: body %q: %v", resp.StatusCode, body, err)
	}
	if err := c.doc.Components.Schemas["Error"].Value.VisitJSON(v, openapi3.EnableJSONSchema2020(), openapi3.VisitAsResponse()); err != nil {
		t.Errorf("%d: body %s is not an Error: %v", resp.StatusCode, body, err)
	}
	if resp.StatusCode == http.StatusMethodNotAllowed && resp.Header.Get("Allow") == "" {
		t.Error("405 without Allow")
	}
}

func checkRequiredHeaders(t *testing.T, r *openapi3.Response, h http.Header) {
	t.Helper()
	for name, ref := range r.Headers {
		v := h.Get(name)
		if v == "" {
			if ref.Value.Required {
				t.Errorf("header %s is missing", name)
			}
			continue
		}
		if s := ref.Value.Schema; s != nil && s.Value.Type.Is("string") {
			if err := s.Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
				t.Errorf("header %s: %v", name, err)
			}
		}
	}
}

// checkCoverage fails for every status the document promises that no
// exchange produced, so the document claims nothing untested.
func (c *contract) checkCoverage(t *testing.T) {
	t.Helper()
	for path, item := range c.doc.Paths.Map() {
		for method, op := range item.Operations() {
			key := method + " " + path
			for code := range op.Responses.Map() {
				status, err := strconv.Atoi(code)
				if err != nil {
					t.Errorf("%s: response %q is not a status code", key, code)
					continue
				}
				if !c.seen[key][status] {
					t.Errorf("%s: the document promises %d but no exchange produced it", key, status)
				}
			}
		}
	}
	for _, status := range []int{http.StatusNotFound, http.StatusMethodNotAllowed} {
		if !c.seen["unlisted"][status] {
			t.Errorf("info.description promises %d for unlisted paths and methods, but no exchange produced it", status)
		}
	}
}

// failingStore loads nothing and saves until full is set: the disk fills
// up after the controller reserved its sequence numbers.
type failingStore struct{ full *atomic.Bool }

func (failingStore) Load() (*controller.Persisted, bool, error) { return nil, false, nil }
func (f failingStore) Save(*controller.Persisted) error {
	if f.full.Load() {
		return errors.New("disk full")
	}
	return nil
}

// TestOpenAPI drives every endpoint of the real server over HTTP, happy
// paths and each kind of error, and validates every exchange against
// api/openapi.yaml.
func TestOpenAPI(t *testing.T) {
	c := loadContract(t)

	var badConfig atomic.Bool
	pushed := &signals.Pushed{}
	pushed.Configure([]signals.PushedSignal{{Name: "queue_depth", TTL: time.Minute}}, []levels.Signal{"p95"})
	tl := newRecordedTimeline(t)
	r := newIdleRig(t, api.Deps{Timeline: tl, Pusher: pushed, SSE: api.SSE{MaxSubscribers: 1, Heartbeat: time.Hour}, MaxStreams: 1, Reload: func(string) error {
		if badConfig.Load() {
			return errBadConfig
		}
		return nil
	}})
	r.tokens.Store(&api.Tokens{Admin: "adm", Report: "rep"})
	srv := httptest.NewServer(r.h)
	defer srv.Close()
	client := srv.Client()
	defer client.CloseIdleConnections()

	admin := []string{"Authorization", "Bearer adm"}
	report := []string{"Authorization", "Bearer rep"}
	jsonCT := []string{"Content-Type", "application/json"}
	var streams []io.Closer // open until the test ends
	defer func() {
		for _, s := range streams {
			s.Close()
		}
	}()
	run := func(exs ...exchange) {
		t.Helper()
		for _, ex := range exs {
			name := ex.name
			if name == "" {
				name = ex.method + " " + ex.target
			}
			t.Run(name, func(t *testing.T) {
				if resp := c.do(t, client, srv.URL, ex); ex.stream && resp.StatusCode == http.StatusOK {
					streams = append(streams, resp.Body)
				}
			})
		}
	}
	started := false
	check := func() {
		if !started {
			started = true
			controllertest.Run(t, r.c) // the first health check
			return
		}
		r.c.Check(context.Background())
	}

	// Before the first health check.
	run(
		exchange{method: "GET", target: "/healthz", want: 200},
		exchange{method: "GET", target: "/readyz", want: 503},
		exchange{name: "samples before any check", method: "GET", target: "/v1/samples", want: 200},
		exchange{name: "stream before any check", method: "GET", target: "/v1/level/stream?samples=1", want: 200, stream: true},
	)
	t.Run("dashboard", func(t *testing.T) {
		resp := c.do(t, client, srv.URL, exchange{method: "GET", target: "/", want: 200})
		c.do(t, client, srv.URL, exchange{method: "GET", target: "/", header: []string{"If-None-Match", resp.Header.Get("ETag")}, want: 304})
	})
	check()

	// At Normal.
	run(
		exchange{method: "GET", target: "/readyz", want: 200},
		exchange{method: "GET", target: "/v1/samples", want: 200},
		exchange{method: "GET", target: "/v1/level", want: 200},
		exchange{name: "If-None-Match current", method: "GET", target: "/v1/level", header: []string{"If-None-Match", `W/"0"`}, want: 304},
		exchange{name: "If-None-Match stale", method: "GET", target: "/v1/level", header: []string{"If-None-Match", `W/"9"`}, want: 200},
		exchange{name: "long-poll ends at once", method: "GET", target: "/v1/level?wait=0s&after=5", want: 200},
		exchange{method: "GET", target: "/v1/level?wait=soon&after=0", want: 400, spec: specRejects},
		exchange{method: "GET", target: "/v1/level?wait=1s&after=-1", want: 400, spec: specRejects},
		exchange{name: "wait without after", method: "GET", target: "/v1/level?wait=1s", want: 400, spec: specSilent},
		exchange{method: "GET", target: "/v1/admit?priority=0", want: 204},
		exchange{method: "GET", target: "/v1/admit?priority=high", want: 400, spec: specRejects},
		exchange{method: "GET", target: "/v1/admit?priority=-1", want: 400, spec: specRejects},
		exchange{method: "GET", target: "/v1/admit?priority=2147483648", want: 400, spec: specRejects},
		exchange{method: "GET", target: "/v1/admit", want: 400, spec: specRejects},
		exchange{method: "GET", target: "/v1/admit?priority=1&deny_status=500", want: 400, spec: specRejects},
		exchange{method: "GET", target: "/v1/levels", want: 200},
		exchange{method: "GET", target: "/v1/history", want: 200},
		exchange{method: "GET", target: "/v1/history?limit=0", want: 400, spec: specRejects},
		exchange{method: "GET", target: "/v1/history?limit=ten", want: 400, spec: specRejects},
		exchange{method: "GET", target: "/v1/override", want: 200},
		exchange{method: "GET", target: "/metrics", want: 200},
		exchange{name: "metrics as protobuf", method: "GET", target: "/metrics", header: []string{"Accept", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"}, want: 200},
	)

	// Outcomes: the report token, and every bad body.
	big := `{"success":1` + strings.Repeat(" ", 70<<10) + `}`
	run(
		exchange{name: "outcomes without a token", method: "POST", target: "/v1/outcomes", body: `{"success":1}`, want: 401},
		exchange{name: "outcomes with a wrong token", method: "POST", target: "/v1/outcomes", body: `{"success":1}`, header: []string{"Authorization", "Bearer nope"}, want: 401},
		exchange{name: "outcomes with the admin token", method: "POST", target: "/v1/outcomes", body: `{"success":1}`, header: admin, want: 202},
		exchange{name: "push a signal", method: "PUT", target: "/v1/signals/queue_depth", body: `{"value":1234.5}`, header: report, want: 204},
		exchange{name: "push with the admin token", method: "PUT", target: "/v1/signals/queue_depth", body: `{"value":1}`, header: admin, want: 204},
		exchange{name: "push without a token", method: "PUT", target: "/v1/signals/queue_depth", body: `{"value":1}`, want: 401},
		exchange{name: "push an unknown signal", method: "PUT", target: "/v1/signals/nope", body: `{"value":1}`, header: report, want: 404},
		exchange{name: "push a queried signal", method: "PUT", target: "/v1/signals/p95", body: `{"value":1}`, header: report, want: 409},
		exchange{name: "push without a value", method: "PUT", target: "/v1/signals/queue_depth", body: `{}`, header: report, want: 400, spec: specRejects},
		exchange{name: "push text/plain", method: "PUT", target: "/v1/signals/queue_depth", body: `{"value":1}`, header: append([]string{"Content-Type", "text/plain"}, report...), want: 415, spec: specRejects},
		exchange{name: "push over 64 KiB", method: "PUT", target: "/v1/signals/queue_depth", body: big, header: report, want: 413, spec: specSilent},
		exchange{name: "outcomes unknown field", method: "POST", target: "/v1/outcomes", body: `{"success":1,"failures":2}`, header: report, want: 400, spec: specRejects},
		exchange{name: "outcomes negative", method: "POST", target: "/v1/outcomes", body: `{"success":-1}`, header: report, want: 400, spec: specRejects},
		exchange{name: "outcomes over 1e9", method: "POST", target: "/v1/outcomes", body: `{"failure":1000000001}`, header: report, want: 400, spec: specRejects},
		exchange{name: "outcomes float", method: "POST", target: "/v1/outcomes", body: `{"success":1.5}`, header: report, want: 400, spec: specRejects},
		exchange{name: "outcomes string count", method: "POST", target: "/v1/outcomes", body: `{"success":"1"}`, header: report, want: 400, spec: specRejects},
		exchange{name: "outcomes null count", method: "POST", target: "/v1/outcomes", body: `{"success":null}`, header: report, want: 400, spec: specRejects},
		exchange{name: "outcomes not JSON", method: "POST", target: "/v1/outcomes", body: `success=1`, header: report, want: 400, spec: specRejects},
		exchange{name: "outcomes truncated", method: "POST", target: "/v1/outcomes", body: `{"success":1`, header: report, want: 400, spec: specRejects},
		exchange{name: "outcomes empty object", method: "POST", target: "/v1/outcomes", body: `{}`, header: report, want: 400, spec: specRejects},
		exchange{name: "outcomes empty body", method: "POST", target: "/v1/outcomes", header: append(jsonCT, report...), want: 400, spec: specRejects},
		exchange{name: "outcomes two values", method: "POST", target: "/v1/outcomes", body: `{"success":1}{"success":1}`, header: report, want: 400, spec: specSilent},
		exchange{name: "outcomes text/plain", method: "POST", target: "/v1/outcomes", body: `{"success":1}`, header: append([]string{"Content-Type", "text/plain"}, report...), want: 415, spec: specRejects},
		exchange{name: "outcomes over 64 KiB", method: "POST", target: "/v1/outcomes", body: big, header: report, want: 413, spec: specSilent},
		exchange{name: "outcomes", method: "POST", target: "/v1/outcomes", body: `{"success":85,"failure":15}`, header: report, want: 202},
		exchange{name: "outcomes with latencies", method: "POST", target: "/v1/outcomes", body: `{"success":10,"latency_counts":[0,0,0,0,0,0,5,5,0,0,0,0,0,0]}`, header: report, want: 202},
		exchange{name: "outcomes with 3 latency counts", method: "POST", target: "/v1/outcomes", body: `{"success":10,"latency_counts":[1,2,3]}`, header: report, want: 400, spec: specRejects},
		exchange{name: "outcomes with more latencies than outcomes", method: "POST", target: "/v1/outcomes", body: `{"success":1,"latency_counts":[0,0,0,0,0,0,5,5,0,0,0,0,0,0]}`, header: report, want: 400, spec: specSilent},
	)
	check() // 15% errors: Major, threshold 50

	// At Major: shed answers, then an override.
	run(
		exchange{name: "level at Major", method: "GET", target: "/v1/level", want: 200},
		exchange{method: "GET", target: "/v1/admit?priority=50", want: 204},
		exchange{method: "GET", target: "/v1/admit?priority=49", want: 503},
		exchange{method: "GET", target: "/v1/admit?priority=49&deny_status=403", want: 403},
		exchange{method: "GET", target: "/v1/admit?priority=49&deny_status=429", want: 429},
		exchange{method: "GET", target: "/v1/admit?priority=49&deny_status=503", want: 503},
	)

	// Shadow mode at Major: everything admitted, what would be shed marked
	// and counted; would_shed reports.
	r.setShadow(t, true)
	run(
		exchange{name: "shadow admits what it would shed", method: "GET", target: "/v1/admit?priority=49&deny_status=403", want: 204},
		exchange{name: "shadow admits", method: "GET", target: "/v1/admit?priority=50", want: 204},
		exchange{name: "outcomes with would_shed", method: "POST", target: "/v1/outcomes", body: `{"success":5,"would_shed":{"Major":12,"Gone":1}}`, header: report, want: 202},
		exchange{name: "would_shed alone", method: "POST", target: "/v1/outcomes", body: `{"would_shed":{"Minor":1}}`, header: report, want: 202},
		exchange{name: "would_shed negative", method: "POST", target: "/v1/outcomes", body: `{"success":1,"would_shed":{"Major":-1}}`, header: report, want: 400, spec: specRejects},
		exchange{name: "would_shed over 1e9", method: "POST", target: "/v1/outcomes", body: `{"would_shed":{"Major":1000000001}}`, header: report, want: 400, spec: specRejects},
		exchange{name: "would_shed not an object", method: "POST", target: "/v1/outcomes", body: `{"would_shed":[12]}`, header: report, want: 400, spec: specRejects},
		exchange{name: "level in shadow mode", method: "GET", target: "/v1/level", want: 200},
	)
	t.Run("shadow marks and counts", func(t *testing.T) {
		resp := c.do(t, client, srv.URL, exchange{method: "GET", target: "/v1/admit?priority=0", want: 204})
		if got := resp.Header.Get("X-Degraded-Would-Shed"); got != "1" {
			t.Errorf("X-Degraded-Would-Shed %q, want 1", got)
		}
		var doc struct {
			Shadow  bool `json:"shadow"`
			Reports struct {
				WouldShed map[string]int64 `json:"would_shed"`
			} `json:"reports"`
		}
		lv, err := client.Get(srv.URL + "/v1/level")
		if err != nil {
			t.Fatal(err)
		}
		defer lv.Body.Close()
		if err := json.NewDecoder(lv.Body).Decode(&doc); err != nil {
			t.Fatal(err)
		}
		if w := doc.Reports.WouldShed; !doc.Shadow || w["Major"] != 14 || w["Minor"] != 1 || w["unknown"] != 1 {
			t.Errorf("shadow %v would_shed %v, want shadow true, Major 14 (12 reported, 2 admitted), Minor 1, unknown 1", doc.Shadow, w)
		}
	})
	r.setShadow(t, false)
	override := `{"level":"Moderate","mode":"floor","ttl":"15m","reason":"INC-42"}`
	run(
		exchange{name: "override without a token", method: "PUT", target: "/v1/override", body: override, want: 401},
		exchange{name: "override with the report token", method: "PUT", target: "/v1/override", body: override, header: report, want: 401},
		exchange{name: "override unknown level", method: "PUT", target: "/v1/override", body: `{"level":"Panic","ttl":"1m","reason":"x"}`, header: admin, want: 400, spec: specSilent},
		exchange{name: "override bad ttl", method: "PUT", target: "/v1/override", body: `{"level":"Major","ttl":"forever","reason":"x"}`, header: admin, want: 400, spec: specRejects},
		exchange{name: "override ttl over the maximum", method: "PUT", target: "/v1/override", body: `{"level":"Major","ttl":"48h","reason":"x"}`, header: admin, want: 400, spec: specSilent},
		exchange{name: "override ttl under 1s", method: "PUT", target: "/v1/override", body: `{"level":"Major","ttl":"500ms","reason":"x"}`, header: admin, want: 400, spec: specSilent},
		exchange{name: "override no reason", method: "PUT", target: "/v1/override", body: `{"level":"Major","ttl":"1m"}`, header: admin, want: 400, spec: specRejects},
		exchange{name: "override reason too long", method: "PUT", target: "/v1/override", body: `{"level":"Major","ttl":"1m","reason":"` + strings.Repeat("x", 501) + `"}`, header: admin, want: 400, spec: specRejects},
		exchange{name: "override bad mode", method: "PUT", target: "/v1/override", body: `{"level":"Major","mode":"max","ttl":"1m","reason":"x"}`, header: admin, want: 400, spec: specRejects},
		exchange{name: "override unknown field", method: "PUT", target: "/v1/override", body: `{"level":"Major","ttl":"1m","reason":"x","until":"noon"}`, header: admin, want: 400, spec: specRejects},
		exchange{name: "override not JSON", method: "PUT", target: "/v1/override", body: `level=Major`, header: admin, want: 400, spec: specRejects},
		exchange{name: "override text/plain", method: "PUT", target: "/v1/override", body: override, header: append([]string{"Content-Type", "text/plain"}, admin...), want: 415, spec: specRejects},
		exchange{name: "override over 64 KiB", method: "PUT", target: "/v1/override", body: `{"level":"Major","ttl":"1m","reason":"x"` + strings.Repeat(" ", 70<<10) + `}`, header: admin, want: 413, spec: specSilent},
		exchange{name: "override floor", method: "PUT", target: "/v1/override", body: override, header: admin, want: 200},
		exchange{name: "override pin by default", method: "PUT", target: "/v1/override", body: `{"level":"Major","ttl":"15m","reason":"INC-43"}`, header: admin, want: 200},
		exchange{name: "override in force", method: "GET", target: "/v1/override", want: 200},
		exchange{name: "level under an override", method: "GET", target: "/v1/level", want: 200},
		exchange{name: "history after changes", method: "GET", target: "/v1/history?limit=2", want: 200},
		exchange{name: "clear without a token", method: "DELETE", target: "/v1/override", want: 401},
		exchange{name: "clear", method: "DELETE", target: "/v1/override", header: admin, want: 200},
		exchange{name: "clear again is a no-op", method: "DELETE", target: "/v1/override", header: admin, want: 200},
	)
	check()

	// Reload, samples after checks, and paths and methods the server does not serve.
	run(
		exchange{name: "reload without a token", method: "POST", target: "/-/reload", want: 401},
		exchange{name: "reload with the report token", method: "POST", target: "/-/reload", header: report, want: 401},
		exchange{name: "reload", method: "POST", target: "/-/reload", header: admin, want: 200},
		exchange{name: "samples after checks", method: "GET", target: "/v1/samples", want: 200},
		exchange{name: "unknown path", method: "GET", target: "/v2/level", want: 404},
		exchange{name: "unknown path under /v1", method: "GET", target: "/v1/levels/Major", want: 404},
		exchange{name: "DELETE /v1/level", method: "DELETE", target: "/v1/level", want: 405},
		exchange{name: "POST /v1/levels", method: "POST", target: "/v1/levels", body: `{}`, want: 405},
		exchange{name: "GET /v1/outcomes", method: "GET", target: "/v1/outcomes", want: 405},
		exchange{name: "GET /-/reload", method: "GET", target: "/-/reload", want: 405},
	)
	badConfig.Store(true)
	run(exchange{name: "reload of an invalid config", method: "POST", target: "/-/reload", header: admin, want: 400})

	// The recorded timeline: the admin token, RFC 3339 bounds, the
	// History view's summary with points, 404 when recording is off.
	now := time.Now().UTC()
	last := func(d time.Duration) string { return now.Add(-d).Format(time.RFC3339) }
	run(
		exchange{name: "timeline", method: "GET", target: "/v1/timeline?from=2026-12-01T10:00:00Z&to=2026-12-01T11:00:00Z", header: admin, want: 200},
		exchange{name: "timeline lines", method: "GET", target: "/v1/timeline?from=" + last(5*time.Minute), header: admin, want: 200},
		exchange{name: "timeline series", method: "GET", target: "/v1/timeline?points=120&from=" + last(15*time.Minute), header: admin, want: 200},
		exchange{name: "timeline series of the last hour", method: "GET", target: "/v1/timeline?points=5000", header: admin, want: 200},
		exchange{name: "timeline series to in the future", method: "GET", target: "/v1/timeline?points=10&from=" + last(time.Hour) + "&to=" + now.Add(time.Hour).Format(time.RFC3339), header: admin, want: 200},
		exchange{name: "timeline series of an empty range", method: "GET", target: "/v1/timeline?points=10&from=2020-01-01T00:00:00Z&to=2020-01-01T01:00:00Z", header: admin, want: 200},
		exchange{name: "timeline series with too many points", method: "GET", target: "/v1/timeline?points=5001", header: admin, want: 400, spec: specRejects},
		exchange{name: "timeline series with no points", method: "GET", target: "/v1/timeline?points=0", header: admin, want: 400, spec: specRejects},
		exchange{name: "timeline series with points not a number", method: "GET", target: "/v1/timeline?points=many", header: admin, want: 400, spec: specRejects},
		exchange{name: "timeline series from in the future", method: "GET", target: "/v1/timeline?points=10&from=" + now.Add(time.Hour).Format(time.RFC3339), header: admin, want: 400, spec: specSilent},
		exchange{name: "timeline without a token", method: "GET", target: "/v1/timeline", want: 401},
		exchange{name: "timeline with the report token", method: "GET", target: "/v1/timeline", header: report, want: 401},
		exchange{name: "timeline with a bad from", method: "GET", target: "/v1/timeline?from=yesterday", header: admin, want: 400, spec: specSilent},
		exchange{name: "timeline to before from", method: "GET", target: "/v1/timeline?from=2026-12-02T00:00:00Z&to=2026-12-01T00:00:00Z", header: admin, want: 400, spec: specSilent},
	)
	tl.fail.Store(true)
	run(exchange{name: "timeline series that cannot be read", method: "GET", target: "/v1/timeline?points=10", header: admin, want: 500})
	tl.off.Store(true)
	run(exchange{name: "timeline with recording off", method: "GET", target: "/v1/timeline", header: admin, want: 404})

	// The subscriber limit and the stream cap: MaxSubscribers and
	// MaxStreams are 1 and one stream is open.
	run(
		exchange{name: "stream over the subscriber limit", method: "GET", target: "/v1/level/stream", want: 503},
		exchange{name: "long-poll over the stream cap", method: "GET", target: "/v1/level?wait=1s&after=999", want: 503},
		exchange{name: "long-poll that need not wait", method: "GET", target: "/v1/level?wait=1s&after=0", want: 200},
	)

	// Browser safety: a change from another origin is 403, token or not.
	evil := []string{"Origin", "https://evil.example"}
	run(
		exchange{name: "cross-site outcomes", method: "POST", target: "/v1/outcomes", body: `{"success":1}`, header: append(evil, report...), want: 403, spec: specSilent},
		exchange{name: "cross-site push", method: "PUT", target: "/v1/signals/queue_depth", body: `{"value":1}`, header: append(evil, report...), want: 403, spec: specSilent},
		exchange{name: "cross-site override", method: "PUT", target: "/v1/override", body: override, header: append(evil, admin...), want: 403, spec: specSilent},
		exchange{name: "cross-site clear", method: "DELETE", target: "/v1/override", header: append(evil, admin...), want: 403, spec: specSilent},
		exchange{name: "Origin null reload", method: "POST", target: "/-/reload", header: append([]string{"Origin", "null"}, admin...), want: 403, spec: specSilent},
	)

	// Without an admin token, a Host that is not loopback, the listen host
	// or allowed is 421 on every operation (DNS rebinding).
	open := newRig(t, api.Deps{Reload: func(string) error { return nil }, Timeline: newRecordedTimeline(t)})
	openSrv := httptest.NewServer(open.h)
	defer openSrv.Close()
	for path, item := range c.doc.Paths.Map() {
		for method := range item.Operations() {
			ex := exchange{name: "rebound " + method + " " + path, method: method, target: path, header: []string{"Host", "rebind.evil.example:8470"}, want: 421, spec: specSilent}
			if method == http.MethodPut || method == http.MethodPost {
				ex.body = "{}"
			}
			t.Run(ex.name, func(t *testing.T) { c.do(t, openSrv.Client(), openSrv.URL, ex) })
		}
	}
	openSrv.Client().CloseIdleConnections()

	// A state file that cannot be written: the change is not applied, 503.
	full := new(atomic.Bool)
	ctrl, err := controller.New(controller.Options{Table: testTable(t), Store: failingStore{full}})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, ctrl)
	if _, err := ctrl.SetOverride(controller.OverrideRequest{Level: "Minor", Mode: controller.ModePin, TTL: time.Hour, Reason: "before the disk filled"}); err != nil {
		t.Fatal(err)
	}
	full.Store(true)
	t.Cleanup(func() { full.Store(false) }) // the disk is freed before the final save
	// No stream: the API need not run.
	unsaved := httptest.NewServer(api.NewServer(api.Deps{Controller: ctrl, Outcomes: &window{}}).Handler())
	defer unsaved.Close()
	for _, ex := range []exchange{
		{name: "override not saved", method: "PUT", target: "/v1/override", body: override, want: 503},
		{name: "clear not saved", method: "DELETE", target: "/v1/override", want: 503},
		{name: "level with a state_file that cannot be saved", method: "GET", target: "/v1/level", want: 200},
	} {
		t.Run(ex.name, func(t *testing.T) { c.do(t, unsaved.Client(), unsaved.URL, ex) })
	}
	unsaved.Client().CloseIdleConnections()

	fleetExchanges(t, c)
	c.checkCoverage(t)
}
