package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// This file holds the rules about who may talk to the daemon: tokens,
// protected mode and allowed Host names.

// placeholderToken is the token the deploy/systemd example ships with. A
// config that still holds it has not been finished: it is refused.
const placeholderToken = "change-me-to-a-long-random-string"

// maxFileBytes caps every file the configuration reads (the config file and
// auth.token_file), so that /dev/zero or a runaway file is an error instead
// of all the memory there is.
const maxFileBytes = 1 << 20

// errTooLarge says a file is over maxFileBytes, naming the limit.
var errTooLarge = errors.New("larger than the 1 MiB limit")

// readFile reads at most maxFileBytes of path; a longer file is a
// *fs.PathError wrapping errTooLarge.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxFileBytes {
		return nil, &fs.PathError{Op: "read", Path: path, Err: errTooLarge}
	}
	return b, nil
}

// fileToken reads the admin token from an auth.token_file: the contents
// less exactly one trailing "\n" or "\r\n". It returns the token, or what
// is wrong with the file in a problem's words ("must not be empty"),
// naming neither the path nor the token.
func fileToken(path string) (token, problem string) {
	b, err := readFile(path)
	if err != nil {
		return "", "must be a readable file: " + cause(err)
	}
	t := string(b)
	if strings.HasSuffix(t, "\n") {
		t = strings.TrimSuffix(t[:len(t)-1], "\r")
	}
	if strings.TrimSpace(t) == "" {
		return "", "must not be empty"
	}
	if what := tokenProblem(t); what != "" {
		if strings.TrimSpace(t) != t {
			what += "; one trailing newline is trimmed, no more"
		}
		return "", "the token in it " + what
	}
	return t, ""
}

// tokenProblem says what makes t unusable as a token, or "". It never
// includes t.
func tokenProblem(t string) string {
	switch {
	case strings.TrimSpace(t) != t:
		return "must not start or end with whitespace"
	case t == placeholderToken:
		return "must not be the example's placeholder; set a long random string"
	}
	return ""
}

// inlineToken checks auth.token or auth.report_token.
func (v *validator) inlineToken(key, t string) {
	what := tokenProblem(t)
	if what == "" {
		return
	}
	if strings.HasSuffix(t, "\n") {
		what += "; it ends with a newline, as a YAML | block does: quote it instead"
	}
	v.add(key, what, secret{})
}

// secret stands for a token in "(was VALUE)": it is never shown.
type secret struct{}

// Operator is one entry of auth.operators: a named admin token, given
// inline (Token) or in a file (TokenFile), exactly one of the two. Its
// fields are secrets: never log them.
type Operator struct {
	// Name is recorded as the actor of every change made with the token:
	// ^[a-z][a-z0-9_.-]{0,31}$, unique, not one of [ReservedActors].
	Name string `koanf:"name"`
	// Token is the operator's bearer token.
	Token string `koanf:"token"`
	// TokenFile names a file holding the token, read like auth.token_file
	// (one trailing newline trimmed, at most 1 MiB, re-read on reload).
	TokenFile string `koanf:"token_file"`
}

// ReservedActors are the actor names that never name an operator: the
// admin token's, a request without configured tokens, the daemon's own
// changes and a SIGHUP reload.
var ReservedActors = []string{"admin", "anonymous", "degraded", "signal"}

// operatorName is what an operator's name must match.
var operatorName = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,31}$`)

// OperatorToken is an operator's name and its token, read.
type OperatorToken struct {
	Name, Token string
}

// OperatorTokens returns the operators' names and tokens in config order,
// reading each token_file on every call (so a rotated secret is picked up
// on reload). It fails on a file [Config.Validate] would refuse, naming
// the key, never the token.
func (c *Config) OperatorTokens() ([]OperatorToken, error) {
	out := make([]OperatorToken, 0, len(c.Auth.Operators))
	for i, o := range c.Auth.Operators {
		t := o.Token
		if t == "" {
			var what string
			if t, what = fileToken(o.TokenFile); what != "" {
				return nil, fmt.Errorf("auth.operators[%d].token_file: %s (was %s)", i, what, show(o.TokenFile))
			}
		}
		out = append(out, OperatorToken{Name: o.Name, Token: t})
	}
	return out, nil
}

// operators checks auth.operators: names, one token each, and tokens
// that differ from each other, the admin token and the report token.
func (v *validator) operators(a Auth, admin string) {
	names := map[string]int{}
	tokens := map[string]int{}
	for i, o := range a.Operators {
		key := fmt.Sprintf("auth.operators[%d]", i)
		switch first, seen := names[o.Name]; {
		case !operatorName.MatchString(o.Name):
			v.add(key+".name", "must match ^[a-z][a-z0-9_.-]{0,31}$", o.Name)
		case slices.Contains(ReservedActors, o.Name):
			v.add(key+".name", "is reserved (admin, anonymous, degraded and signal name who made a change without an operator)", o.Name)
		case seen:
			v.add(key+".name", fmt.Sprintf("is already auth.operators[%d]'s: names are unique", first), o.Name)
		default:
			names[o.Name] = i
		}
		var token string
		switch {
		case o.Token == "" && o.TokenFile == "":
			v.add(key, "needs a token or a token_file", map[string]any{})
			continue
		case o.Token != "" && o.TokenFile != "":
			v.add(key+".token_file", "set only one of token and token_file", o.TokenFile)
			continue
		case o.Token != "":
			key += ".token"
			v.inlineToken(key, o.Token)
			if tokenProblem(o.Token) != "" {
				continue
			}
			token = o.Token
		default:
			key += ".token_file"
			t, what := fileToken(o.TokenFile)
			if what != "" {
				v.add(key, what, o.TokenFile)
				continue
			}
			token = t
		}
		switch first, seen := tokens[token]; {
		case seen:
			v.add(key, fmt.Sprintf("must differ from auth.operators[%d]'s token: each operator has a token of their own", first), secret{})
		case admin != "" && token == admin:
			v.add(key, "must differ from the admin token (auth.token or auth.token_file), or the history could not tell them apart", secret{})
		case a.ReportToken != "" && token == a.ReportToken:
			v.add(key, "must differ from auth.report_token, or a reporting service could set overrides", secret{})
		default:
			tokens[token] = i
		}
	}
}

// auth checks the tokens, and the admin token against the report token.
func (v *validator) auth(a Auth) {
	admin := a.Token
	if a.Token != "" {
		v.inlineToken("auth.token", a.Token)
	}
	if a.TokenFile != "" {
		if a.Token != "" {
			v.add("auth.token_file", "set only one of auth.token and auth.token_file", a.TokenFile)
		} else if t, what := fileToken(a.TokenFile); what != "" {
			v.add("auth.token_file", what, a.TokenFile)
		} else {
			admin = t
		}
	}
	if a.ReportToken != "" {
		v.inlineToken("auth.report_token", a.ReportToken)
		if a.ReportToken == admin {
			v.add("auth.report_token", "must differ from the admin token (auth.token or auth.token_file), or a reporting service could set overrides", secret{})
		}
	}
	v.operators(a, admin)
}

// AdminToken returns the admin token: auth.token if set, else the contents
// of auth.token_file less one trailing newline, else "" (override and
// reload open). It reads the file on every call, so a rotated secret is
// picked up on reload, and fails on a file [Config.Validate] would refuse.
func (c *Config) AdminToken() (string, error) {
	if c.Auth.Token != "" || c.Auth.TokenFile == "" {
		return c.Auth.Token, nil
	}
	t, what := fileToken(c.Auth.TokenFile)
	if what != "" {
		return "", fmt.Errorf("auth.token_file: %s (was %s)", what, show(c.Auth.TokenFile))
	}
	return t, nil
}

// unprotected applies protected mode to a socket at addr: it says what a
// non-loopback address misses ("" when nothing). It is the one home of the
// rule, for the file's listen and for the socket actually bound.
func unprotected(addr string, a Auth) string {
	if isLoopback(addr) || a.AllowUnauthenticated {
		return ""
	}
	var missing []string
	if a.Token == "" && a.TokenFile == "" && len(a.Operators) == 0 { // operators' tokens are admin tokens
		missing = append(missing, "auth.token (or auth.token_file)")
	}
	if a.ReportToken == "" {
		missing = append(missing, "auth.report_token")
	}
	if len(missing) == 0 {
		return ""
	}
	return "a non-loopback address needs auth.token (or auth.token_file) and auth.report_token, or auth.allow_unauthenticated: true; missing " + strings.Join(missing, " and ")
}

// CheckProtected applies protected mode to bound, the address the daemon's
// socket is actually bound to (net.Listener.Addr().String(), such as
// "0.0.0.0:8470" or "[::]:8470"), instead of c.Listen. A reload cannot
// move the socket, so a config that would leave it without the tokens
// protected mode asks for must be refused. It returns nil, or a
// *[ValidationError] whose one problem names bound and what is missing.
func CheckProtected(c *Config, bound string) error {
	what := unprotected(bound, c.Auth)
	if what == "" {
		return nil
	}
	return &ValidationError{Problems: []string{fmt.Sprintf(
		"listen: the socket bound to %s stays until a restart, and %s (was %s)", bound, what, show(c.Listen))}}
}

// IsLoopback reports whether Listen binds only a loopback address:
// 127.0.0.0/8, ::1 or "localhost". An empty host (":8470") binds every
// interface and is not loopback; neither is an address that does not parse.
func (c *Config) IsLoopback() bool { return isLoopback(c.Listen) }

func isLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	return ip.Unmap().IsLoopback()
}

// hostLabel is one dot-separated label of a host name.
var hostLabel = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9_-]{0,61}[A-Za-z0-9])?$`)

// allowedHosts checks that each entry is a host name or an IP address,
// with no port and no wildcard.
func (v *validator) allowedHosts(hosts []string) {
	for i, h := range hosts {
		key := fmt.Sprintf("allowed_hosts[%d]", i)
		if _, err := netip.ParseAddr(h); err == nil {
			continue
		}
		host, port, err := net.SplitHostPort(h)
		if err == nil {
			_, err = strconv.ParseUint(port, 10, 16)
		}
		_, ipErr := netip.ParseAddr(host)
		switch {
		case strings.TrimSpace(h) == "":
			v.add(key, "must not be empty", h)
		case strings.Contains(h, "*"):
			v.add(key, "must not be a wildcard: list each host name", h)
		case err == nil && (ipErr == nil || validHostName(host)):
			v.add(key, "must not have a port: a host name or IP address only", h)
		case !validHostName(h):
			v.add(key, "must be a host name or an IP address", h)
		}
	}
}

// validHostName reports whether h is a DNS host name (a trailing dot
// allowed).
func validHostName(h string) bool {
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return false
	}
	for l := range strings.SplitSeq(h, ".") {
		if !hostLabel.MatchString(l) {
			return false
		}
	}
	return true
}
