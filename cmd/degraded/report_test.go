package main

import (
	"context"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/degraded/degraded/api"
	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/controller/controllertest"
	"github.com/degraded/degraded/levels"
	"github.com/degraded/degraded/signals"
)

// TestReportSignal: `degraded report --signal NAME=VALUE` pushes custom
// signal values with the report token (DEGRADED_REPORT_TOKEN before
// DEGRADED_TOKEN), and names what went wrong otherwise.
func TestReportSignal(t *testing.T) {
	tab, err := levels.NewTableWith([]levels.Level{{Name: "Major", PriorityThreshold: 50, Thresholds: levels.Thresholds{"queue_depth": 1000}}},
		levels.TableOptions{Custom: []levels.Signal{"queue_depth"}})
	if err != nil {
		t.Fatal(err)
	}
	pushed := &signals.Pushed{}
	pushed.Configure([]signals.PushedSignal{{Name: "queue_depth", TTL: time.Minute}}, nil)
	ctl, err := controller.New(controller.Options{Table: tab, Sources: []controller.Source{pushed}})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, ctl)
	ctl.Check(context.Background())
	srv := httptest.NewServer(api.NewServer(api.Deps{Controller: ctl, Outcomes: &cliWindow{}, Pusher: pushed, Reported: ctl.Reported,
		Tokens: func() api.Tokens { return api.Tokens{Admin: "adm", Report: "rep"} }}).Handler())
	defer srv.Close() // report makes no stream: no need to run the API
	env := []string{"DEGRADED_ADDR=" + srv.URL, "DEGRADED_TOKEN=wrong", "DEGRADED_REPORT_TOKEN=rep"}

	// The push answers before the controller's goroutine evaluates it, so
	// the level is read at the change the push makes (read once, a loaded
	// CI machine saw Normal still).
	moved := ctl.LevelChanged()
	code, out, errOut := runCLI(t, env, "report", "--signal", "queue_depth=1234")
	if code != 0 || !strings.Contains(out, "signal queue_depth = 1234") {
		t.Fatalf("report --signal: exit %d, %q %q", code, out, errOut)
	}
	deadline := time.After(10 * time.Second)
	for st := ctl.State(); st.Level != "Major"; st = ctl.State() {
		select {
		case <-moved:
			moved = ctl.LevelChanged()
		case <-deadline:
			t.Fatalf("10s after pushing 1234 over a threshold of 1000: %s, want Major at once", st.Level)
		}
	}
	if code, out, _ := runCLI(t, env, "status"); code != 0 || !regexp.MustCompile(`queue_depth\s+1234\s`).MatchString(out) {
		t.Errorf("status shows no queue_depth row with its value:\n%s", out)
	}
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"report", "--signal", "queue_depth"}, 2, "NAME=VALUE"},
		{[]string{"report", "--signal", "queue_depth=NaN"}, 2, "finite number"},
		{[]string{"report", "--signal", "nope=1"}, 1, "no custom signal \"nope\""},
		{[]string{"report"}, 2, "--signal NAME=VALUE"},
	} {
		if code, _, errOut := runCLI(t, env, tt.args...); code != tt.code || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d %q, want %d naming %q", tt.args, code, errOut, tt.code, tt.want)
		}
	}
}
