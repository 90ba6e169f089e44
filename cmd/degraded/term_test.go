package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestSafeTextEscapesWhatDrivesATerminal: controls but newline and tab,
// bidirectional controls and bytes that are not UTF-8 are written as Go
// escapes; everything else, accents and CJK included, as it is.
func TestSafeTextEscapesWhatDrivesATerminal(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"Level\tMajor\n", "Level\tMajor\n"},
		{"café 東京", "café 東京"},
		{"INC-1 \x1b[2J\x1b]0;owned\a", `INC-1 \x1b[2J\x1b]0;owned\a`},
		{"a\rb\x7fc\x00", `a\rb\x7fc\x00`},
		{"\u0085 next line", `\u0085 next line`},
		{"abc\u202edcba", `abc\u202edcba`},
		{"bad \xff byte", `bad \xff byte`},
	} {
		var b bytes.Buffer
		n, err := safeText{&b}.Write([]byte(c.in))
		if err != nil || n != len(c.in) || b.String() != c.want {
			t.Errorf("Write(%q) = %d, %v, wrote %q; want %d, nil, %q", c.in, n, err, b.String(), len(c.in), c.want)
		}
	}
	// JSON output is unchanged in meaning: a bidirectional control that
	// encoding/json writes raw comes out escaped, and decodes the same.
	raw, _ := json.Marshal(map[string]string{"reason": "abc\u202edcba"})
	var b bytes.Buffer
	safeText{&b}.Write(raw)
	var back map[string]string
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || back["reason"] != "abc\u202edcba" {
		t.Errorf("JSON %s through safeText: %s, decoded %q, %v; want the same reason", raw, b.String(), back["reason"], err)
	}
}

// TestStatusPrintsNoTerminalEscapes: a daemon whose reason and fleet
// override hold terminal escapes (a fleet override written into etcd by
// hand, before fleet refused them; a daemon of another version) is shown
// with them escaped, by status and on the way out as an error.
func TestStatusPrintsNoTerminalEscapes(t *testing.T) {
	const evil = `INC-1 \u001b[2J\u001b]0;owned\u0007 \u001b[31mRED`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/level":
			fmt.Fprintf(w, `{"level":"Major","index":1,"priority_threshold":50,"source":"fleet","recommended":"Normal","reason":"fleet override set: %s",`+
				`"since":"2026-12-01T09:00:00Z","sequence":1,"override":null,"disabled_features":[],`+
				`"fleet":{"name":"shop","instance":"a","connected":true,"override":{"level":"Major","mode":"pin","ttl":"10m0s","reason":"%s","actor":"mallory\u001b[1A",`+
				`"instance":"x","set_at":"2026-12-01T09:00:00Z","expires_at":"2099-12-01T09:10:00Z"}},`+
				`"signals":{"cpu_percent":null,"memory_percent":null,"error_rate_percent":null,"window_attempts":0,"window_failures":0,"status":{}}}`, evil, evil)
		case "/v1/levels":
			fmt.Fprint(w, `{"levels":[{"name":"Normal","index":0,"priority_threshold":0},{"name":"Major","index":1,"priority_threshold":50}]}`)
		default:
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"no such thing \u001b[2J"}`)
		}
	}))
	defer srv.Close()
	code, out, errOut := runCLI(t, nil, "status", "--addr", srv.URL)
	if code != 0 {
		t.Fatalf("status: exit %d %s", code, errOut)
	}
	if strings.ContainsAny(out, "\x1b\a") {
		t.Errorf("status printed terminal controls:\n%q", out)
	}
	for _, want := range []string{`Reason          fleet override set: INC-1 \x1b[2J\x1b]0;owned\a \x1b[31mRED`, `set by mallory\x1b[1A: INC-1 \x1b[2J`} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	code, _, errOut = runCLI(t, nil, "override", "clear", "--addr", srv.URL)
	if code == 0 || strings.Contains(errOut, "\x1b") || !strings.Contains(errOut, `no such thing \x1b[2J`) {
		t.Errorf("override clear against a daemon answering 400 with an escape: exit %d, stderr %q; want a failure, the escape escaped", code, errOut)
	}
}
