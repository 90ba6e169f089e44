package main

import (
	"net"
	"testing"
	"time"
)

// The kernel stamps what reaches a socket: the time lies between the
// write and the read, whenever the reader gets to it.
func TestStampConnKeepsTheReceiveTime(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	w, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := newStampConn(c.(*net.TCPConn))
	if err != nil {
		t.Skipf("no receive timestamps here: %v", err)
	}
	// The kernel turns stamping on for the whole stack a little after
	// the first socket asks (a deferred static key), so the first
	// segments may come without a stamp.
	buf := make([]byte, 64)
	for deadline := time.Now().Add(5 * time.Second); ; {
		s.arrived = 0
		before := now()
		if _, err := w.Write([]byte("event: level\n\n")); err != nil {
			t.Fatal(err)
		}
		n, err := s.Read(buf)
		after := now()
		if err != nil || string(buf[:n]) != "event: level\n\n" {
			t.Fatalf("read %q, %v", buf[:n], err)
		}
		if s.arrived == 0 {
			if time.Now().After(deadline) {
				t.Fatal("no receive timestamp within 5s")
			}
			time.Sleep(time.Millisecond) // for the kernel's deferred switch-on
			continue
		}
		if s.arrived < before || s.arrived > after {
			t.Errorf("arrived %d, want between the write (%d) and the read (%d)", s.arrived, before, after)
		}
		break
	}
	w.Close()
	if n, err := s.Read(buf); n != 0 || err == nil {
		t.Errorf("after the peer closed: %d, %v; want 0 and EOF", n, err)
	}
}
