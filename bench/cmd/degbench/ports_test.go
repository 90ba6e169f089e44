package main

import "testing"

// TestFreePortsAreDistinct: an etcd's client and peer ports, chosen
// together, never collide (chosen one at a time, fleet-scale's etcd once got
// the same port for both and the run of record stopped).
func TestFreePortsAreDistinct(t *testing.T) {
	ports, err := freePorts(64)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Fatalf("freePorts(64) = %v: port %d is not a distinct free port", ports, p)
		}
		seen[p] = true
	}
}
