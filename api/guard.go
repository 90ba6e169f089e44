package api

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// browserSafety refuses what a web page could make a browser send: a
// change (PUT, POST, DELETE) from another origin is 403, and without an
// admin token a Host that is not a loopback name, the listen host or in
// allowed_hosts is 421, so a DNS-rebound name cannot reach an open daemon.
func (s *server) browserSafety(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.Tokens().Admin == "" && !s.hostServed(r.Host) {
			writeError(w, http.StatusMisdirectedRequest, fmt.Sprintf(
				"Host %q is not served: without an admin token only loopback names, the listen host and allowed_hosts are (DNS rebinding protection)", r.Host))
			return
		}
		switch r.Method {
		case http.MethodPut, http.MethodPost, http.MethodDelete:
			if origin, ok := r.Header["Origin"]; ok && !sameOrigin(origin[0], r) {
				writeError(w, http.StatusForbidden, fmt.Sprintf("cross-origin %s refused: Origin %q does not match Host %q", r.Method, origin[0], r.Host))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// hostServed reports whether a Host header may be answered without an
// admin token: IP literals always, names only if loopback, the listen
// host or in allowed_hosts (compared without port, case-insensitively).
func (s *server) hostServed(host string) bool {
	name := hostname(host)
	if name == "" {
		return false
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return true
	}
	if strings.EqualFold(name, "localhost") || (s.ListenHost != "" && strings.EqualFold(name, strings.TrimSuffix(s.ListenHost, "."))) {
		return true
	}
	if s.AllowedHosts != nil {
		for _, h := range s.AllowedHosts() {
			if strings.EqualFold(name, strings.TrimSuffix(h, ".")) {
				return true
			}
		}
	}
	return false
}

// hostname is host without its port, brackets or trailing dot.
func hostname(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.TrimSuffix(host, ".")
}

// sameOrigin reports whether an Origin header names the host and port the
// request was sent to. "null" (sandboxed frames, file: pages) never does.
func sameOrigin(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return hostPort(u.Host, u.Scheme) == hostPort(r.Host, scheme)
}

// hostPort is host:port, lower-case, with the scheme's default port filled in.
func hostPort(host, scheme string) string {
	h, p, err := net.SplitHostPort(host)
	if err != nil {
		h, p = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), map[string]string{"http": "80", "https": "443"}[scheme]
	}
	return net.JoinHostPort(strings.ToLower(h), p)
}
