package loopback

import (
	"net"
	"os"
	"strconv"
	"testing"
)

// TestAddrIsFreeAndBelowTheEphemeralRange: the address can be listened
// on, and its port is one no outgoing connection is given.
func TestAddrIsFreeAndBelowTheEphemeralRange(t *testing.T) {
	high := ephemeralStart()
	for range 20 {
		addr := Addr(t)
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := strconv.Atoi(port)
		if p < low || p >= high {
			t.Errorf("%s: port outside [%d, %d)", addr, low, high)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("%s is not free: %v", addr, err)
		}
		l.Close()
	}
}

// Parallel tests must not be handed the same port: Addr's check is not
// the server's bind, and a second server on a port the first bound
// between them cannot start.
func TestAddrNeverReturnsAPortTwice(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		addr := Addr(t)
		if seen[addr] {
			t.Fatalf("%s returned twice", addr)
		}
		seen[addr] = true
		_, port, _ := net.SplitHostPort(addr)
		if p, _ := strconv.Atoi(port); p%stripes != (low+os.Getpid()%stripes)%stripes {
			t.Errorf("%s: port outside this process's stripe (pid %d)", addr, os.Getpid())
		}
	}
}
