package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/degraded/degraded/client"
	"github.com/degraded/degraded/config"
	"github.com/degraded/degraded/controller"
	rig "github.com/degraded/degraded/internal/daemon"
)

// pipeListener serves the daemon over net.Pipe, so that the walkthrough
// runs in a synctest bubble, in fake time.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8470} }

func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	cli, srv := net.Pipe()
	select {
	case l.conns <- srv:
		return cli, nil
	case <-l.done:
	case <-ctx.Done():
	}
	cli.Close()
	srv.Close()
	return nil, errors.New("connection refused")
}

// TestWalkthrough follows README.md against degraded.yaml: a daemon with
// that config, the shop, the traffic loop, failures, recovery, Do at each
// level, and the daemon stopping.
func TestWalkthrough(t *testing.T) {
	cfg, _, err := config.Load(config.LoadOptions{Path: "degraded.yaml"})
	if err != nil {
		t.Fatalf("degraded.yaml: %v", err)
	}
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"5s health checks", "20s dwell", "30s window"} {
		if !strings.Contains(strings.ReplaceAll(string(b), "\n", " "), want) {
			t.Errorf("README.md no longer says %q; check the config and this test", want)
		}
	}
	if cfg.HealthCheckInterval != 5*time.Second || cfg.MinimumLevelDuration != 20*time.Second || cfg.ErrorRateWindow != 30*time.Second {
		t.Fatalf("degraded.yaml: %s checks, %s dwell, %s window; the README says 5s, 20s, 30s",
			cfg.HealthCheckInterval, cfg.MinimumLevelDuration, cfg.ErrorRateWindow)
	}

	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()

		// 1. The daemon, with the demo config, wired as `degraded serve`
		// wires it (recovery_jitter and the rest of the defaults included).
		d, err := rig.New(cfg, rig.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(d.Close)
		ctl := d.Controller()
		wg.Go(func() { _ = d.Run(ctx) })
		ln := &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
		srv := &http.Server{Handler: d.Handler()}
		wg.Go(func() { _ = srv.Serve(ln) })
		defer srv.Close()

		// 3. The shop and its traffic loop.
		tr := &http.Transport{DialContext: ln.dial}
		defer tr.CloseIdleConnections()
		c, err := client.New("http://127.0.0.1:8470", client.WithHTTPClient(&http.Client{Transport: tr}),
			client.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _ = c.Run(ctx) })
		s := newShop(c)
		h := s.routes()
		get := func(method, path string, priority int) *httptest.ResponseRecorder {
			req := httptest.NewRequest(method, path, nil)
			if priority >= 0 {
				req.Header.Set("X-Priority", strconv.Itoa(priority))
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			return w
		}
		var mu sync.Mutex
		last := map[int]int{} // priority -> last status
		wg.Go(func() {
			for ctx.Err() == nil {
				for _, p := range []int{10, 40, 60, 95} {
					code := get("GET", "/products", p).Code
					mu.Lock()
					last[p] = code
					mu.Unlock()
				}
				time.Sleep(200 * time.Millisecond)
			}
		})
		lastCodes := func() map[int]int {
			mu.Lock()
			defer mu.Unlock()
			return map[int]int{10: last[10], 40: last[40], 60: last[60], 95: last[95]}
		}
		time.Sleep(40 * time.Second)
		synctest.Wait()
		if got := lastCodes(); got[10] != 200 || got[40] != 200 || got[60] != 200 || got[95] != 200 {
			t.Fatalf("at Normal the traffic loop gets %v, want 200 everywhere", got)
		}
		var page map[string]any
		json.Unmarshal(get("GET", "/products", -1).Body.Bytes(), &page)
		if page["also_bought"] == nil {
			t.Errorf("at Normal /products lacks also_bought: %v", page)
		}

		// 4. Make the shop fail: the level climbs, not straight to Severe.
		get("POST", "/admin/fail?rate=0.3", -1)
		start := time.Now()
		var path []string
		for time.Since(start) < 90*time.Second && ctl.State().Level != "Severe" {
			time.Sleep(time.Second)
			if l := ctl.State().Level; len(path) == 0 && l != "Normal" || len(path) > 0 && path[len(path)-1] != l {
				path = append(path, l)
			}
		}
		if ctl.State().Level != "Severe" {
			t.Fatalf("90s at 30%% failures: %s via %v, want Severe", ctl.State().Level, path)
		}
		t.Logf("escalation at 30%% failures: %v in %s", path, time.Since(start))
		if len(path) < 2 {
			t.Errorf("the level went %v: straight to Severe, but the README says it climbs while the window forgets the successes", path)
		}
		// Failures the load does not explain (the shop answers at once) are
		// a dependency's: Severe sheds the band below it whole, as the
		// table says, with no partial admission.
		synctest.Wait()
		if p := ctl.State().Partial; p != nil {
			t.Fatalf("at Severe with 30%% failures answered at once: partial admission %+v, want the band shed whole", *p)
		}
		time.Sleep(time.Second)
		if got := lastCodes(); got[10] != 503 || got[40] != 503 || got[60] != 503 || got[95] == 503 {
			t.Errorf("at Severe the traffic loop gets %v, want 503 for 10, 40, 60 and 95 served", got)
		}
		w := get("GET", "/products", 10)
		if w.Code != 503 || w.Header().Get("X-Degraded-Level") != "Severe" || w.Header().Get("Retry-After") == "" {
			t.Errorf("a shed answer: %d %v, want 503 with X-Degraded-Level Severe and Retry-After", w.Code, w.Header())
		}

		// 5. Recover: one level per 20s dwell, down to Normal.
		get("POST", "/admin/fail?rate=0", -1)
		before := ctl.State().Sequence
		for time.Since(start) < 10*time.Minute && ctl.State().Level != "Normal" {
			time.Sleep(time.Second)
		}
		var down []controller.Transition
		for _, tr := range ctl.History(100) {
			if tr.Sequence > before {
				down = append([]controller.Transition{tr}, down...)
			}
		}
		wantDown := []string{"Major", "Moderate", "Minor", "Normal"}
		for i, tr := range down {
			if i >= len(wantDown) || tr.To != wantDown[i] || !strings.HasPrefix(tr.Reason, "recovered:") {
				t.Errorf("recovery step %d: %s -> %s (%s), want one level down to %s", i, tr.From, tr.To, tr.Reason, wantDown[min(i, len(wantDown)-1)])
			}
			if i > 0 && tr.At.Sub(down[i-1].At) < cfg.MinimumLevelDuration {
				t.Errorf("recovery steps %s apart, want at least the 20s dwell", tr.At.Sub(down[i-1].At))
			}
		}
		for _, tr := range down {
			t.Logf("recovery: %s %s -> %s: %s", tr.At.Format(time.TimeOnly), tr.From, tr.To, tr.Reason)
		}
		if len(down) != len(wantDown) {
			t.Errorf("recovery went through %d steps, want %v", len(down), wantDown)
		}

		// 6. Do at each level, with the failures off.
		steps := []struct {
			level string
			code  int
			recs  string
		}{
			{"Moderate", 200, `["bestsellers"]`},
			{"Major", 200, `["bestsellers"]`},
			{"Severe", 503, ""},
			{"Minor", 200, `["oolong for you","a kettle that matches"]`},
		}
		for _, st := range steps {
			if _, err := ctl.SetOverride(controller.OverrideRequest{Level: st.level, Mode: controller.ModePin, TTL: time.Minute, Reason: "demo"}); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			w := get("GET", "/recommendations", -1)
			var body struct{ Recommendations json.RawMessage }
			json.Unmarshal(w.Body.Bytes(), &body)
			if w.Code != st.code || st.recs != "" && string(body.Recommendations) != st.recs {
				t.Errorf("at %s /recommendations: %d %s, want %d %s", st.level, w.Code, w.Body, st.code, st.recs)
			}
		}
		page = nil
		json.Unmarshal(get("GET", "/products", -1).Body.Bytes(), &page)
		if page["also_bought"] != nil || page["products"] == nil {
			t.Errorf("at Minor /products: %v, want products without also_bought", page)
		}
		if _, err := ctl.ClearOverride("alice"); err != nil {
			t.Fatal(err)
		}

		// 7. Stop the daemon: after a minute the shop fails open.
		srv.Close()
		time.Sleep(61 * time.Second)
		synctest.Wait()
		if !c.Stale() || get("GET", "/products", 0).Code != 200 {
			t.Errorf("a minute after the daemon stopped: stale %v, want stale and everything served", c.Stale())
		}
		cancel()
	})
}
