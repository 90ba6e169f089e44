package loopback

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// low is the lowest port Addr picks: below it are the well-known and
// commonly configured ports.
const low = 10000

// Addr returns 127.0.0.1:PORT with a port nothing listens on now, below
// the kernel's ephemeral range (net.ipv4.ip_local_port_range, 32768 and
// up by default), so that no outgoing connection is given it while a
// server on it is stopped. (A restarted etcd member found its port, from
// 127.0.0.1:0, taken: "bind: address already in use".) Tests pick at
// random among some 20,000 ports, so two rarely pick the same one.
func Addr(t testing.TB) string {
	t.Helper()
	high := ephemeralStart()
	for range 200 {
		addr := fmt.Sprintf("127.0.0.1:%d", low+rand.IntN(high-low))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue // in use: another
		}
		l.Close()
		return addr
	}
	t.Fatalf("loopback: no free port in [%d, %d) after 200 tries", low, high)
	return ""
}

// ephemeralStart is the first port of the kernel's ephemeral range, or
// 32768 when it cannot be read (or leaves too little room below it).
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n < low+1000 {
		return 32768
	}
	return n
}
