package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/degraded/degraded/fleet"
	"github.com/degraded/degraded/fleet/fleettest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// liar writes hand-made instance reports every tick until the test ends,
// each with a fresh "at", under a lease it keeps alive (or none): what a
// buggy or hostile writer of the instances/ keys can do.
func liar(t *testing.T, etcd *etcdServer, reports map[string]string, noLease ...string) {
	t.Helper()
	raw := etcd.raw(t)
	lease := keptLease(t, raw)
	bare := map[string]bool{}
	for _, n := range noLease {
		bare[n] = true
	}
	everyTick(t, func(ctx context.Context) {
		at := time.Now().UTC().Format(time.RFC3339Nano)
		for name, v := range reports {
			var opts []clientv3.OpOption
			if !bare[name] {
				opts = append(opts, clientv3.WithLease(lease))
			}
			_, _ = raw.Put(ctx, "/degraded/shop/instances/"+name, strings.ReplaceAll(v, "AT", at), opts...)
		}
	})
}

// keptLease grants a lease of 10s and keeps it alive until the test ends.
func keptLease(t *testing.T, raw *clientv3.Client) clientv3.LeaseID {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	lease, err := raw.Grant(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.KeepAlive(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	return lease.ID
}

// TestLyingReportsAreLeftOutOfTheFleetSums (finding 1): reports with
// negative failures, overflowing attempts, failures above attempts, a
// value that is not JSON, a key without a lease and a report whose "at"
// is old are left out of the fleet's error window and level counts, and
// each is logged once per key, however many ticks it stays.
func TestLyingReportsAreLeftOutOfTheFleetSums(t *testing.T) {
	// Not parallel: its lies load etcd and the machine, and the timed
	// tests (a hung member's PUTs within the dial timeout) ran late
	// beside it under -race.
	// A request limit of 128 KiB (1.5 MiB by default), so that the two
	// reports naming long levels below outgrow it at 100 KB each, not 1.4
	// MB: written every tick, those loaded the machine enough to fail the
	// timed tests beside this one.
	etcd := newEtcd(t)
	etcd.maxRequestBytes = 128 << 10
	etcd.start()
	a := fleetRig(t, fleetYAML(t, etcd.endpoint(), "a", "", ""))
	b := fleetRig(t, fleetYAML(t, etcd.endpoint(), "b", "", ""))
	eventually(t, 10*time.Second, "a fleet view of a and b", func() bool { return fleetView(t, a.Rig).Levels["Normal"] == 2 })
	if code, body := call(t, "POST", a.URL+"/v1/outcomes", `{"success":900,"failure":100}`); code != 202 {
		t.Fatalf("POST /v1/outcomes: %d %s", code, body)
	}
	old := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	// Two reports naming 100 KB levels: summed, their aggregate was over
	// etcd's request limit, every write of it failed, and with it the
	// aggregator's session, a tick at a time (found with 1.4 MB levels
	// against Debian's etcd and its default limit).
	huge := func(c string) string {
		return `{"level":"` + strings.Repeat(c, 100000) + `","window_attempts":10,"window_failures":10,"at":"AT","instance_id":"` + c + `"}`
	}
	liar(t, etcd, map[string]string{
		"huge-l":    huge("L"),
		"huge-m":    huge("M"),
		"long-name": `{"level":"` + strings.Repeat("N", 257) + `","window_attempts":10,"window_failures":10,"at":"AT","instance_id":"x6"}`,
		"negative":  `{"level":"Normal","window_attempts":1000,"window_failures":-333130,"at":"AT","instance_id":"x1"}`,
		"overflow":  `{"level":"Normal","window_attempts":9223372036854775807,"window_failures":0,"at":"AT","instance_id":"x2"}`,
		"inverted":  `{"level":"Emergency","window_attempts":10,"window_failures":1043,"at":"AT","instance_id":"x3"}`,
		"garbage":   `{"level":"Emergency",`,
		"handmade":  `{"level":"Emergency","window_attempts":10,"window_failures":10,"at":"AT","instance_id":"x4"}`,
		"long-dead": `{"level":"Emergency","window_attempts":10,"window_failures":10,"at":"` + old + `","instance_id":"x5"}`,
	}, "handmade")

	for i, r := range []*rig{a, b} {
		eventually(t, 10*time.Second, fmt.Sprintf("daemon %d's fleet view sums only a and b", i), func() bool {
			v := fleetView(t, r.Rig)
			return v.WindowAttempts == 1000 && v.WindowFailures == 100 && v.Levels["Emergency"] == 0 && v.Levels["Normal"]+v.Levels["Moderate"] == 2
		})
		if v := fleetView(t, r.Rig); len(v.Instances) != 2 || v.InstancesTotal != 11 {
			t.Errorf("daemon %d lists %+v of %d, want a and b of the 11 keys", i, v.Instances, v.InstancesTotal)
		}
	}
	first := fleetView(t, a.Rig).Aggregator.At
	eventually(t, 5*time.Second, "five more rounds of the same lies", func() bool {
		return fleetView(t, a.Rig).Aggregator.At.Sub(first) >= 5*testTick
	})
	logs := a.log.String() + b.log.String()
	if strings.Contains(logs, "etcd unreachable") || strings.Contains(logs, "lost the etcd member") {
		t.Errorf("a session was lost to the lies:\n%s", logs)
	}
	for _, key := range []string{"negative", "overflow", "inverted", "garbage", "handmade", "long-dead", "huge-l", "huge-m", "long-name"} {
		if n := strings.Count(logs, "key=/degraded/shop/instances/"+key+" "); n != 1 {
			t.Errorf("%s was logged %d times, want once:\n%s", key, n, logs)
		}
	}
	for _, want := range []string{"negative count", "count above 1e12", "failures above attempts", "not a JSON report", "has no lease", "older than fleet.instance_ttl",
		"the report is over 65536 bytes", "level is 257 characters, over 256"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log does not say %q:\n%s", want, logs)
		}
	}
	if v := fleetView(t, a.Rig); v.Aggregator == nil || v.Aggregator.Instance == "" || v.Aggregator.Term <= 0 {
		t.Errorf("the fleet view names no aggregator: %+v", v.Aggregator)
	}
	// Read until it holds: under a loaded CI machine (the browser tests
	// beside it) one late aggregate made a's reason "(local: fleet
	// aggregate stale)" for a tick, which is right for that tick.
	want := "fleet error_rate 10.00% > 5% (Moderate) over 2 instances"
	eventually(t, 10*time.Second, "a publishes Moderate with the reason "+want, func() bool {
		st := level(t, a.Rig)
		return st.Level == "Moderate" && strings.Contains(st.Reason, want)
	})
}

// TestANewAggregatorTakesOver: the aggregator crashes (cut off from etcd,
// its lease left to run out), another instance is elected and publishes
// within 2 x instance_ttl, with a higher term; instances refuse an
// aggregate of a lower term than one they saw.
func TestANewAggregatorTakesOver(t *testing.T) {
	t.Parallel()
	etcd := startEtcd(t)
	type m struct {
		f    *fleet.Fleet
		log  *logBuffer
		cut  *fleettest.Cutter
		down bool // cut off by the test
	}
	var ms []m
	for _, name := range []string{"a", "b", "c"} {
		c := &fleettest.Cutter{}
		f, log := logged(t, etcd.endpoint(), name, withDial(c))
		reporting(t, f, fleet.Report{Level: "Normal", Source: "auto", WindowAttempts: 10})
		ms = append(ms, m{f: f, log: log, cut: c})
	}
	leader := func() int {
		for i, x := range ms {
			if x.f.Aggregating() > 0 && !x.down {
				return i
			}
		}
		return -1
	}
	eventually(t, 5*time.Second, "one member aggregates and everyone sees 3 instances", func() bool {
		if leader() < 0 {
			return false
		}
		for _, x := range ms {
			if x.f.ErrorRate(time.Now()).Instances != 3 {
				return false
			}
		}
		return true
	})
	old := leader()
	term := ms[old].f.Aggregating()
	ms[old].cut.Cut()
	ms[old].down = true
	start := time.Now()
	other := ms[(old+1)%3]
	eventually(t, 4*time.Second, "another member publishes an aggregate of a higher term within 2 x instance_ttl", func() bool {
		a := other.f.Aggregate(time.Now())
		return leader() >= 0 && a != nil && a.Term > term && a.Instances == 2
	})
	next := leader()
	t.Logf("aggregator %s (term %d) cut off; %s (term %d) published %s later", ms[old].f.Instance(), term,
		ms[next].f.Instance(), ms[next].f.Aggregating(), time.Since(start).Round(time.Millisecond))

	// A hand-written aggregate of the old, lower term is refused (under a
	// lease: one without is refused for that first).
	raw := etcd.raw(t)
	lease, err := raw.Grant(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Put(context.Background(), "/degraded/shop/aggregate", fmt.Sprintf(
		`{"attempts":1,"failures":1,"instances":99,"levels":{"Emergency":99},"leader":"ghost","term":%d,"at":%q}`, term, time.Now().UTC().Format(time.RFC3339Nano)),
		clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Second, other.f.Instance()+" refuses the lower term", func() bool {
		return other.log.count("the aggregate in etcd is refused", fmt.Sprintf("its term %d is lower than term", term)) == 1
	})
	if a := other.f.Aggregate(time.Now()); a == nil || a.Leader == "ghost" {
		t.Errorf("%s holds %+v, want the new aggregator's", other.f.Instance(), a)
	}
}

// TestAHandWrittenAggregateCannotMoveTheFleet: aggregates written by hand
// to the aggregate key every tick, each claiming a 90% fleet error rate.
// One put of the first, by curl against a fleet of two real daemons, took
// both to Emergency for 30 s (the lie's term outranked the elected
// aggregator's, whose next writes were refused as "lower" and logged as
// the problem), and the level then came down one step a dwell. Each lie
// is refused, for what it is: no lease; a term past the revision that
// wrote it; a lease of its own that holds no election key; the elected
// aggregator's lease with a term that is not its election key's. Every
// member keeps the elected aggregator's view and publishes Normal.
func TestAHandWrittenAggregateCannotMoveTheFleet(t *testing.T) {
	t.Parallel()
	etcd := startEtcd(t)
	a := fleetRig(t, fleetYAML(t, etcd.endpoint(), "a", "", ""))
	b := fleetRig(t, fleetYAML(t, etcd.endpoint(), "b", "", ""))
	for _, r := range []*rig{a, b} {
		if code, body := call(t, "POST", r.URL+"/v1/outcomes", `{"success":1000,"failure":0}`); code != 202 {
			t.Fatalf("POST /v1/outcomes: %d %s", code, body)
		}
	}
	var elected struct {
		instance string
		term     int64
	}
	eventually(t, 10*time.Second, "an aggregate of a and b", func() bool {
		v := fleetView(t, a.Rig)
		if v.Aggregator == nil || v.WindowAttempts != 2000 {
			return false
		}
		elected.instance, elected.term = v.Aggregator.Instance, v.Aggregator.Term
		return true
	})
	raw := etcd.raw(t)
	own := keptLease(t, raw)
	leaders, err := raw.Get(context.Background(), "/degraded/shop/leader/", clientv3.WithFirstCreate()...)
	if err != nil || len(leaders.Kvs) != 1 || leaders.Kvs[0].CreateRevision != elected.term {
		t.Fatalf("the election's first key: %v %+v, want term %d", err, leaders, elected.term)
	}
	theirs := clientv3.LeaseID(leaders.Kvs[0].Lease)
	lie := func(term int64) string {
		return fmt.Sprintf(`{"attempts":1000000,"failures":900000,"instances":2,"levels":{"Normal":2},"leader":"ghost","term":%d,"at":%q}`,
			term, time.Now().UTC().Format(time.RFC3339Nano))
	}
	everyTick(t, func(ctx context.Context) {
		key := "/degraded/shop/aggregate"
		_, _ = raw.Put(ctx, key, lie(999999999))
		_, _ = raw.Put(ctx, key, lie(999999999), clientv3.WithLease(own))
		if rev, err := raw.Get(ctx, key); err == nil {
			_, _ = raw.Put(ctx, key, lie(rev.Header.Revision), clientv3.WithLease(own))
			_, _ = raw.Put(ctx, key, lie(rev.Header.Revision), clientv3.WithLease(theirs))
		}
	})
	for end := time.Now().Add(30 * testTick); time.Now().Before(end); time.Sleep(testTick / 4) {
		for i, r := range []*rig{a, b} {
			if st := level(t, r.Rig); st.Level != "Normal" {
				t.Fatalf("daemon %d publishes %s (%s), want Normal", i, st.Level, st.Reason)
			}
			if v := fleetView(t, r.Rig); v.Aggregator == nil || v.Aggregator.Instance != elected.instance || v.WindowAttempts != 2000 {
				t.Fatalf("daemon %d's fleet view: %+v, attempts %d; want %s's", i, v.Aggregator, v.WindowAttempts, elected.instance)
			}
		}
	}
	for i, r := range []*rig{a, b} {
		for _, want := range []string{
			"the aggregate has no lease",
			"its term 999999999 is past the revision that wrote it",
			fmt.Sprintf("its lease %x holds no election key", own),
			fmt.Sprintf("its term is not the one its election key (lease %x) was created at", theirs),
		} {
			if n := r.log.count("the aggregate in etcd is refused", want); n != 1 {
				t.Errorf("daemon %d logged %q %d times, want once:\n%s", i, want, n, r.log)
			}
		}
		if n := r.log.count("is lower than term"); n != 0 {
			t.Errorf("daemon %d refused the elected aggregator's writes as lower %d times:\n%s", i, n, r.log)
		}
	}
}

// TestAReportTooLargeIsNamedByItsWriter: an instance whose report the
// aggregator leaves out (its level's name over 256 characters here) says
// so in its own log, once a minute, not only in the aggregator's; the
// other instance's report is still summed.
func TestAReportTooLargeIsNamedByItsWriter(t *testing.T) {
	t.Parallel()
	etcd := startEtcd(t)
	a, alog := logged(t, etcd.endpoint(), "a")
	b, _ := logged(t, etcd.endpoint(), "b")
	reporting(t, a, fleet.Report{Level: strings.Repeat("N", 257), Source: "auto", WindowAttempts: 10})
	reporting(t, b, fleet.Report{Level: "Normal", Source: "auto", WindowAttempts: 20})
	eventually(t, 5*time.Second, "an aggregate of b alone", func() bool {
		ag := a.Aggregate(time.Now())
		return ag != nil && ag.Instances == 1 && ag.Attempts == 20
	})
	start := a.Aggregate(time.Now()).At
	eventually(t, 5*time.Second, "five rounds more", func() bool { return a.Aggregate(time.Now()).At.Sub(start) >= 5*testTick })
	if n := alog.count("the level", "is over 256 characters: the aggregator leaves this instance out of the fleet's sums"); n != 1 {
		t.Errorf("a logged its oversized report %d times, want once:\n%s", n, alog)
	}
}

// TestAnswersOverTheReceiveLimitSkipTheAggregate: keys written by hand
// under instances/ that add up past Options.MaxRecvBytes (256 KiB here;
// 64 MiB by default, where 400 keys of 1 MB took a real aggregator past
// 3.6 GB in 10 s) are refused by the client: the aggregator skips its
// rounds, says why once in an ERROR, and keeps its session (a member is
// not at fault); the aggregate goes stale, so the fleet falls back to
// local error rates; the audit history over the limit answers an error
// naming the size, not a lost member. Once the keys are gone the
// aggregate comes back.
func TestAnswersOverTheReceiveLimitSkipTheAggregate(t *testing.T) {
	// Not parallel: its lies load etcd and the machine, and the timed
	// tests (a hung member's PUTs within the dial timeout) ran late
	// beside it under -race.
	etcd := startEtcd(t)
	small := func(o *fleet.Options) { o.MaxRecvBytes = 256 << 10 }
	a, alog := logged(t, etcd.endpoint(), "a", small)
	b, blog := logged(t, etcd.endpoint(), "b", small)
	reporting(t, a, fleet.Report{Level: "Normal", Source: "auto", WindowAttempts: 10})
	reporting(t, b, fleet.Report{Level: "Normal", Source: "auto", WindowAttempts: 20})
	fresh := func(f *fleet.Fleet, n int) bool {
		ag := f.Aggregate(time.Now())
		return ag != nil && !ag.Stale && ag.Instances == n
	}
	eventually(t, 5*time.Second, "an aggregate of a and b", func() bool { return fresh(a, 2) && fresh(b, 2) })

	raw := etcd.raw(t)
	lease := keptLease(t, raw)
	junk := strings.Repeat("x", 100<<10)
	for i := range 4 {
		if _, err := raw.Put(context.Background(), fmt.Sprintf("/degraded/shop/instances/junk%d", i), junk, clientv3.WithLease(lease)); err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Put(context.Background(), fmt.Sprintf("/degraded/shop/audit/%020d", 1000+i), junk); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "the aggregate goes stale on both", func() bool { return !fresh(a, 2) && !fresh(b, 2) })
	logs := alog.String() + blog.String()
	if n := strings.Count(logs, "the aggregate is not published: etcd's answer or the request is over the size limit"); n != 1 {
		t.Errorf("the skipped rounds were logged %d times, want once:\n%s", n, logs)
	}
	for _, lost := range []string{"lost the etcd member", "etcd unreachable"} {
		if strings.Contains(logs, lost) {
			t.Errorf("a session was lost to keys over the size limit (%q):\n%s", lost, logs)
		}
	}
	if !a.Connected() || !b.Connected() {
		t.Errorf("connected: a %v, b %v; want both", a.Connected(), b.Connected())
	}
	if _, err := a.History(context.Background(), 100); !errors.Is(err, fleet.ErrTooLarge) {
		t.Errorf("History over the size limit: %v, want ErrTooLarge", err)
	}
	if v := a.Document(context.Background(), 100); !v.Connected {
		t.Errorf("the fleet view over the size limit says disconnected: %+v", v)
	}
	if n := alog.count("the fleet view is not read: etcd's answer or the request is over the size limit"); n != 1 {
		t.Errorf("the fleet view over the size limit was logged %d times, want once:\n%s", n, alog)
	}
	if v := a.Document(context.Background(), 1); !v.Connected || len(v.Instances) != 1 {
		t.Errorf("the fleet view of one instance: %+v; want a, connected", v)
	}

	if _, err := raw.Delete(context.Background(), "/degraded/shop/instances/junk", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the aggregate comes back once the keys are gone", func() bool { return fresh(a, 2) && fresh(b, 2) })
}
