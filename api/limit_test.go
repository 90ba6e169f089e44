package api

import (
	"errors"
	"io"
	"math"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestLimitListener holds three connections over real TCP: the fourth is
// closed at once, and a closed one frees its slot (once, however often it
// is closed).
func TestLimitListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var rejected atomic.Int64
	lim := LimitListener(ln, 3, func() { rejected.Add(1) })
	accepted := make(chan net.Conn, 8)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := lim.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	defer func() {
		lim.Close()
		<-done
		close(accepted)
		for c := range accepted {
			c.Close()
		}
	}()

	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	served := func() net.Conn {
		t.Helper()
		select {
		case c := <-accepted:
			return c
		case <-time.After(10 * time.Second):
			t.Fatal("a connection within the limit was not accepted within 10s")
			return nil
		}
	}
	// closedAtOnce reads from a client connection the server never
	// writes to: only a close by the listener ends the read.
	closedAtOnce := func(c net.Conn) {
		t.Helper()
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("a connection over the limit: read %v, want it closed by the server", err)
		}
	}

	var held []net.Conn
	for range 3 {
		dial()
		held = append(held, served())
	}
	closedAtOnce(dial())
	if n := rejected.Load(); n != 1 {
		t.Errorf("onReject called %d times, want 1", n)
	}

	held[0].Close()
	held[0].Close() // a second Close frees nothing more
	dial()
	served()
	closedAtOnce(dial())
	if n := rejected.Load(); n != 2 {
		t.Errorf("onReject called %d times, want 2", n)
	}
}

func TestConnectionLimit(t *testing.T) {
	tests := []struct {
		configured int
		nofile     uint64
		want       int
		err        string
	}{
		{500, 564, 500, ""},
		{500, math.MaxUint64, 500, ""}, // RLIM_INFINITY
		{64, 64, 0, "max_connections: 64 connections and the daemon's own 64 files need RLIMIT_NOFILE of at least 128, but it is 64"},
		{500, 563, 0, "need RLIMIT_NOFILE of at least 564, but it is 563"},
		{0, 1024, 960, ""},
		{0, 128, 64, ""},
		{0, math.MaxUint64, math.MaxInt32 - 64, ""}, // RLIM_INFINITY
		{0, 100, 0, "RLIMIT_NOFILE is 100, leaving 36 connections"},
		{-1, 1024, 0, "max_connections: must be >= 0"},
	}
	for _, tt := range tests {
		got, err := connectionLimit(tt.configured, tt.nofile)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("connectionLimit(%d, %d) error %v, want it to contain %q", tt.configured, tt.nofile, err, tt.err)
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("connectionLimit(%d, %d) = %d, %v; want %d", tt.configured, tt.nofile, got, err, tt.want)
		}
	}

	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	want, wantErr := connectionLimit(0, rl.Cur)
	if got, err := ConnectionLimit(0); got != want || (err == nil) != (wantErr == nil) {
		t.Errorf("ConnectionLimit(0) = %d, %v; want %d, %v from RLIMIT_NOFILE %d", got, err, want, wantErr, rl.Cur)
	}
	if rl.Cur >= 71 {
		if got, err := ConnectionLimit(7); got != 7 || err != nil {
			t.Errorf("ConnectionLimit(7) = %d, %v; want 7 under RLIMIT_NOFILE %d", got, err, rl.Cur)
		}
	}
}

func TestStreamLimit(t *testing.T) {
	for _, tt := range []struct{ conns, want int }{{512, 480}, {33, 1}, {10, 1}} {
		if got := StreamLimit(tt.conns); got != tt.want {
			t.Errorf("StreamLimit(%d) = %d, want %d", tt.conns, got, tt.want)
		}
	}
}
