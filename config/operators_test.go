package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestValidateOperators: every bad auth.operators entry is named by its
// index and key, tokens never shown.
func TestValidateOperators(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bobFile := file("bob", "bob-secret\n")
	blank := file("blank", "\n")
	const hidden = " (was a secret, not shown)"
	alice := Operator{Name: "alice", Token: "alice-secret"}
	tests := []struct {
		name string
		auth Auth
		want []string
	}{
		{"two operators, a token and a token_file", Auth{Token: "admin-secret", ReportToken: "report-secret",
			Operators: []Operator{alice, {Name: "bob.smith-2_x", TokenFile: bobFile}}}, nil},
		{"operators without an admin token", Auth{Operators: []Operator{alice}}, nil},
		{"a name in capitals", Auth{Operators: []Operator{alice, {Name: "Bob", Token: "b"}}},
			[]string{"auth.operators[1].name: must match ^[a-z][a-z0-9_.-]{0,31}$ (was Bob)"}},
		{"an empty name", Auth{Operators: []Operator{{Token: "b"}}},
			[]string{`auth.operators[0].name: must match ^[a-z][a-z0-9_.-]{0,31}$ (was "")`}},
		{"a name of 33 characters", Auth{Operators: []Operator{{Name: "a" + strings.Repeat("b", 32), Token: "b"}}},
			[]string{"auth.operators[0].name: must match ^[a-z][a-z0-9_.-]{0,31}$ (was a" + strings.Repeat("b", 32) + ")"}},
		{"reserved names", Auth{Operators: []Operator{{Name: "admin", Token: "1"}, {Name: "anonymous", Token: "2"}, {Name: "degraded", Token: "3"}, {Name: "signal", Token: "4"}}},
			[]string{
				"auth.operators[0].name: is reserved (admin, anonymous, degraded and signal name who made a change without an operator) (was admin)",
				"auth.operators[1].name: is reserved (admin, anonymous, degraded and signal name who made a change without an operator) (was anonymous)",
				"auth.operators[2].name: is reserved (admin, anonymous, degraded and signal name who made a change without an operator) (was degraded)",
				"auth.operators[3].name: is reserved (admin, anonymous, degraded and signal name who made a change without an operator) (was signal)",
			}},
		{"a name twice", Auth{Operators: []Operator{alice, {Name: "bob", Token: "b"}, {Name: "alice", Token: "c"}}},
			[]string{"auth.operators[2].name: is already auth.operators[0]'s: names are unique (was alice)"}},
		{"no token", Auth{Operators: []Operator{{Name: "carol"}}},
			[]string{"auth.operators[0]: needs a token or a token_file (was a mapping)"}},
		{"both token and token_file", Auth{Operators: []Operator{{Name: "carol", Token: "c", TokenFile: bobFile}}},
			[]string{"auth.operators[0].token_file: set only one of token and token_file (was " + bobFile + ")"}},
		{"a token with a trailing newline", Auth{Operators: []Operator{{Name: "carol", Token: "c\n"}}},
			[]string{"auth.operators[0].token: must not start or end with whitespace; it ends with a newline, as a YAML | block does: quote it instead" + hidden}},
		{"an empty token_file", Auth{Operators: []Operator{{Name: "carol", TokenFile: blank}}},
			[]string{"auth.operators[0].token_file: must not be empty (was " + blank + ")"}},
		{"a missing token_file", Auth{Operators: []Operator{{Name: "carol", TokenFile: filepath.Join(dir, "nope")}}},
			[]string{"auth.operators[0].token_file: must be a readable file: no such file or directory (was " + filepath.Join(dir, "nope") + ")"}},
		{"two operators with one token", Auth{Operators: []Operator{alice, {Name: "bob", Token: "alice-secret"}}},
			[]string{"auth.operators[1].token: must differ from auth.operators[0]'s token: each operator has a token of their own" + hidden}},
		{"an operator with the admin token", Auth{Token: "bob-secret", Operators: []Operator{{Name: "bob", TokenFile: bobFile}}},
			[]string{"auth.operators[0].token_file: must differ from the admin token (auth.token or auth.token_file), or the history could not tell them apart" + hidden}},
		{"an operator with the report token", Auth{ReportToken: "alice-secret", Operators: []Operator{alice}},
			[]string{"auth.operators[0].token: must differ from auth.report_token, or a reporting service could set overrides" + hidden}},
		{"the placeholder", Auth{Operators: []Operator{{Name: "carol", Token: placeholderToken}}},
			[]string{"auth.operators[0].token: must not be the example's placeholder; set a long random string" + hidden}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			c.Auth = tt.auth
			_, err := c.Validate()
			if diff := cmp.Diff(tt.want, problems(t, err)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOperatorsFromYAML: auth.operators loads from a file, an unknown key
// in an entry is named, OperatorTokens reads token files on every call,
// and operators count as the admin token for protected mode.
func TestOperatorsFromYAML(t *testing.T) {
	dir := t.TempDir()
	bobFile := filepath.Join(dir, "bob")
	if err := os.WriteFile(bobFile, []byte("bob-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _, err := Load(LoadOptions{Path: writeConfig(t, `
listen: 0.0.0.0:8470
auth:
  report_token: report-secret
  operators:
    - {name: alice, token: alice-secret}
    - {name: bob, token_file: `+bobFile+`}
`)})
	if err != nil {
		t.Fatalf("a config with operators and no auth.token on 0.0.0.0: %v, want it valid (operators are admin tokens)", err)
	}
	got, err := c.OperatorTokens()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]OperatorToken{{"alice", "alice-secret"}, {"bob", "bob-1"}}, got); diff != "" {
		t.Errorf("OperatorTokens (-want +got):\n%s", diff)
	}
	if err := os.WriteFile(bobFile, []byte("bob-2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.OperatorTokens(); got[1].Token != "bob-2" {
		t.Errorf("after rotating bob's token_file: %q, want bob-2 (re-read on every call, so on reload)", got[1].Token)
	}
	if err := os.WriteFile(bobFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.OperatorTokens(); err == nil || !strings.HasPrefix(err.Error(), "auth.operators[1].token_file: must not be empty") {
		t.Errorf("an emptied token_file: %v, want an error naming auth.operators[1].token_file", err)
	}

	_, _, err = Load(LoadOptions{Path: writeConfig(t, "auth: {operators: [{name: alice, tokn: x}]}\n")})
	if p := problems(t, err); len(p) == 0 || !strings.HasPrefix(p[0], "auth.operators[0].tokn: unknown key") {
		t.Errorf("a mistyped key in an operator: %v, want auth.operators[0].tokn named", p)
	}
}
