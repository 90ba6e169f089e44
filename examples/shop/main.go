// Command shop is a toy web shop showing the degraded client: it sheds
// low-priority requests through the middleware, serves cheaper
// recommendations through Do when the level rises, hides a feature the
// level disables, and reports every served request's outcome. A
// /admin/fail endpoint makes it fail on purpose, to watch the daemon react.
//
//	go run ./examples/shop -listen 127.0.0.1:8080 -degraded http://127.0.0.1:8470
//
// The environment: DEGRADED_ADDR, the daemon's base URL when -degraded is
// not given, and DEGRADED_REPORT_TOKEN, the daemon's auth.report_token.
// GET /healthz is never shed, for probes.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"math"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/degraded/degraded/client"
)

func main() {
	defaultAddr := "http://127.0.0.1:8470"
	if v := os.Getenv("DEGRADED_ADDR"); v != "" {
		defaultAddr = v
	}
	listen := flag.String("listen", "127.0.0.1:8080", "address to serve the shop on (\":8080\" in a container, where probes come to the pod IP)")
	addr := flag.String("degraded", defaultAddr, "degraded daemon base URL (env DEGRADED_ADDR)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *listen, *addr, os.Getenv("DEGRADED_REPORT_TOKEN")); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, listen, addr, token string) error {
	c, err := client.New(addr, client.WithToken(token), client.WithFailMode(client.FailOpen))
	if err != nil {
		return err
	}
	c.OnChange(func(old, new client.State) {
		log.Printf("degradation level %s -> %s (threshold %d): %s", old.Level, new.Level, new.PriorityThreshold, new.Reason)
	})
	srv := &http.Server{Addr: listen, Handler: newShop(c).routes(), ReadHeaderTimeout: 5 * time.Second}

	var wg sync.WaitGroup
	wg.Go(func() { _ = c.Run(ctx) }) // returns after a last flush of outcomes
	wg.Go(func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	})
	log.Printf("shop on http://%s, following degraded at %s", listen, addr)
	err = srv.ListenAndServe()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	wg.Wait()
	return err
}

// Priorities of the shop's traffic; the X-Priority header, set by the
// shop's own edge, overrides them per request.
const (
	priorityBrowse          = 50 // pages, the default for anything not marked
	priorityRecommendations = 10 // personalising them: nice to have, first to go
	priorityCheckout        = 90 // money: the last to go
)

type shop struct {
	c        *client.Client
	failRate atomic.Uint64 // math.Float64bits of the share of requests to fail
	served   atomic.Uint64 // requests that reached a failing handler
}

func newShop(c *client.Client) *shop { return &shop{c: c} }

// routes wires each endpoint behind the middleware with its priority.
func (s *shop) routes() http.Handler {
	mux := http.NewServeMux()
	with := func(defaultPriority int, h http.HandlerFunc) http.Handler {
		return client.Middleware(s.c, client.PriorityFromHeader("X-Priority", defaultPriority))(s.failing(h))
	}
	mux.Handle("GET /products", with(priorityBrowse, s.products))
	mux.Handle("GET /recommendations", with(priorityBrowse, s.recommendations))
	mux.Handle("POST /checkout", with(priorityCheckout, s.checkout))
	mux.HandleFunc("POST /admin/fail", s.setFailRate) // not behind the middleware: never shed
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok") // never shed: a probe must not fail because the level is high
	})
	return mux
}

// failing makes a share of requests fail with 500, as a broken database
// would: evenly spread, so that any run of requests fails at that rate.
func (s *shop) failing(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rate, n := math.Float64frombits(s.failRate.Load()), float64(s.served.Add(1))
		if math.Floor(n*rate) > math.Floor((n-1)*rate) {
			http.Error(w, "database unavailable", http.StatusInternalServerError)
			return
		}
		next(w, r)
	}
}

func (s *shop) setFailRate(w http.ResponseWriter, r *http.Request) {
	rate, err := strconv.ParseFloat(r.URL.Query().Get("rate"), 64)
	if err != nil || rate < 0 || rate > 1 {
		http.Error(w, "rate must be 0..1", http.StatusBadRequest)
		return
	}
	s.failRate.Store(math.Float64bits(rate))
	fmt.Fprintf(w, "failing %.0f%% of requests\n", rate*100)
}

func (s *shop) products(w http.ResponseWriter, _ *http.Request) {
	page := map[string]any{"products": []string{"kettle", "teapot", "mug"}}
	if s.c.Feature("recommendations") { // Defcon knob: off from Minor up (degraded.yaml)
		page["also_bought"] = []string{"tea cosy"}
	}
	writeJSON(w, page)
}

// recommendations is a page (priority 50) whose personalisation is
// priority 10: personalised while admitted (Normal, Minor), bestsellers
// from a cache from Moderate up, and the page itself is shed from Severe.
// An empty list answers ErrShed, which Do returns only before the client
// has learned the level order.
func (s *shop) recommendations(w http.ResponseWriter, r *http.Request) {
	items, err := client.Do(r.Context(), s.c, client.Operation[[]string]{
		Priority: priorityRecommendations,
		Primary: func(context.Context) ([]string, error) {
			return []string{"oolong for you", "a kettle that matches"}, nil // the expensive model
		},
		Fallbacks: map[string]func(context.Context) ([]string, error){
			"Moderate": func(context.Context) ([]string, error) { return []string{"bestsellers"}, nil },
		},
	})
	if errors.Is(err, client.ErrShed) {
		writeJSON(w, map[string]any{"recommendations": []string{}})
		return
	}
	writeJSON(w, map[string]any{"recommendations": items})
}

func (s *shop) checkout(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, map[string]string{"order": "accepted"})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
