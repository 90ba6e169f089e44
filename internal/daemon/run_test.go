package daemon

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// heldLog is a daemon log that holds the first write of a line containing
// hold until release is closed; entered closes when that write begins.
type heldLog struct {
	hold    string
	entered chan struct{}
	release chan struct{}
	once    sync.Once
	lockedBuffer
}

func newHeldLog(hold string) *heldLog {
	return &heldLog{hold: hold, entered: make(chan struct{}), release: make(chan struct{})}
}

func (l *heldLog) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(l.hold)) {
		l.once.Do(func() { close(l.entered) })
		<-l.release
	}
	return l.lockedBuffer.Write(p)
}

// openStream opens GET /v1/level/stream on a raw connection to addr (no
// client goroutines) and returns the connection and its status line.
func openStream(t *testing.T, addr string) (net.Conn, *bufio.Reader, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second)) // a guard: every read below is answered at once
	if _, err := io.WriteString(conn, "GET /v1/level/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	status, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("stream status: %v", err)
	}
	return conn, br, strings.TrimSpace(status)
}

// readUntil reads the stream until a line containing want.
func readUntil(t *testing.T, br *bufio.Reader, want string) {
	t.Helper()
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended before %q: %v", want, err)
		}
		if strings.Contains(line, want) {
			return
		}
	}
}

// TestRunJoinsTheEventStreams: Run returns only once the API's hub, the
// goroutine that serves the hijacked event streams, has closed them and
// ended. The hub is held while it closes a stream at shutdown (its debug
// line is held in the log): Run must not return meanwhile. Before the API
// had a Run of its own, Daemon.Run returned at once, the hub still
// running.
func TestRunJoinsTheEventStreams(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	path := filepath.Join(dir, "degraded.yaml")
	writeConfig(t, path, "data_dir: \"\"\nsignals: {cpu: {source: off}, memory: {source: off}}\nlog: {level: debug}\n")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := newHeldLog("SSE subscriber dropped")
	d := startFromFile(t, path, Options{Listener: ln, Log: log})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	_, br, status := openStream(t, d.Addr().String())
	if status != "HTTP/1.1 200 OK" {
		t.Fatalf("stream: %q, want 200", status)
	}
	readUntil(t, br, "event: level") // the hub holds the stream

	cancel()
	<-log.entered // the hub is closing the stream for the shutdown
	// Run must now wait for the hub: its goroutine blocks receiving (the
	// API's end) rather than returning.
	for !blockedIn("(*Daemon).Run(", "chan receive") {
		select {
		case err := <-done:
			close(log.release)
			t.Fatalf("Run returned (%v) while the hub was still closing a stream: the hub outlives Run", err)
		default:
			runtime.Gosched()
		}
	}
	close(log.release)
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !strings.Contains(log.String(), "reason=shutdown") {
		t.Errorf("no stream closed for the shutdown in the log:\n%s", log.String())
	}
}

// blockedIn reports whether a goroutine whose stack holds fn is blocked
// in state (as runtime.Stack names it, "chan receive" for instance).
func blockedIn(fn, state string) bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, _, _ := strings.Cut(g, "\n")
		if strings.Contains(header, "["+state) && strings.Contains(g, fn) {
			return true
		}
	}
	return false
}
