package fleet

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"go.uber.org/zap"
)

// TestEtcdClientLogsReachSlog: the etcd client's zap logger writes its
// warnings and errors, with their fields, to the daemon's slog logger;
// debug and info lines are dropped.
func TestEtcdClientLogsReachSlog(t *testing.T) {
	var buf bytes.Buffer
	z := zapLogger(slog.New(slog.NewTextHandler(&buf, nil))).Named("client").With(zap.String("endpoint", "http://10.0.0.1:2379"))
	z.Debug("dialing")
	z.Info("connected")
	z.Warn("retrying of unary invoker failed", zap.Int("attempt", 3), zap.Error(errTest))
	z.Error("lease keepalive failed")
	got := buf.String()
	for _, want := range []string{
		`level=WARN msg="etcd client: retrying of unary invoker failed" logger=client attempt=3 endpoint=http://10.0.0.1:2379 error="test error"`,
		`level=ERROR msg="etcd client: lease keepalive failed" logger=client endpoint=http://10.0.0.1:2379`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "dialing") || strings.Contains(got, "connected") {
		t.Errorf("debug or info lines reached the log:\n%s", got)
	}
}

type testError struct{}

func (testError) Error() string { return "test error" }

var errTest error = testError{}
