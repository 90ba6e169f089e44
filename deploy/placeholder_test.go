package deploy

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestSystemdPlaceholderRefused: the systemd example ships a placeholder
// report token; copied without changing it, the daemon refuses to start
// and says which key to change, rather than running with a guessable token.
func TestSystemdPlaceholderRefused(t *testing.T) {
	_, err := loadExample(t, filepath.Join("systemd", "degraded.yaml"), nil)
	if err == nil || !strings.Contains(err.Error(), "auth.report_token") {
		t.Fatalf("the example as shipped: %v, want an error naming auth.report_token", err)
	}
}
