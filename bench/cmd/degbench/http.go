package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// outcomesBody is what wrk posts: successes only, so the level never moves.
const outcomesBody = `{"success":100,"failure":0}`

// wrkRun is one wrk run against one server and endpoint.
type wrkRun struct {
	Endpoint  string // "GET /v1/level" or "POST /v1/outcomes"
	Server    string // "degraded" or "bare"
	Run       int
	Requests  float64 // requests/s
	LatencyMs float64 // wrk's average latency
	Non2xx    int
	Output    string
}

type httpResult struct {
	WrkArgs string
	Runs    []wrkRun
}

func httpCmd(args []string) error {
	fs := flag.NewFlagSet("http", flag.ExitOnError)
	binary := fs.String("binary", "./degraded", "degraded binary")
	wrk := fs.String("wrk", "wrk", "wrk binary")
	runs := fs.Int("runs", 3, "runs of each endpoint on each server")
	dur := fs.Duration("duration", 10*time.Second, "wrk duration")
	threads := fs.Int("threads", 2, "wrk threads")
	conns := fs.Int("connections", 64, "wrk connections")
	out := fs.String("out", "http.json", "result file")
	_ = fs.Parse(args)

	d, err := startDaemon(*binary, `
signals: {cpu: {source: off}, memory: {source: off}}
log: {level: warn}
`)
	if err != nil {
		return err
	}
	defer d.stop()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	bare, bareURL, err := startBare(self, d.url)
	if err != nil {
		return err
	}
	defer func() { _ = bare.Process.Kill(); _ = bare.Wait() }()

	dir, err := os.MkdirTemp("", "degbench-wrk")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	post := filepath.Join(dir, "post.lua")
	lua := fmt.Sprintf("wrk.method = \"POST\"\nwrk.body = %q\nwrk.headers[\"Content-Type\"] = \"application/json\"\n", outcomesBody)
	if err := os.WriteFile(post, []byte(lua), 0o644); err != nil {
		return err
	}
	base := []string{"-t" + strconv.Itoa(*threads), "-c" + strconv.Itoa(*conns), "-d" + dur.String()}
	res := httpResult{WrkArgs: "wrk " + strings.Join(base, " ")}
	servers := map[string]string{"degraded": d.url, "bare": bareURL}
	for run := range *runs {
		for _, ep := range []string{"GET /v1/level", "POST /v1/outcomes"} {
			order := []string{"degraded", "bare"}
			if run%2 == 1 {
				order = []string{"bare", "degraded"}
			}
			for _, srv := range order {
				a := append([]string{}, base...)
				if strings.HasPrefix(ep, "POST") {
					a = append(a, "-s", post)
				}
				a = append(a, servers[srv]+strings.Fields(ep)[1])
				r, err := runWrk(*wrk, a)
				if err != nil {
					return fmt.Errorf("%s on %s: %w", ep, srv, err)
				}
				r.Endpoint, r.Server, r.Run = ep, srv, run
				fmt.Fprintf(os.Stderr, "http: run %d %-18s %-8s %10.0f req/s\n", run, ep, srv, r.Requests)
				res.Runs = append(res.Runs, r)
				time.Sleep(500 * time.Millisecond)
			}
		}
	}
	return writeJSON(*out, res)
}

var (
	wrkRPS     = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	wrkNon2xx  = regexp.MustCompile(`Non-2xx or 3xx responses:\s+(\d+)`)
	wrkLatency = regexp.MustCompile(`Latency\s+([0-9.]+)(us|ms|s)\b`)
)

func runWrk(wrk string, args []string) (wrkRun, error) {
	out, err := exec.Command(wrk, args...).CombinedOutput()
	r := wrkRun{Output: string(out)}
	if err != nil {
		return r, fmt.Errorf("%v: %s", err, out)
	}
	m := wrkRPS.FindStringSubmatch(r.Output)
	if m == nil {
		return r, fmt.Errorf("no Requests/sec in wrk output: %s", out)
	}
	r.Requests, _ = strconv.ParseFloat(m[1], 64)
	if m := wrkNon2xx.FindStringSubmatch(r.Output); m != nil {
		r.Non2xx, _ = strconv.Atoi(m[1])
	}
	if m := wrkLatency.FindStringSubmatch(r.Output); m != nil {
		v, _ := strconv.ParseFloat(m[1], 64)
		r.LatencyMs = v * map[string]float64{"us": 1e-3, "ms": 1, "s": 1e3}[m[2]]
	}
	if r.Non2xx > 0 {
		return r, fmt.Errorf("%d answers were not 2xx: %s", r.Non2xx, out)
	}
	return r, nil
}

// startBare runs `degbench bare` as its own process, like the daemon.
func startBare(self, target string) (*exec.Cmd, string, error) {
	cmd := exec.Command(self, "bare", "-target", target)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if u, ok := strings.CutPrefix(strings.TrimSpace(line), "bare listening on "); ok && err == nil {
		return cmd, u, nil
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	return nil, "", fmt.Errorf("bare server did not start: %q %v", line, err)
}

// captured is one answer of the daemon, replayed byte for byte.
type captured struct {
	status int
	header http.Header
	body   []byte
}

func capture(req *http.Request) (captured, error) {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return captured{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	h := http.Header{}
	for _, k := range []string{"Content-Type", "Cache-Control", "Etag"} {
		if v := resp.Header.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	return captured{resp.StatusCode, h, b}, err
}

// bareCmd is the baseline: a plain net/http server with a ServeMux that
// answers GET /v1/level and POST /v1/outcomes with the bytes the daemon
// answered (status, content headers, body), reading the request body but
// neither decoding it nor doing anything with it.
func bareCmd(args []string) error {
	fs := flag.NewFlagSet("bare", flag.ExitOnError)
	target := fs.String("target", "", "daemon URL whose answers to replay")
	_ = fs.Parse(args)
	level, err := capture(mustRequest(http.MethodGet, *target+"/v1/level"))
	if err != nil {
		return err
	}
	req, _ := http.NewRequest(http.MethodPost, *target+"/v1/outcomes", strings.NewReader(outcomesBody))
	req.Header.Set("Content-Type", "application/json")
	outcomes, err := capture(req)
	if err != nil {
		return err
	}
	if level.status != 200 || outcomes.status != 202 {
		return fmt.Errorf("daemon answered %d and %d", level.status, outcomes.status)
	}
	reply := func(c captured) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			for k, v := range c.header {
				w.Header()[k] = v
			}
			w.Header().Set("Content-Length", strconv.Itoa(len(c.body)))
			w.WriteHeader(c.status)
			_, _ = w.Write(c.body)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("GET /v1/level", reply(level))
	mux.Handle("POST /v1/outcomes", reply(outcomes))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	fmt.Printf("bare listening on http://%s\n", ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
