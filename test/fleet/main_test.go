// Package fleet_test runs fleet mode against a real etcd: the embedded
// server, on loopback, with fleet.instance_ttl 2s, a 100ms tick and
// dial timeouts of 1s to 3s.
package fleet_test

import (
	"flag"
	"os"
	"testing"
)

// TestMain runs up to 8 tests at once unless -parallel says otherwise:
// they wait on etcd, leases and backoffs far more than they compute, and
// the default (GOMAXPROCS, 2 here) would make the package take the sum of
// its longest tests rather than the longest one.
func TestMain(m *testing.M) {
	if f := flag.Lookup("test.parallel"); f != nil && !parallelGiven() {
		_ = f.Value.Set("8")
	}
	os.Exit(m.Run())
}

// parallelGiven reports whether -parallel (or -test.parallel) is on the
// command line.
func parallelGiven() bool {
	for _, a := range os.Args[1:] {
		for _, name := range []string{"-parallel", "--parallel", "-test.parallel", "--test.parallel"} {
			if a == name || len(a) > len(name) && a[:len(name)+1] == name+"=" {
				return true
			}
		}
	}
	return false
}
