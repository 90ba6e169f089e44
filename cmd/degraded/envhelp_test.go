package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// envServer answers every client command just enough, and remembers the
// bearer token of the first request each run makes.
type envServer struct {
	*httptest.Server
	mu     sync.Mutex
	token  *string       // nil: no request yet
	called chan struct{} // closed at the first request
}

func newEnvServer(t *testing.T) *envServer {
	s := &envServer{}
	state := `{"level":"Normal","index":0,"priority_threshold":0,"source":"auto","recommended":"Normal","reason":"started",` +
		`"since":"2026-12-01T09:00:00Z","sequence":1,"override":null,"partial":null,"disabled_features":[],"signals":{}}`
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		if s.token == nil {
			tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			s.token = &tok
			close(s.called)
		}
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/v1/levels":
			fmt.Fprint(w, `{"levels":[{"name":"Normal","index":0,"priority_threshold":0},{"name":"Major","index":1,"priority_threshold":50}]}`)
		case r.URL.Path == "/v1/outcomes":
			w.WriteHeader(http.StatusAccepted)
			fmt.Fprint(w, `{"accepted":1}`)
		case strings.HasPrefix(r.URL.Path, "/v1/fleet"):
			fmt.Fprint(w, `{"name":"shop","instance":"a","connected":true,"override":null,"instances":[],"levels":{}}`)
		case r.URL.Path == "/v1/level/stream":
			<-r.Context().Done() // watch: the run ends when the test cancels it
		default:
			fmt.Fprint(w, state)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// runWith runs args against the server with environ and returns the token
// the first request carried ("" for none).
func (s *envServer) runWith(t *testing.T, environ []string, args []string) string {
	t.Helper()
	s.mu.Lock()
	s.token, s.called = nil, make(chan struct{})
	called := s.called
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		select {
		case <-called:
			time.AfterFunc(50*time.Millisecond, cancel) // let the command finish what it started
		case <-ctx.Done():
		}
	}()
	err := run(ctx, args, environ, io.Discard, io.Discard)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token == nil {
		t.Fatalf("%v with %v made no request (%v)", args, environ, err)
	}
	return *s.token
}

// envVarsInSource are the DEGRADED_ names the package's code mentions:
// every variable a command could read.
func envVarsInSource(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`"(DEGRADED_[A-Z_]+)"`)
	var out []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			if !slices.Contains(out, m[1]) {
				out = append(out, m[1])
			}
		}
	}
	slices.Sort(out)
	return out
}

var envInHelp = regexp.MustCompile(`\(env ([^)]*)\)`)

// helpVars are the variables a flag's help names, in its order:
// "(env A, then B)".
func helpVars(usage string) []string {
	m := envInHelp.FindStringSubmatch(usage)
	if m == nil {
		return nil
	}
	return strings.Split(m[1], ", then ")
}

// TestFlagHelpNamesWhatIsRead: for every client command, the --token
// help names exactly the variables the command reads for its token, in
// the order it reads them (found by running it against a server with
// each variable set), --addr's names DEGRADED_ADDR, which it reads, and a
// long help that names token variables names them in the same order.
func TestFlagHelpNamesWhatIsRead(t *testing.T) {
	argsOf := map[string][]string{
		"status":         nil,
		"watch":          nil,
		"override set":   {"Major", "--ttl", "1m", "--reason", "x"},
		"override clear": nil,
		"report":         {"--success", "1"},
		"fleet status":   nil,
	}
	s := newEnvServer(t)
	candidates := slices.DeleteFunc(envVarsInSource(t), func(v string) bool { return v == addrVar })
	if !slices.Contains(candidates, "DEGRADED_REPORT_TOKEN") || !slices.Contains(candidates, "DEGRADED_TOKEN") {
		t.Fatalf("the code names %v: the token variables are missing", candidates)
	}

	var walk func(c *cobra.Command)
	var cmds []*cobra.Command
	walk = func(c *cobra.Command) {
		if c.Runnable() && c.Flags().Lookup("token") != nil {
			cmds = append(cmds, c)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	for _, c := range clientCmds(nil, io.Discard) {
		walk(c)
	}
	for _, c := range cmds {
		path := c.CommandPath() // clientCmds' commands have no root above them
		t.Run(path, func(t *testing.T) {
			args, ok := argsOf[path]
			if !ok {
				t.Fatalf("no arguments known for %q: add them to argsOf", path)
			}
			args = append(strings.Fields(path), args...)
			addr := addrVar + "=" + s.URL

			// The order of reading: set every candidate not yet found;
			// the one whose value arrives is read first of them.
			var read []string
			left := slices.Clone(candidates)
			for len(left) > 0 {
				env := []string{addr}
				for _, v := range left {
					env = append(env, v+"=tok-"+v)
				}
				got := s.runWith(t, env, args)
				v, ok := strings.CutPrefix(got, "tok-")
				if !ok {
					break // none of those left is read
				}
				read = append(read, v)
				left = slices.DeleteFunc(left, func(x string) bool { return x == v })
			}
			help := helpVars(c.Flags().Lookup("token").Usage)
			if !slices.Equal(help, read) {
				t.Errorf("--token's help names %v; the command reads %v, in that order", help, read)
			}
			if got := helpVars(c.Flags().Lookup("addr").Usage); !slices.Equal(got, []string{addrVar}) {
				t.Errorf("--addr's help names %v, want [%s]", got, addrVar)
			}
			var inLong []string
			for _, m := range regexp.MustCompile(`DEGRADED_[A-Z_]+`).FindAllString(c.Long, -1) {
				if slices.Contains(candidates, m) {
					inLong = append(inLong, m)
				}
			}
			if len(inLong) > 0 && !slices.Equal(inLong, read) {
				t.Errorf("the long help names %v; the command reads %v, in that order", inLong, read)
			}
		})
	}
	if len(cmds) < len(argsOf) {
		t.Errorf("found %d client commands with --token, want at least %d", len(cmds), len(argsOf))
	}
}
