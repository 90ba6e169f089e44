package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

// FuzzSSE feeds arbitrary bytes as an event stream, as the client reads it:
// parsing and decoding must never panic, every event stays within the
// bounds, and a stream that ends cleanly ends with io.EOF.
func FuzzSSE(f *testing.F) {
	for _, s := range []string{
		"retry: 2000\n\nid: 1\nevent: level\ndata: {\"level\":\"Major\",\"index\":3,\"priority_threshold\":50,\"sequence\":1}\n\n",
		"\ufeffdata: a\r\ndata: b\r\n\r\n: ping\n\n",
		"data\n\nid: 1\x002\nretry: 99999999999999999999\n\n",
		"event: sample\ndata: {\"cpu_percent\":null}\n\ndata: unterminated",
		"data: " + strings.Repeat("x", 100) + "\r",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r := newSSEReader(bytes.NewReader(b))
		for range len(b) + 1 { // each event takes at least one byte
			ev, err := r.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, errEventTooLarge) && !strings.Contains(err.Error(), "too long") {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if len(ev.Data) >= maxSSEEvent || ev.Type == "" {
				t.Fatalf("event out of bounds: type %q, %d bytes", ev.Type, len(ev.Data))
			}
			var st State
			_ = json.Unmarshal([]byte(ev.Data), &st)
		}
		t.Fatalf("parser produced more events than the %d input bytes allow", len(b))
	})
}
