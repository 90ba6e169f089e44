package main

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// parsed feeds chunks, in that order, to one subscriber of kind and
// returns the keys it reported and the errors it failed with.
func parsed(kind string, chunks ...string) (keys []uint64, fails []string) {
	e := &epollSubs{kind: kind,
		got:  func(_ int, key uint64, _ int64) { keys = append(keys, key) },
		fail: func(_ int, err error) { fails = append(fails, err.Error()) },
	}
	s := &lineSub{carry: make([]byte, 0, maxCarry)}
	for _, c := range chunks {
		e.feed(s, []byte(c))
	}
	return keys, fails
}

// splits returns text cut into pieces at every one of cuts.
func splits(text string, cuts ...int) []string {
	var out []string
	prev := 0
	for _, c := range cuts {
		out = append(out, text[prev:c])
		prev = c
	}
	return append(out, text[prev:])
}

// The subscribers' parser reports the id of each `event: level` when its
// blank line is read, skips other events and the data, and reads the same
// however the stream is cut into reads.
func TestEpollSubsSSE(t *testing.T) {
	data := "data: " + `{"level":"Major","index":3,"reason":"` + strings.Repeat("x", 200) + `"}`
	stream := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" +
		"id: 7\nevent: level\n" + data + "\n\n" +
		"id: 8\nevent: sample\ndata: {\"cpu_percent\":12}\n\n" +
		": keep-alive\n\n" +
		"id: 9\r\nevent: level\r\n" + data + "\r\n\r\n"
	for _, chunks := range [][]string{
		{stream},
		splits(stream, 20, 60, 62), // in the headers and around the first id
		splits(stream, strings.Index(stream, "id: 7")+2),      // inside a short line: carried
		splits(stream, strings.Index(stream, `"reason"`)),     // inside the data: skipped
		splits(stream, strings.Index(stream, "event: level")), // a line's start
	} {
		keys, fails := parsed("sse", chunks...)
		if !slices.Equal(keys, []uint64{7, 9}) || len(fails) != 0 {
			t.Errorf("stream in %d reads: keys %v, fails %v; want 7 and 9, no failure", len(chunks), keys, fails)
		}
	}

	keys, fails := parsed("sse", "HTTP/1.1 503 Service Unavailable\r\n\r\n")
	if len(keys) != 0 || !slices.Equal(fails, []string{`stream answered "HTTP/1.1 503 Service Unavailable"`}) {
		t.Errorf("503: keys %v, fails %v; want the status line quoted", keys, fails)
	}
}

// For Redis the key is the first line of a message's payload; the
// subscription's confirmation and the rest of the payload are skipped.
func TestEpollSubsRedis(t *testing.T) {
	payload := `{"level":"Major","reason":"` + strings.Repeat("x", 200) + `"}`
	message := func(key string) string {
		body := key + "\n" + payload
		return "*3\r\n$7\r\nmessage\r\n$14\r\ndegraded-level\r\n$" + strconv.Itoa(len(body)) + "\r\n" + body + "\r\n"
	}
	stream := "*3\r\n$9\r\nsubscribe\r\n$14\r\ndegraded-level\r\n:1\r\n" + message("41") + message("42")
	for _, chunks := range [][]string{
		{stream},
		splits(stream, 10, strings.Index(stream, "message")+3),
		splits(stream, strings.Index(stream, "42")+1), // inside a key
	} {
		keys, fails := parsed("redis", chunks...)
		if !slices.Equal(keys, []uint64{41, 42}) || len(fails) != 0 {
			t.Errorf("stream in %d reads: keys %v, fails %v; want 41 and 42, no failure", len(chunks), keys, fails)
		}
	}
}

// An event ends at its blank line, not at the short tail of a data line
// whose start was skipped: the clock stops when the event is whole.
func TestEpollSubsEventEndsAtItsBlankLine(t *testing.T) {
	data := "data: " + `{"level":"Major","reason":"` + strings.Repeat("x", 200) + `"}`
	head := "HTTP/1.1 200 OK\r\n\r\nid: 7\nevent: level\n"
	var gotIn []int
	read := 0
	e := &epollSubs{kind: "sse",
		got:  func(int, uint64, int64) { gotIn = append(gotIn, read) },
		fail: func(_ int, err error) { t.Error(err) },
	}
	s := &lineSub{carry: make([]byte, 0, maxCarry)}
	for i, c := range []string{head + data[:len(data)-10], data[len(data)-10:] + "\n", "\n"} {
		read = i
		e.feed(s, []byte(c))
	}
	if !slices.Equal(gotIn, []int{2}) {
		t.Errorf("event reported in reads %v, want only in read 2, which holds its blank line", gotIn)
	}
}
