package client

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// The cases follow the WHATWG HTML "Server-sent events" parsing rules
// (section 9.2.6, "Interpreting an event stream").
func TestSSEParserFollowsTheSpec(t *testing.T) {
	tests := []struct {
		name   string
		stream string
		want   []sseEvent
		retry  time.Duration
	}{
		{"one event", "id: 1\nevent: level\ndata: {}\n\n", []sseEvent{{ID: "1", Type: "level", Data: "{}"}}, 0},
		{"multi-line data joined by LF", "data: a\ndata: b\ndata:\n\n", []sseEvent{{Type: "message", Data: "a\nb\n"}}, 0},
		{"CRLF line ends", "event: level\r\ndata: x\r\n\r\n", []sseEvent{{Type: "level", Data: "x"}}, 0},
		{"lone CR line ends", "event: level\rdata: x\r\rdata: y\n\n", []sseEvent{{Type: "level", Data: "x"}, {Type: "message", Data: "y"}}, 0},
		{"comments ignored", ": ping\n: another\ndata: x\n: mid\n\n: ping\n\n", []sseEvent{{Type: "message", Data: "x"}}, 0},
		{"retry in ms", "retry: 2000\n\ndata: x\n\n", []sseEvent{{Type: "message", Data: "x"}}, 2 * time.Second},
		{"retry not digits ignored", "retry: 2000\n\nretry: 1.5\nretry: -3\nretry: soon\ndata: x\n\n", []sseEvent{{Type: "message", Data: "x"}}, 2 * time.Second},
		{"id persists across events", "id: 7\ndata: a\n\ndata: b\n\n", []sseEvent{{ID: "7", Type: "message", Data: "a"}, {ID: "7", Type: "message", Data: "b"}}, 0},
		{"id with NUL ignored", "id: 3\ndata: a\n\nid: 4\x005\ndata: b\n\n", []sseEvent{{ID: "3", Type: "message", Data: "a"}, {ID: "3", Type: "message", Data: "b"}}, 0},
		{"empty id resets", "id: 3\n\nid\ndata: a\n\n", []sseEvent{{ID: "", Type: "message", Data: "a"}}, 0},
		{"only one space stripped", "data:  two\ndata:none\n\n", []sseEvent{{Type: "message", Data: " two\nnone"}}, 0},
		{"field without colon", "data\ndata\n\n", []sseEvent{{Type: "message", Data: "\n"}}, 0},
		{"value holds colons", "data: a: b\n\n", []sseEvent{{Type: "message", Data: "a: b"}}, 0},
		{"empty data not dispatched, type reset", "event: level\n\ndata: x\n\n", []sseEvent{{Type: "message", Data: "x"}}, 0},
		{"unknown fields ignored", "foo: bar\ndata: x\n\n", []sseEvent{{Type: "message", Data: "x"}}, 0},
		{"leading BOM skipped", "\ufeffdata: x\n\n", []sseEvent{{Type: "message", Data: "x"}}, 0},
		{"unterminated event discarded", "data: a\n\ndata: b\n", []sseEvent{{Type: "message", Data: "a"}}, 0},
		{"unterminated line discarded", "data: a\n\ndata: b", []sseEvent{{Type: "message", Data: "a"}}, 0},
	}
	for _, tt := range tests {
		for _, chunked := range []bool{false, true} {
			name := tt.name
			if chunked {
				name += "/one byte at a time"
			}
			t.Run(name, func(t *testing.T) {
				var r io.Reader = strings.NewReader(tt.stream)
				if chunked {
					r = iotest.OneByteReader(r)
				}
				p := newSSEReader(r)
				var got []sseEvent
				for {
					ev, err := p.Next()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, ev)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("events\n got %+v\nwant %+v", got, tt.want)
				}
				if p.retry != tt.retry {
					t.Errorf("retry %v, want %v", p.retry, tt.retry)
				}
			})
		}
	}
}

func TestSSEParserBoundsLineLength(t *testing.T) {
	p := newSSEReader(strings.NewReader("data: " + strings.Repeat("x", maxSSELine+1) + "\n\n"))
	if _, err := p.Next(); err == nil || errors.Is(err, io.EOF) {
		t.Errorf("a line over %d bytes gave %v, want an error", maxSSELine, err)
	}
}

func TestSSEParserCountsCommentsAsContact(t *testing.T) {
	p := newSSEReader(strings.NewReader(": ping\n\n: ping\n\n"))
	lines := 0
	p.onLine = func() { lines++ }
	if _, err := p.Next(); !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if lines != 4 {
		t.Errorf("onLine called %d times, want 4 (pings prove the daemon is alive)", lines)
	}
}
