package fleet

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

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

// TestEtcdClientLogsAreRateLimited: a retry warning every 25ms while a
// member is down is logged once every 10s, saying how many were not.
func TestEtcdClientLogsAreRateLimited(t *testing.T) {
	var buf bytes.Buffer
	z := zapLogger(slog.New(slog.NewTextHandler(&buf, nil)))
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	for i := range 800 { // 20s of retries
		if ce := z.Check(zap.WarnLevel, "retrying of unary invoker failed"); ce != nil {
			ce.Time = t0.Add(time.Duration(i) * 25 * time.Millisecond)
			ce.Write(zap.Int("attempt", i))
		}
	}
	z.Warn("another message")
	got := buf.String()
	if n := strings.Count(got, "retrying of unary invoker failed"); n != 2 {
		t.Errorf("%d retry lines in 20s, want 2:\n%s", n, got)
	}
	if !strings.Contains(got, "attempt=400 suppressed=399") || !strings.Contains(got, "another message") {
		t.Errorf("the second line does not count the suppressed ones, or another message was held back:\n%s", got)
	}
}

type testError struct{}

func (testError) Error() string { return "test error" }

var errTest error = testError{}
