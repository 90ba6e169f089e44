package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestValidateTokens(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	lf := file("lf", "admin-secret\n")
	crlf := file("crlf", "admin-secret\r\n")
	bare := file("bare", "admin-secret")
	twoNewlines := file("two-newlines", "admin-secret\n\n")
	leading := file("leading", " admin-secret\n")
	blank := file("blank", "  \n")
	placeholder := file("placeholder", placeholderToken+"\n")
	huge := file("huge", strings.Repeat("a", maxFileBytes+1))
	zero := filepath.Join(dir, "zero")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	const (
		space     = "must not start or end with whitespace"
		yamlBlock = "; it ends with a newline, as a YAML | block does: quote it instead"
		hidden    = " (was a secret, not shown)"
	)

	tests := []struct {
		name string
		auth Auth
		want []string
	}{
		{"plain tokens", Auth{Token: "admin-secret", ReportToken: "report-secret"}, nil},
		{"token_file with LF", Auth{TokenFile: lf, ReportToken: "report-secret"}, nil},
		{"token_file with CRLF", Auth{TokenFile: crlf, ReportToken: "report-secret"}, nil},
		{"token_file without newline", Auth{TokenFile: bare}, nil},
		{"token ending in a newline (token: |)", Auth{Token: "admin-secret\n"},
			[]string{"auth.token: " + space + yamlBlock + hidden}},
		{"token with a trailing space", Auth{Token: "admin-secret "},
			[]string{"auth.token: " + space + hidden}},
		{"report token with a leading tab", Auth{ReportToken: "\treport"},
			[]string{"auth.report_token: " + space + hidden}},
		{"token_file with two newlines", Auth{TokenFile: twoNewlines},
			[]string{"auth.token_file: the token in it " + space + "; one trailing newline is trimmed, no more (was " + twoNewlines + ")"}},
		{"token_file with a leading space", Auth{TokenFile: leading},
			[]string{"auth.token_file: the token in it " + space + "; one trailing newline is trimmed, no more (was " + leading + ")"}},
		{"token_file of spaces", Auth{TokenFile: blank},
			[]string{"auth.token_file: must not be empty (was " + blank + ")"}},
		{"token_file over 1 MiB", Auth{TokenFile: huge},
			[]string{"auth.token_file: must be a readable file: larger than the 1 MiB limit (was " + huge + ")"}},
		{"token_file that never ends", Auth{TokenFile: zero},
			[]string{"auth.token_file: must be a readable file: larger than the 1 MiB limit (was " + zero + ")"}},
		{"admin token equal to report token", Auth{Token: "same-secret", ReportToken: "same-secret"},
			[]string{"auth.report_token: must differ from the admin token (auth.token or auth.token_file), or a reporting service could set overrides" + hidden}},
		{"token_file equal to report token", Auth{TokenFile: lf, ReportToken: "admin-secret"},
			[]string{"auth.report_token: must differ from the admin token (auth.token or auth.token_file), or a reporting service could set overrides" + hidden}},
		{"the systemd example's placeholder", Auth{Token: "admin-secret", ReportToken: placeholderToken},
			[]string{"auth.report_token: must not be the example's placeholder; set a long random string" + hidden}},
		{"the placeholder as admin token", Auth{Token: placeholderToken},
			[]string{"auth.token: must not be the example's placeholder; set a long random string" + hidden}},
		{"the placeholder in token_file", Auth{TokenFile: placeholder},
			[]string{"auth.token_file: the token in it must not be the example's placeholder; set a long random string (was " + placeholder + ")"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			c.Auth = tt.auth
			_, err := c.Validate()
			if diff := cmp.Diff(tt.want, problems(t, err)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			_, adminErr := c.AdminToken()
			if fileBad := tt.auth.TokenFile != "" && len(tt.want) > 0 && strings.HasPrefix(tt.want[0], "auth.token_file"); fileBad != (adminErr != nil) {
				t.Errorf("AdminToken() error %v, want an error: %v", adminErr, fileBad)
			}
		})
	}
}

func TestPlaceholderIsTheDeployExamples(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "deploy", "systemd", "degraded.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), placeholderToken) {
		t.Errorf("deploy/systemd/degraded.yaml no longer holds %q: update placeholderToken", placeholderToken)
	}
}

func TestAdminTokenFromFile(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, content string
		want          string
		wantErr       string
	}{
		{"LF trimmed", "from-file\n", "from-file", ""},
		{"CRLF trimmed", "from-file\r\n", "from-file", ""},
		{"only one newline trimmed", "from-file\n\n", "", "auth.token_file: the token in it must not start or end with whitespace"},
		{"leading space", "  from-file\n", "", "auth.token_file: the token in it must not start or end with whitespace"},
		{"empty", "\n", "", "auth.token_file: must not be empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-"))
			if err := os.WriteFile(p, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := (&Config{Auth: Auth{TokenFile: p}}).AdminToken()
			if got != tt.want {
				t.Errorf("AdminToken() = %q, want %q", got, tt.want)
			}
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.wantErr)) {
				t.Errorf("AdminToken() error %v, want one starting %q", err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "from-file") {
				t.Errorf("error reveals the token: %v", err)
			}
		})
	}
}

func TestCheckProtected(t *testing.T) {
	const needs = "a non-loopback address needs auth.token (or auth.token_file) and auth.report_token, or auth.allow_unauthenticated: true; missing "
	tests := []struct {
		name  string
		bound string
		auth  Auth
		want  []string
	}{
		{"loopback socket, no tokens", "127.0.0.1:8470", Auth{}, nil},
		{"IPv6 loopback socket", "[::1]:8470", Auth{}, nil},
		{"all interfaces, file says loopback, no tokens", "0.0.0.0:8470", Auth{},
			[]string{"listen: the socket bound to 0.0.0.0:8470 stays until a restart, and " + needs + "auth.token (or auth.token_file) and auth.report_token (was 127.0.0.1:8470)"}},
		{"IPv6 all interfaces, report token only", "[::]:8470", Auth{ReportToken: "r"},
			[]string{"listen: the socket bound to [::]:8470 stays until a restart, and " + needs + "auth.token (or auth.token_file) (was 127.0.0.1:8470)"}},
		{"admin token only", "10.0.0.1:8470", Auth{Token: "a"},
			[]string{"listen: the socket bound to 10.0.0.1:8470 stays until a restart, and " + needs + "auth.report_token (was 127.0.0.1:8470)"}},
		{"both tokens", "0.0.0.0:8470", Auth{Token: "a", ReportToken: "r"}, nil},
		{"token_file and report token", "[::]:8470", Auth{TokenFile: "/run/secrets/admin", ReportToken: "r"}, nil},
		{"allow_unauthenticated", "0.0.0.0:8470", Auth{AllowUnauthenticated: true}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default() // listen: 127.0.0.1:8470, which passes Validate
			c.Auth = tt.auth
			if diff := cmp.Diff(tt.want, problems(t, CheckProtected(c, tt.bound))); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}
