package fleet_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/degraded/degraded/fleet"
)

// TestConnectedTurnsFalseWithinDialTimeoutPlus2s (finding 9): with etcd
// gone, every daemon shows fleet.connected false within dial_timeout +
// 2s (here 3s + 2s), however long a lease revoke would wait.
func TestConnectedTurnsFalseWithinDialTimeoutPlus2s(t *testing.T) {
	t.Parallel()
	etcd := startEtcd(t)
	var rs []*rig
	for _, name := range []string{"a", "b", "c"} {
		rs = append(rs, fleetRig(t, fleetYAML(t, etcd.endpoint(), name, "dial_timeout: 3s", "")))
	}
	for i, r := range rs {
		eventually(t, 10*time.Second, fmt.Sprintf("daemon %d connects", i), func() bool { return level(t, r.Rig).Fleet.Connected })
	}
	start := time.Now()
	etcd.stop()
	var wg sync.WaitGroup
	took := make([]time.Duration, len(rs))
	for i, r := range rs {
		wg.Go(func() {
			for level(t, r.Rig).Fleet.Connected && time.Since(start) < 15*time.Second {
				time.Sleep(20 * time.Millisecond)
			}
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	t.Logf("fleet.connected false after %v (dial_timeout 3s)", took)
	for i, d := range took {
		if d > 5*time.Second {
			t.Errorf("daemon %d showed connected false %s after etcd stopped, want within dial_timeout + 2s (5s)", i, d.Round(time.Millisecond))
		}
	}
}

// TestReconnectBackoffIsCappedAt5s (finding 10): through a 25s outage
// (etcd's port open, every connection closed at once) each daemon tries
// again at least every 5s (the backoff cap) plus one attempt and a
// second's slack, and reconnects within as much of etcd being back; a
// reused client's own gRPC backoff would have stretched past 9s by then,
// and keeps growing to two minutes.
func TestReconnectBackoffIsCappedAt5s(t *testing.T) {
	t.Parallel()
	etcd := startEtcd(t)
	var rs []*rig
	var ps []*proxy
	for _, name := range []string{"a", "b", "c"} {
		p := newProxy(t, etcd.client.Host)
		ps = append(ps, p)
		rs = append(rs, fleetRig(t, fleetYAML(t, p.endpoint(), name, "dial_timeout: 1s", "")))
	}
	for i, r := range rs {
		eventually(t, 10*time.Second, fmt.Sprintf("daemon %d connects", i), func() bool { return level(t, r.Rig).Fleet.Connected })
	}
	for _, p := range ps {
		p.down()
	}
	outage := time.NewTimer(25 * time.Second)
	<-outage.C
	var dials [][]time.Time
	for _, p := range ps {
		dials = append(dials, p.up())
	}
	back := time.Now()
	var wg sync.WaitGroup
	took := make([]time.Duration, len(rs))
	for i, r := range rs {
		wg.Go(func() {
			for !level(t, r.Rig).Fleet.Connected && time.Since(back) < 40*time.Second {
				time.Sleep(20 * time.Millisecond)
			}
			took[i] = time.Since(back)
		})
	}
	wg.Wait()
	const most = 6500 * time.Millisecond
	for i, ds := range dials {
		var gap time.Duration
		for j := 1; j < len(ds); j++ {
			gap = max(gap, ds[j].Sub(ds[j-1]))
		}
		gap = max(gap, back.Sub(ds[len(ds)-1]))
		t.Logf("daemon %d: %d dial attempts in the 25s outage, the longest gap %s; reconnected %s after etcd was back",
			i, len(ds), gap.Round(time.Millisecond), took[i].Round(time.Millisecond))
		if gap > most {
			t.Errorf("daemon %d waited %s between two connection attempts, want at most 5s + one attempt + 1s", i, gap.Round(time.Millisecond))
		}
		if took[i] > most {
			t.Errorf("daemon %d reconnected %s after etcd was back, want within 5s + one attempt + 1s", i, took[i].Round(time.Millisecond))
		}
	}
}

// TestAHungMemberCostsNo503 (finding 6, with three members behind
// proxies to one etcd): two of them hang (every connection kept open,
// nothing forwarded, as SIGSTOP does), the one the daemons use and the
// one they would try next; the daemons move to the third without a
// single 503 and without showing connected false, and every fleet PUT
// meanwhile reaches both. (Trying the members one after another, each
// hung one cost a daemon half the dial timeout, and the PUT failed.)
func TestAHungMemberCostsNo503(t *testing.T) {
	t.Parallel()
	etcd := startEtcd(t)
	ps := []*proxy{newProxy(t, etcd.client.Host), newProxy(t, etcd.client.Host), newProxy(t, etcd.client.Host)}
	eps := ps[0].endpoint() + ", " + ps[1].endpoint() + ", " + ps[2].endpoint()
	// A try is half the dial timeout; what is left must hold the move to
	// a member that answers. On CI's loaded machine that move took up to
	// 1.05s (a new connection's first read, then the PUT's two round
	// trips), so a 2s dial timeout left no room: 4s leaves a second.
	a := fleetRig(t, strings.Replace(fleetYAML(t, eps, "a", "dial_timeout: 4s", ""), "instance_ttl: 2s", "instance_ttl: 4s", 1))
	b := fleetRig(t, strings.Replace(fleetYAML(t, eps, "b", "dial_timeout: 4s", ""), "instance_ttl: 2s", "instance_ttl: 4s", 1))
	rs := []*rig{a, b}
	for i, r := range rs {
		eventually(t, 10*time.Second, fmt.Sprintf("daemon %d connects", i), func() bool { return level(t, r.Rig).Fleet.Connected })
	}
	// Hang the members the daemons use; when they share one (their names
	// hash to the same first member, unless it was slow to answer), also
	// the one after it, which a daemon leaving it tries first: the worst
	// order.
	used := map[int]bool{}
	for _, r := range rs {
		at := slices.IndexFunc(ps, func(p *proxy) bool { return p.endpoint() == connectedTo(r.log) })
		if at < 0 {
			t.Fatalf("a daemon connected to %q, not one of %s", connectedTo(r.log), eps)
		}
		used[at] = true
	}
	for at := range used {
		ps[at].freeze()
		if len(used) == 1 {
			ps[(at+1)%len(ps)].freeze()
		}
	}
	stop := time.Now().Add(6 * time.Second)
	var disconnected []string
	for n := 0; time.Now().Before(stop); n++ {
		r := rs[n%2]
		reason := fmt.Sprintf("INC-%d", n)
		start := time.Now()
		code, body := call(t, "PUT", r.URL+"/v1/fleet/override", fmt.Sprintf(`{"level":"Major","mode":"pin","ttl":"15m","reason":%q}`, reason))
		if code != http.StatusOK {
			t.Fatalf("PUT %d with two members hung: %d %s after %s", n, code, body, time.Since(start).Round(time.Millisecond))
		}
		for i, r := range rs {
			eventually(t, 3*time.Second, fmt.Sprintf("daemon %d applies %s", i, reason), func() bool {
				st := level(t, r.Rig)
				if !st.Fleet.Connected {
					disconnected = append(disconnected, fmt.Sprintf("daemon %d at PUT %d", i, n))
				}
				return st.Fleet.Override != nil && st.Fleet.Override.Reason == reason
			})
		}
	}
	if len(disconnected) > 0 {
		t.Errorf("connected false while a healthy member was there: %v", disconnected)
	}
}

// connectedTo is the endpoint of the last "connected to etcd" line in log,
// "" when none says.
func connectedTo(log *logBuffer) string {
	ep := ""
	for line := range strings.Lines(log.String()) {
		if strings.Contains(line, "connected to etcd") {
			if _, after, ok := strings.Cut(line, "endpoint="); ok {
				ep = strings.Fields(after)[0]
			}
		}
	}
	return ep
}

// TestASlowLoneMemberStillTakesAPut: one member, every request to it
// arriving 1.1s late (a loaded etcd, not a hung one): a fleet override,
// a lease grant and a transaction, takes about 2.2s of its 4s dial
// timeout, and is written. With no other member to move to, a try is not
// cut at half the dial timeout: cut there, the PUT started again on the
// same member with too little time left, and failed (CI, under load: "write
// the fleet override: context deadline exceeded"). The two round trips
// pass the half (2s) and leave 1.8s, room for a third: at 600ms of a 2s
// dial timeout the PUT ran past 2s once on CI's loaded machine. The
// instance lease lives 10s: a 2s lease, 1.1s late, saw its keepalive end
// mid-PUT, and the member dropped with the PUT.
func TestASlowLoneMemberStillTakesAPut(t *testing.T) {
	t.Parallel()
	etcd := startEtcd(t)
	p := newProxy(t, etcd.client.Host)
	a := member(t, p.endpoint(), "a", func(o *fleet.Options) {
		o.DialTimeout = 4 * time.Second
		o.InstanceTTL = 10 * time.Second
	})
	connected(t, a)
	p.slow(1100 * time.Millisecond)
	start := time.Now()
	_, err := a.SetOverride(context.Background(), pin("Major", "INC-7", 15*time.Minute))
	took := time.Since(start)
	if err != nil {
		t.Fatalf("PUT to a member 1.1s slow: %v after %s, want it written within the 4s dial timeout", err, took.Round(time.Millisecond))
	}
	if took < 2*time.Second {
		t.Fatalf("the PUT took %s: the member was not slowed (two round trips of 1.1s)", took.Round(time.Millisecond))
	}
	t.Logf("PUT through a member 1.1s slow: %s", took.Round(time.Millisecond))
}
