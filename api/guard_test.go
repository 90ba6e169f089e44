package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestCrossSiteReloadRefused is issue 10's regression: on a tokenless
// daemon, a page on another site POSTing text/plain to /-/reload (a
// "simple" request a browser sends without asking) must not reload.
func TestCrossSiteReloadRefused(t *testing.T) {
	var reloads atomic.Int64
	r := newRig(t, Deps{Reload: func(string) error { reloads.Add(1); return nil }})
	w := r.do("POST", "/-/reload", "", "Content-Type", "text/plain", "Origin", "https://evil.example", "Host", "127.0.0.1:8470")
	if w.Code != http.StatusForbidden {
		t.Fatalf("cross-site reload: %d %s, want 403", w.Code, w.Body)
	}
	if b := decodeBody[errorBody](t, w); !strings.Contains(b.Error, `Origin "https://evil.example"`) {
		t.Errorf("error %q, want it to name the Origin", b.Error)
	}
	if n := reloads.Load(); n != 0 {
		t.Fatalf("the cross-site request reloaded %d times", n)
	}
	if w := r.do("POST", "/-/reload", "", "Host", "127.0.0.1:8470"); w.Code != 200 || reloads.Load() != 1 {
		t.Fatalf("reload without Origin: %d, %d reloads; want 200 and one", w.Code, reloads.Load())
	}
}

// TestRebindingRefused is issue 10's regression: a page whose name was
// rebound to 127.0.0.1 sends its own name as Host; a tokenless daemon must
// not take the override.
func TestRebindingRefused(t *testing.T) {
	r := newRig(t, Deps{})
	w := r.do("PUT", "/v1/override", `{"level":"Major","ttl":"1m","reason":"x"}`, "Host", "rebind.evil.example")
	if w.Code != http.StatusMisdirectedRequest {
		t.Fatalf("rebound PUT: %d %s, want 421", w.Code, w.Body)
	}
	if b := decodeBody[errorBody](t, w); !strings.Contains(b.Error, `Host "rebind.evil.example"`) {
		t.Errorf("error %q, want it to name the Host", b.Error)
	}
	if st := r.c.State(); st.Override != nil || st.Sequence != 0 {
		t.Fatalf("the rebound request changed the state: %+v", st)
	}
}

func TestHostRule(t *testing.T) {
	var allowed atomic.Pointer[[]string]
	allowed.Store(&[]string{"ops.example", "Degraded.Internal."})
	r := newRig(t, Deps{ListenHost: "degraded.local", AllowedHosts: func() []string { return *allowed.Load() }})
	tests := []struct {
		host string
		code int
	}{
		{"localhost:8470", 200},
		{"LocalHost", 200},
		{"localhost.:8470", 200},
		{"127.0.0.1:8470", 200},
		{"127.9.9.9", 200},
		{"[::1]:8470", 200},
		{"10.0.0.7:8470", 200},      // IP literals are always served
		{"[2001:db8::1]:8470", 200}, // IPv6 too
		{"degraded.local:8470", 200},
		{"ops.example:9000", 200}, // allowed_hosts has no ports: any port
		{"degraded.internal", 200},
		{"rebind.evil.example:8470", 421},
		{"localhost.evil.example", 421},
		{"ops.example.evil.example", 421},
		{"", 421},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			if w := r.do("GET", "/v1/level", "", "Host", tt.host); w.Code != tt.code {
				t.Errorf("Host %q: %d %s, want %d", tt.host, w.Code, w.Body, tt.code)
			}
		})
	}
	t.Run("allowed_hosts reloads", func(t *testing.T) {
		allowed.Store(&[]string{"new.example"})
		if w := r.do("GET", "/healthz", "", "Host", "ops.example"); w.Code != 421 {
			t.Errorf("a host removed from allowed_hosts: %d, want 421", w.Code)
		}
		if w := r.do("GET", "/healthz", "", "Host", "new.example:8470"); w.Code != 200 {
			t.Errorf("a host added to allowed_hosts: %d, want 200", w.Code)
		}
	})
	t.Run("an admin token lifts it", func(t *testing.T) {
		r.tokens.Store(&Tokens{Admin: "adm"})
		defer r.tokens.Store(&Tokens{})
		if w := r.do("GET", "/healthz", "", "Host", "rebind.evil.example"); w.Code != 200 {
			t.Errorf("any Host with an admin token: %d, want 200", w.Code)
		}
		if w := r.do("DELETE", "/v1/override", "", "Host", "rebind.evil.example"); w.Code != 401 {
			t.Errorf("a change with an admin token in force but not sent: %d, want 401", w.Code)
		}
	})
}

func TestOriginRule(t *testing.T) {
	r := newRig(t, Deps{})
	tests := []struct {
		name, method, host, origin string
		code                       int
	}{
		{"no Origin", "DELETE", "localhost:8470", "", 200},
		{"same origin", "DELETE", "localhost:8470", "http://localhost:8470", 200},
		{"same origin, other case", "DELETE", "localhost:8470", "http://LOCALHOST:8470", 200},
		{"default port", "DELETE", "localhost", "http://localhost", 200},
		{"default port spelled out", "DELETE", "localhost:80", "http://localhost", 200},
		{"IPv6", "DELETE", "[::1]:8470", "http://[::1]:8470", 200},
		{"other port", "DELETE", "localhost:8470", "http://localhost:3000", 403},
		{"port missing", "DELETE", "localhost:8470", "http://localhost", 403},
		{"https default port", "DELETE", "localhost:8470", "https://localhost", 403},
		{"other host", "PUT", "localhost:8470", "https://evil.example", 403},
		{"other host on outcomes", "POST", "localhost:8470", "https://evil.example", 403},
		{"null", "DELETE", "localhost:8470", "null", 403},
		{"not a URL", "DELETE", "localhost:8470", "localhost:8470", 403},
		{"reads are not checked", "GET", "localhost:8470", "https://evil.example", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target, body := "/v1/override", ""
			switch tt.method {
			case "GET":
				target = "/v1/level"
			case "PUT":
				body = `{"level":"Major","ttl":"1m","reason":"x"}`
			case "POST":
				target, body = "/v1/outcomes", `{"success":1}`
			}
			hdr := []string{"Host", tt.host}
			if tt.origin != "" {
				hdr = append(hdr, "Origin", tt.origin)
			}
			if w := r.do(tt.method, target, body, hdr...); w.Code != tt.code {
				t.Errorf("%s with Host %q, Origin %q: %d %s, want %d", tt.method, tt.host, tt.origin, w.Code, w.Body, tt.code)
			}
		})
	}
	if st := r.c.State(); st.Override != nil {
		t.Errorf("a cross-origin PUT set an override: %+v", st.Override)
	}
	if a, _ := r.win.Totals(timeZero); a != 0 {
		t.Errorf("a cross-origin report reached the window: %d attempts", a)
	}
}

// TestBodilessRequestsSkipContentType: a request without a body is not
// asked for a Content-Type; one with a body is.
func TestBodilessRequestsSkipContentType(t *testing.T) {
	r := newRig(t, Deps{Reload: func(string) error { return nil }})
	for _, tc := range []struct {
		method, target, body string
		code                 int
		msg                  string
	}{
		{"POST", "/-/reload", "", 200, ""},
		{"DELETE", "/v1/override", "", 200, ""},
		{"POST", "/v1/outcomes", "", 400, "body is empty"},
		{"POST", "/v1/outcomes", `{"success":1}`, 415, "Content-Type must be application/json"},
	} {
		req := newRequest(tc.method, tc.target, tc.body)
		w := httptest.NewRecorder()
		r.h.ServeHTTP(w, req)
		if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.msg) {
			t.Errorf("%s %s without Content-Type, body %q: %d %s, want %d %q", tc.method, tc.target, tc.body, w.Code, w.Body, tc.code, tc.msg)
		}
	}
}
