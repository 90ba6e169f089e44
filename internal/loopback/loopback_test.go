package loopback

import (
	"net"
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
