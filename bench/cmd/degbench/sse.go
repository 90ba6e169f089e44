package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// now is the wall clock in Unix nanoseconds: the timestamps of one
// measurement are taken in several processes (the subscribers are split
// over processes to stay under the file limit), so they share this clock.
func now() int64 { return time.Now().UnixNano() }

// sseEvent is one complete Server-Sent Event.
type sseEvent struct {
	ID    uint64
	Event string
	Data  []byte // valid only during the callback
	At    int64  // now() when the blank line ending the event was read
	// Arrived is when the kernel received the bytes that ended the event
	// (Unix ns), or 0 where receive timestamps are not available.
	Arrived int64
}

// sseConn is a minimal SSE subscriber over one raw TCP connection: a
// 4 KiB read buffer and one goroutine, so that 10,000 of them stay cheap
// on the measuring side. http.ReadResponse undoes the chunked encoding.
type sseConn struct {
	conn  net.Conn
	stamp *stampConn // conn, when the kernel gives receive timestamps
	body  *bufio.Reader
}

// dialSSE opens rawURL (http://host:port/path) and reads the response
// head; the stream's events are then read by follow.
func dialSSE(ctx context.Context, rawURL string) (*sseConn, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return nil, err
	}
	stamp, err := newStampConn(conn.(*net.TCPConn))
	if err == nil {
		conn = stamp
	}
	req, _ := http.NewRequest(http.MethodGet, rawURL, nil)
	req.Header.Set("Accept", "text/event-stream")
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if err := req.Write(conn); err != nil {
		conn.Close()
		return nil, err
	}
	br := bufio.NewReaderSize(conn, 4096)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		conn.Close()
		return nil, fmt.Errorf("GET %s: %s", u.Path, resp.Status)
	}
	_ = conn.SetDeadline(time.Time{})
	return &sseConn{conn: conn, stamp: stamp, body: bufio.NewReaderSize(resp.Body, 4096)}, nil
}

// follow calls f for every event until the connection ends.
func (s *sseConn) follow(f func(sseEvent)) error {
	var ev sseEvent
	var data []byte
	for {
		line, err := s.body.ReadSlice('\n')
		if err != nil {
			return err
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			if ev.Event != "" || len(data) > 0 {
				ev.At = now()
				if s.stamp != nil {
					ev.Arrived = s.stamp.arrived
				}
				ev.Data = data
				f(ev)
			}
			ev, data = sseEvent{}, data[:0]
		case bytes.HasPrefix(line, []byte("id: ")):
			ev.ID, _ = strconv.ParseUint(string(line[4:]), 10, 64)
		case bytes.HasPrefix(line, []byte("event: ")):
			ev.Event = string(line[7:])
		case bytes.HasPrefix(line, []byte("data: ")):
			data = append(data, line[6:]...)
		}
	}
}

func (s *sseConn) Close() error { return s.conn.Close() }
