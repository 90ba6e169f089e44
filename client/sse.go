package client

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"
)

// maxSSELine bounds one line of the event stream, so a broken or hostile
// server cannot grow the client's memory without bound.
const maxSSELine = 1 << 20

// maxSSEEvent bounds the data of one event, however many lines carry it.
const maxSSEEvent = 4 << 20

// errEventTooLarge ends a stream whose event outgrows maxSSEEvent.
var errEventTooLarge = errors.New("event stream: event larger than 4 MiB")

// sseEvent is one dispatched Server-Sent Event.
type sseEvent struct {
	// ID is the last event ID in force when the event was dispatched.
	ID string
	// Type is the event type; "message" when the stream named none.
	Type string
	// Data is the data buffer without its final newline.
	Data string
}

// sseReader parses a text/event-stream as the WHATWG HTML "Server-sent
// events" section specifies: lines end in CRLF, LF or a lone CR; a leading
// BOM is skipped; lines starting with ':' are comments; "field: value"
// strips one space after the colon; a line without a colon is a field with
// an empty value; data lines accumulate joined by "\n"; id values holding
// NUL are ignored; retry takes only ASCII digits; an empty line dispatches
// the event unless its data is empty; an unterminated event at the end of
// the stream is discarded. It is not safe for concurrent use.
type sseReader struct {
	sc     *bufio.Scanner
	first  bool
	lastID string
	typ    string
	data   strings.Builder
	// retry is the reconnection time the stream asked for; 0 if none.
	retry time.Duration
	// onLine, if set, is called for every line read, comments included:
	// each one is proof that the server is alive.
	onLine func()
}

func newSSEReader(r io.Reader) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxSSELine)
	sc.Split(scanSSELines)
	return &sseReader{sc: sc, first: true}
}

// Next returns the next dispatched event, or the error that ended the
// stream (io.EOF for a clean end).
func (r *sseReader) Next() (sseEvent, error) {
	for r.sc.Scan() {
		line := r.sc.Bytes()
		if r.first {
			line = bytes.TrimPrefix(line, []byte("\ufeff"))
			r.first = false
		}
		if r.onLine != nil {
			r.onLine()
		}
		if len(line) == 0 {
			if r.data.Len() == 0 {
				r.typ = ""
				continue
			}
			ev := sseEvent{ID: r.lastID, Type: r.typ, Data: strings.TrimSuffix(r.data.String(), "\n")}
			if ev.Type == "" {
				ev.Type = "message"
			}
			r.typ = ""
			r.data.Reset()
			return ev, nil
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			r.typ = string(value)
		case "data":
			if r.data.Len()+len(value) >= maxSSEEvent {
				return sseEvent{}, errEventTooLarge
			}
			r.data.Write(value)
			r.data.WriteByte('\n')
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				r.lastID = string(value)
			}
		case "retry":
			if ms, ok := asciiDigits(value); ok {
				r.retry = time.Duration(ms) * time.Millisecond
			}
		}
	}
	if err := r.sc.Err(); err != nil {
		return sseEvent{}, err
	}
	return sseEvent{}, io.EOF
}

// asciiDigits parses a retry value: only 0-9, else it is ignored.
func asciiDigits(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 12 {
		return 0, false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	return n, err == nil
}

// scanSSELines is a bufio.SplitFunc for lines ending in "\r\n", "\n" or a
// lone "\r". A "\r" at the end of the buffered data waits for the next
// byte to know whether a "\n" follows.
func scanSSELines(data []byte, atEOF bool) (int, []byte, error) {
	if atEOF && len(data) == 0 {
		return 0, nil, nil
	}
	if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
		if data[i] == '\n' {
			return i + 1, data[:i], nil
		}
		if i+1 < len(data) {
			if data[i+1] == '\n' {
				return i + 2, data[:i], nil
			}
			return i + 1, data[:i], nil
		}
		if atEOF {
			return i + 1, data[:i], nil
		}
		return 0, nil, nil // "\r" last: wait for the next byte
	}
	// An unterminated last line is not a line: the spec discards the
	// incomplete event, so drop it.
	if atEOF {
		return len(data), nil, nil
	}
	return 0, nil, nil
}
