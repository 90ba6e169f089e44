package main

import (
	"bytes"
	"io"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// safeText is a writer for text a person reads in a terminal: every
// control character but newline and tab, every bidirectional control and
// every byte that is not UTF-8 is written as its Go escape (\x1b, \a,
// \u202e, \xff), the rest as it is. What the commands print comes from
// the daemon, and through it from operators, reports, a recording or
// etcd: a fleet override written into etcd by hand, its reason holding
// ESC [2J and ESC ]0;, cleared the operator's screen and retitled the
// window at `degraded status`. JSON output passes through unchanged:
// encoding/json escapes the controls itself, and a bidirectional control
// written as \u202e means the same inside a JSON string.
type safeText struct{ w io.Writer }

func (s safeText) Write(p []byte) (int, error) {
	if !needsEscape(p) {
		return s.w.Write(p)
	}
	var b bytes.Buffer
	for rest := p; len(rest) > 0; {
		r, size := utf8.DecodeRune(rest)
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\x`)
			b.WriteString(strconv.FormatUint(uint64(rest[0])>>4, 16))
			b.WriteString(strconv.FormatUint(uint64(rest[0])&15, 16))
		case r == '\n' || r == '\t' || !escaped(r):
			b.Write(rest[:size])
		default:
			q := strconv.QuoteRune(r) // '\x1b'
			b.WriteString(q[1 : len(q)-1])
		}
		rest = rest[size:]
	}
	if _, err := s.w.Write(b.Bytes()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// needsEscape reports whether p holds anything safeText rewrites.
func needsEscape(p []byte) bool {
	for i := 0; i < len(p); {
		if c := p[i]; c < utf8.RuneSelf {
			if c < 0x20 && c != '\n' && c != '\t' || c == 0x7f {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(p[i:])
		if r == utf8.RuneError && size == 1 || escaped(r) {
			return true
		}
		i += size
	}
	return false
}

// escaped reports whether r is a control or a bidirectional control.
func escaped(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
}
