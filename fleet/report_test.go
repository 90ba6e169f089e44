package fleet

import (
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// TestJudgeConflicts: a step table of report puts under one name, each
// with the value it replaced (WithPrevKV).
func TestJudgeConflicts(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	const ttl = 2 * time.Second
	kv := func(id string, rev, lease int64) *mvccpb.KeyValue {
		return &mvccpb.KeyValue{Value: []byte(`{"level":"Normal","instance_id":"` + id + `"}`), ModRevision: rev, Lease: lease}
	}
	for _, c := range []struct {
		name  string
		steps []struct {
			at   time.Duration
			prev *mvccpb.KeyValue
			rev  int64
			want verdict
		}
	}{
		{"a restart under the same name, the old lease still alive, is not a conflict", []struct {
			at   time.Duration
			prev *mvccpb.KeyValue
			rev  int64
			want verdict
		}{
			{0, kv("old", 10, 1), 20, verdict{tookOver: true, other: "old", otherLease: 1}},
			{time.Second, kv("me", 20, 2), 21, verdict{}},
			{2 * time.Second, kv("me", 21, 2), 22, verdict{}},
		}},
		{"a second live process is a conflict, which clears once it has gone", []struct {
			at   time.Duration
			prev *mvccpb.KeyValue
			rev  int64
			want verdict
		}{
			{0, nil, 20, verdict{}},
			{time.Second, kv("twin", 21, 3), 22, verdict{conflict: true, started: true, other: "twin", otherLease: 3}},
			{2 * time.Second, kv("twin", 23, 3), 24, verdict{conflict: true, other: "twin", otherLease: 3}},
			{3 * time.Second, kv("me", 24, 2), 25, verdict{conflict: true}}, // seen a second ago
			{4500 * time.Millisecond, kv("me", 25, 2), 26, verdict{ended: true, other: "twin"}},
			{5500 * time.Millisecond, kv("me", 26, 2), 27, verdict{}},
		}},
		{"its own value from an earlier session is not a conflict", []struct {
			at   time.Duration
			prev *mvccpb.KeyValue
			rev  int64
			want verdict
		}{
			{0, nil, 5, verdict{}},
			{time.Second, kv("me", 4, 9), 8, verdict{}},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var p putState
			for i, s := range c.steps {
				if got := p.judge(s.prev, "me", s.rev, t0.Add(s.at), ttl); got != s.want {
					t.Errorf("step %d (at %s): %+v, want %+v", i, s.at, got, s.want)
				}
			}
		})
	}
}
