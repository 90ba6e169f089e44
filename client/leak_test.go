package client

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the run when a goroutine outlives the tests: a Run that
// returned must have ended everything it started.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := leakedGoroutines(5 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines outlived the tests:\n\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// leakedGoroutines returns the stacks of the goroutines other than the
// caller's that are still there after patience, or "" once there are
// none. Goroutines end a moment after what they wait for closes, so it
// looks again until patience runs out.
func leakedGoroutines(patience time.Duration) string {
	deadline := time.Now().Add(patience)
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		stacks := strings.Split(string(buf), "\n\n")[1:] // the first is this one
		var others []string
		for _, s := range stacks {
			if !strings.Contains(s, "os/signal.signal_recv") {
				others = append(others, s)
			}
		}
		if len(others) == 0 {
			return ""
		}
		if time.Now().After(deadline) {
			return strings.Join(others, "\n\n")
		}
		time.Sleep(wait)
	}
}
