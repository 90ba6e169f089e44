package loopback

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// low is the lowest port Addr picks: below it are the well-known and
// commonly configured ports.
const low = 10000

// stripes is how many stripes Addr splits its range into, by port modulo
// stripes: a process picks only in the stripe of its pid, so that two test
// binaries that go test runs at once (one per package) pick the same port
// only when their pids share a stripe (and each stripe still has some
// 2,800 ports).
const stripes = 8

var (
	mu    sync.Mutex
	given = map[int]bool{} // the ports Addr returned or found in use, in this process
)

// Addr returns 127.0.0.1:PORT with a port nothing listens on now, below
// the kernel's ephemeral range (net.ipv4.ip_local_port_range, 32768 and
// up by default), so that no outgoing connection is given it while a
// server on it is stopped. (A restarted etcd member found its port, from
// 127.0.0.1:0, taken: "bind: address already in use".) It never returns a
// port twice in one process, and picks at random in its process's stripe
// of the range: a port is free when Addr returns it, not when its server
// binds it, and parallel tests that picked among the same 20,000 ports
// at random met (CI: an etcd member whose port another test's had bound
// between the check and the bind, "bind: address already in use" for 5 s).
func Addr(t testing.TB) string {
	t.Helper()
	high := ephemeralStart()
	stripe := os.Getpid() % stripes
	n := (high - low - stripe + stripes - 1) / stripes // ports in [low, high) of the stripe
	for range 200 {
		port := low + stripe + stripes*rand.IntN(n)
		if !reserve(port) {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // in use by another process: it stays reserved, never tried again
		}
		l.Close()
		return l.Addr().String()
	}
	t.Fatalf("loopback: no free port in [%d, %d) after 200 tries", low, high)
	return ""
}

// reserve marks port as given in this process, and reports whether it
// was not already: the check is under the lock, the listen that tests the
// port is not.
func reserve(port int) bool {
	mu.Lock()
	defer mu.Unlock()
	if given[port] {
		return false
	}
	given[port] = true
	return true
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
