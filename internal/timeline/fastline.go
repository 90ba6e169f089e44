package timeline

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/degraded/degraded/levels"
)

// decode reads one timeline line for a Series: the fields the Builder
// uses, read by a small scanner of the recorder's JSON rather than by
// encoding/json, which is several times slower and is most of the cost of
// a day's summary. Only tick and event lines are scanned: start, reload,
// override and fleet lines (a few a day, with a config, a request or a
// fleet update) and any line the scanner cannot read are parsed in full by
// encoding/json. The fields a Series does not use (the window, the
// reports) are skipped: checked for JSON syntax, not for their types, so
// a line whose window is a string still draws (encoding/json, and replay,
// would count it damaged).
//
// A lineDecoder is one parse worker's: not safe for concurrent use.
type lineDecoder struct {
	names map[string]levels.Signal // the signal names seen, so that each line does not allocate them again
}

func (d *lineDecoder) decode(b []byte, l *levels.Line) bool {
	head := b[:min(len(b), 96)] // the recorder writes v, at, then trigger
	if !bytes.Contains(head, []byte(`"trigger":"tick"`)) && !bytes.Contains(head, []byte(`"trigger":"event"`)) {
		return parseLine(b, l)
	}
	*l = levels.Line{}
	if !d.scan(b, l) || l.V != levels.LineVersion || l.At.IsZero() {
		*l = levels.Line{}
		return parseLine(b, l)
	}
	return true
}

// scan fills l from the line's top-level keys.
func (d *lineDecoder) scan(b []byte, l *levels.Line) bool {
	w := &walker{b: b, names: d.names}
	ok := w.object(func(key []byte) bool {
		switch string(key) {
		case "v":
			f, ok := w.number()
			l.V = int(f)
			return ok
		case "at":
			s, ok := w.text()
			if !ok {
				return false
			}
			at, err := time.Parse(time.RFC3339Nano, s)
			l.At = at
			return err == nil
		case "trigger":
			return w.textTo(&l.Trigger)
		case "published":
			return w.textTo(&l.Published)
		case "recommended":
			return w.textTo(&l.Recommended)
		case "source":
			return w.textTo(&l.Source)
		case "config_digest":
			return w.textTo(&l.ConfigDigest)
		case "actor":
			return w.textTo(&l.Actor)
		case "signals":
			return w.signals(l)
		case "partial":
			return w.decode(&l.Partial)
		case "override":
			return w.decode(&l.Override)
		case "fleet_override":
			return w.decode(&l.FleetOverride)
		}
		if folds(key, lineKeys) {
			return false // encoding/json matches a key whatever its case: let it read the line
		}
		return w.skip()
	})
	w.space()
	return ok && w.i == len(b)
}

// lineKeys and signalKeys are the keys scan reads, at the top level and
// in a signal.
var (
	lineKeys   = []string{"v", "at", "trigger", "published", "recommended", "source", "config_digest", "actor", "signals", "partial", "override", "fleet_override"}
	signalKeys = []string{"value", "state", "avg60"}
)

// folds reports whether key is one of keys but for case, as encoding/json
// matches a field's name.
func folds(key []byte, keys []string) bool {
	for _, k := range keys {
		if bytes.EqualFold(key, []byte(k)) {
			return true
		}
	}
	return false
}

// walker scans one JSON value after another in b.
type walker struct {
	b     []byte
	i     int
	names map[string]levels.Signal
}

func (w *walker) space() {
	for w.i < len(w.b) && (w.b[w.i] == ' ' || w.b[w.i] == '\t' || w.b[w.i] == '\n' || w.b[w.i] == '\r') {
		w.i++
	}
}

func (w *walker) peek() byte {
	w.space()
	if w.i < len(w.b) {
		return w.b[w.i]
	}
	return 0
}

// object calls fn with each key of an object, positioned at its value,
// which fn must consume.
func (w *walker) object(fn func(key []byte) bool) bool {
	if w.peek() != '{' {
		return false
	}
	w.i++
	if w.peek() == '}' {
		w.i++
		return true
	}
	for {
		key, esc, ok := w.str()
		if !ok || esc || w.peek() != ':' {
			return false // an escaped or ill-formed key: encoding/json reads it
		}
		w.i++
		if !fn(key) {
			return false
		}
		switch w.peek() {
		case ',':
			w.i++
		case '}':
			w.i++
			return true
		default:
			return false
		}
	}
}

// str reads a string: its raw bytes between the quotes, and whether they
// are not the string itself (an escape, or bytes that are not UTF-8, which
// encoding/json reads as U+FFFD). It refuses what encoding/json refuses in
// a string: a control character (below 0x20) and an escape JSON does not
// have.
func (w *walker) str() (raw []byte, esc, ok bool) {
	if w.peek() != '"' {
		return nil, false, false
	}
	start := w.i + 1
	high := false
	for j := start; j < len(w.b); j++ {
		switch c := w.b[j]; {
		case c == '"':
			w.i = j + 1
			raw = w.b[start:j]
			return raw, esc || high && !utf8.Valid(raw), true
		case c == '\\':
			n := escapeLen(w.b[j+1:])
			if n == 0 {
				return nil, false, false
			}
			esc = true
			j += n
		case c < 0x20:
			return nil, false, false
		case c >= 0x80:
			high = true
		}
	}
	return nil, false, false
}

// escapeLen is the length of the escape after a backslash at the start
// of b: 1 for \" \\ \/ \b \f \n \r \t, 5 for \u and four hex digits, 0
// for anything else.
func escapeLen(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	switch b[0] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 1
	case 'u':
		if len(b) < 5 {
			return 0
		}
		for _, c := range b[1:5] {
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return 0
			}
		}
		return 5
	}
	return 0
}

// text reads a string value, unescaped.
func (w *walker) text() (string, bool) {
	start := w.i
	raw, esc, ok := w.str()
	if !ok {
		return "", false
	}
	if !esc {
		return string(raw), true
	}
	var s string
	err := json.Unmarshal(w.b[start:w.i], &s)
	return s, err == nil
}

func (w *walker) textTo(dst *string) bool {
	s, ok := w.text()
	*dst = s
	return ok
}

// number reads a number.
func (w *walker) number() (float64, bool) {
	w.space()
	start := w.i
	for ; w.i < len(w.b); w.i++ {
		if c := w.b[w.i]; (c < '0' || c > '9') && c != '-' && c != '+' && c != '.' && c != 'e' && c != 'E' {
			break
		}
	}
	if !jsonNumber(w.b[start:w.i]) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(w.b[start:w.i]), 64)
	return f, err == nil
}

// jsonNumber reports whether b is a number as JSON writes one:
// -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? (strconv takes more: 00,
// +1, .5, 1.).
func jsonNumber(b []byte) bool {
	i := 0
	digits := func() int {
		n := 0
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(b)
}

// literal reads true, false or null.
func (w *walker) literal() bool {
	w.space()
	for _, lit := range []string{"null", "true", "false"} {
		if bytes.HasPrefix(w.b[w.i:], []byte(lit)) {
			w.i += len(lit)
			return true
		}
	}
	return false
}

// skip passes over any value.
func (w *walker) skip() bool {
	switch c := w.peek(); {
	case c == '"':
		_, _, ok := w.str()
		return ok
	case c == '{':
		return w.object(func([]byte) bool { return w.skip() })
	case c == '[':
		w.i++
		if w.peek() == ']' {
			w.i++
			return true
		}
		for {
			if !w.skip() {
				return false
			}
			switch w.peek() {
			case ',':
				w.i++
			case ']':
				w.i++
				return true
			default:
				return false
			}
		}
	case c == 'n' || c == 't' || c == 'f':
		return w.literal()
	default:
		_, ok := w.number()
		return ok
	}
}

// decode reads the next value into v with encoding/json (null leaves a
// pointer nil): for the small objects that are rarely there.
func (w *walker) decode(v any) bool {
	w.space()
	start := w.i
	if !w.skip() {
		return false
	}
	if bytes.Equal(w.b[start:w.i], []byte("null")) {
		return true
	}
	return json.Unmarshal(w.b[start:w.i], v) == nil
}

// signals reads the "signals" object: each signal's value, state and
// avg60.
func (w *walker) signals(l *levels.Line) bool {
	if l.Signals == nil { // a second "signals" adds to the first, as in encoding/json
		l.Signals = make(map[levels.Signal]levels.LineSignal, 8)
	}
	return w.object(func(name []byte) bool {
		var ls levels.LineSignal
		ok := w.object(func(key []byte) bool {
			switch string(key) {
			case "value":
				if w.peek() == 'n' {
					ls.Value = nil // a later null wins, as in encoding/json
					return w.literal()
				}
				f, ok := w.number()
				ls.Value = &f
				return ok
			case "state":
				return w.textTo(&ls.State)
			case "avg60":
				if w.peek() == 'n' {
					ls.Avg60 = nil
					return w.literal()
				}
				f, ok := w.number()
				ls.Avg60 = &f
				return ok
			}
			if folds(key, signalKeys) {
				return false
			}
			return w.skip()
		})
		sig, known := w.names[string(name)]
		if !known {
			sig = levels.Signal(name)
			if len(w.names) < 256 {
				w.names[string(sig)] = sig
			}
		}
		l.Signals[sig] = ls
		return ok
	})
}
