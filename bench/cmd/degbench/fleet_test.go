package main

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestParseEtcdCounters(t *testing.T) {
	text := `# HELP etcd_mvcc_put_total Total number of puts seen by this member.
# TYPE etcd_mvcc_put_total counter
etcd_mvcc_put_total 1500
etcd_debugging_mvcc_put_total 99
etcd_mvcc_txn_total 12
etcd_mvcc_delete_total 3
etcd_mvcc_range_total 77
`
	c, err := parseEtcdCounters(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if c != (etcdCounters{Puts: 1500, Txns: 12, Deletes: 3}) {
		t.Errorf("parsed %+v, want puts 1500, txns 12, deletes 3 (not the debugging or range counters)", c)
	}
	_, err = parseEtcdCounters(strings.NewReader("etcd_mvcc_put_total 1\n"))
	if err == nil || err.Error() != "etcd /metrics has no etcd_mvcc_delete_total, etcd_mvcc_txn_total" {
		t.Errorf("missing counters: %v, want an error naming both", err)
	}
}

func TestPerInstanceTick(t *testing.T) {
	// 50 instances, 1s ticks, 10s: 500 reports.
	if got := perInstanceTick(500, 50, 10*time.Second, time.Second); got != 1 {
		t.Errorf("500 puts by 50 instances over 10 ticks: %v per instance per tick, want 1", got)
	}
	if got := perInstanceTick(100, 5, 10*time.Second, 500*time.Millisecond); got != 1 {
		t.Errorf("100 puts by 5 instances over 20 ticks: %v, want 1", got)
	}
}

func TestFleetReason(t *testing.T) {
	for _, c := range []struct {
		data, want string
		ok         bool
	}{
		{`{"level":"Major","source":"fleet","fleet":{"connected":true,"override":{"level":"Major","reason":"degbench fleet 3"}}}`, "degbench fleet 3", true},
		{`{"level":"Normal","source":"auto","fleet":{"connected":true,"override":null}}`, "", false},
		{`{"level":"Major","source":"override","fleet":{"override":{"reason":"old"}}}`, "", false},
		{`{"level":"Major","source":"fleet"}`, "", false},
		{`not json`, "", false},
	} {
		got, ok := fleetReason([]byte(c.data))
		if got != c.want || ok != c.ok {
			t.Errorf("fleetReason(%s) = %q, %v; want %q, %v", c.data, got, ok, c.want, c.ok)
		}
	}
}

func TestAwaitFleet(t *testing.T) {
	events := make(chan fleetEvent, 8)
	events <- fleetEvent{0, "old", 1} // an earlier override: skipped
	events <- fleetEvent{0, "new", 10}
	events <- fleetEvent{0, "new", 20} // the same daemon again: the first counts
	events <- fleetEvent{1, "new", 30}
	at, err := awaitFleet(events, "new", 2, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(at) != 2 || at[0]+at[1] != 40 {
		t.Errorf("arrivals %v, want 10 and 30", at)
	}

	synctest.Test(t, func(t *testing.T) {
		events := make(chan fleetEvent, 1)
		events <- fleetEvent{2, "new", 5}
		_, err := awaitFleet(events, "new", 3, 10*time.Second)
		if err == nil || err.Error() != "1 of 3 daemons published it within 10s" {
			t.Errorf("timeout: %v, want how many of the daemons had it", err)
		}
	})
}

func TestReportFleet(t *testing.T) {
	f := &fleetResult{Daemons: 50, Interval: time.Second, EtcdVersion: "3.4.23", LastMs: []float64{20, 30, 90}, AllMs: []float64{5, 20, 30, 90},
		PutMs: []float64{10}, MeasureSecs: 10, PutsPerInstanceTick: 1, EtcdCPUPercent: 4}
	r := report{fleet: f}
	var b strings.Builder
	r.writeFleet(&b)
	if !strings.Contains(b.String(), "| 50 | 30.0 ms | 90.0 ms |") {
		t.Errorf("section:\n%s\nwant a row with p50 30.0 ms and p99 90.0 ms to the last daemon", b.String())
	}
	if len(r.verdicts) != 1 || r.verdicts[0].met != "**met**" || !strings.Contains(r.verdicts[0].measured, "p99 90.0 ms to the last of 50 daemons") {
		t.Errorf("verdicts %+v, want the 100 ms target met at p99 90 ms", r.verdicts)
	}

	f.LastMs = append(f.LastMs, 140)
	r = report{fleet: f}
	r.writeFleet(&strings.Builder{})
	if r.verdicts[0].met != "**not met**: see finding F7" {
		t.Errorf("p99 140 ms: verdict %q, want not met, with the finding", r.verdicts[0].met)
	}
}
