package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/degraded/degraded/client"
	"github.com/degraded/degraded/controller"
)

func TestWatch(t *testing.T) {
	d := newCLIDaemon(t)
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut lockedBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"watch"}, d.env, &out, &errOut) }()

	waitOutput(t, &out, "#0     Normal")
	if _, err := d.ctl.SetOverride(controller.OverrideRequest{Level: "Major", Mode: controller.ModePin, TTL: time.Minute, Reason: "INC-7", Actor: "alice"}); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, &out, "#1     Major")
	waitOutput(t, &out, "override set: pin Major for 1m0s: INC-7  by alice  [override pin Major until") // who, from the history
	waitOutput(t, &out, ", set by alice]")

	// The daemon goes away: watch says so, with the time, once.
	d.down.Store(true)
	d.srv.CutConnections() // the hub hijacked the stream: httptest no longer sees it
	waitOutput(t, &out, "--     lost contact with degraded")
	if _, err := d.ctl.SetOverride(controller.OverrideRequest{Level: "Minor", Mode: controller.ModePin, TTL: time.Minute, Reason: "INC-8"}); err != nil {
		t.Fatal(err)
	}
	d.down.Store(false)
	waitOutput(t, &out, "--     contact with degraded restored after")
	waitOutput(t, &out, "#2     Minor")
	cancel()
	if err := <-done; err != nil {
		t.Errorf("watch ended with %v after Ctrl-C, want nil (exit 0)", err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 5 || strings.Count(out.String(), "lost contact") != 1 {
		t.Errorf("watch printed %d lines, want one per change, one for the loss and one for the return:\n%s", len(lines), out.String())
	}
	if !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ  --     lost contact with degraded; .*: \S`).MatchString(lines[2]) {
		t.Errorf("the loss line should carry its time and the cause: %q", lines[2])
	}
}

// Several changes that reach watch as one state (they shared a health
// check, or happened while it was reconnecting) are each printed, from the
// history, in order; the columns stay aligned past #9 and #99.
func TestWatchPrintsEveryChangeAligned(t *testing.T) {
	at := time.Date(2026, 11, 30, 8, 15, 6, 0, time.UTC)
	var asked []uint64
	var out strings.Builder
	p := &watcher{w: &out, table: []client.Level{{Name: "Normal"}, {Name: "Minor", PriorityThreshold: 10}, {Name: "Major", PriorityThreshold: 50}}}
	p.history = func(n uint64) ([]transition, error) {
		asked = append(asked, n)
		return []transition{ // newest first, as the daemon sends them
			{Sequence: 100, To: "Major", Source: "auto", Reason: "error_rate 12.00% > 10% (Major)", Actor: "degraded", At: at},
			{Sequence: 99, To: "Minor", Source: "auto", Reason: "error_rate 2.00% > 1% (Minor)", Actor: "degraded", At: at},
			{Sequence: 98, To: "Normal", Source: "override", Reason: "override cleared: x", Actor: "alice", At: at},
			{Sequence: 9, To: "Normal", Source: "auto", Reason: "old", Actor: "degraded", At: at},
		}, nil
	}
	p.state(client.State{Level: "Normal", Sequence: 9, Source: "auto", Reason: "started", Since: at})
	p.state(client.State{Level: "Minor", PriorityThreshold: 10, Sequence: 10, Source: "auto", Reason: "error_rate 2.00% > 1% (Minor)", Since: at})
	p.state(client.State{Level: "Minor", PriorityThreshold: 10, Sequence: 97, Source: "override", Reason: "override set: pin Minor for 1m0s: x", Since: at})
	p.state(client.State{Level: "Major", PriorityThreshold: 50, Sequence: 100, Source: "auto", Reason: "error_rate 12.00% > 10% (Major)", Since: at})
	// A change of partial alone makes no history entry: nothing is asked.
	p.state(client.State{Level: "Major", PriorityThreshold: 50, Sequence: 101, Source: "auto", Reason: "error_rate 12.00% > 10% (Major)", Since: at,
		Partial: &client.Partial{From: 30, Fraction: 0.23}})

	want := `2026-11-30T08:15:06Z  #9     Normal     threshold 0   auto     started  by degraded
2026-11-30T08:15:06Z  #10    Minor      threshold 10  auto     error_rate 2.00% > 1% (Minor)
2026-11-30T08:15:06Z  #97    Minor      threshold 10  override override set: pin Minor for 1m0s: x
2026-11-30T08:15:06Z  #98    Normal     threshold 0   override override cleared: x  by alice
2026-11-30T08:15:06Z  #99    Minor      threshold 10  auto     error_rate 2.00% > 1% (Minor)  by degraded
2026-11-30T08:15:06Z  #100   Major      threshold 50  auto     error_rate 12.00% > 10% (Major)  by degraded
2026-11-30T08:15:06Z  #101   Major      threshold 50  auto     error_rate 12.00% > 10% (Major)  [sheds priority below 30, and 77% of 30-49]
`
	if got := out.String(); got != want {
		t.Errorf("watch printed:\n%s\nwant:\n%s", got, want)
	}
	if fmt.Sprint(asked) != "[1 1 87 3]" {
		t.Errorf("history asked for %v entries, want [1 1 87 3]: the newest entry for each change, the missed ones around gaps, none for a change of partial alone", asked)
	}
}

// TestWatchLine: a state's watch line says who made the change, what a
// partial admission or shadow mode sheds beyond the threshold, and every
// override in force (local and fleet) with who set it.
func TestWatchLine(t *testing.T) {
	at := time.Date(2026, 11, 30, 8, 15, 6, 0, time.UTC)
	exp := at.Add(15 * time.Minute)
	ov := client.Override{Level: "Major", Mode: "floor", Reason: "INC-42", SetAt: at, ExpiresAt: exp, Actor: "alice"}
	fleet := &client.FleetState{Name: "shop", Instance: "web-1", Connected: true,
		Override: &client.FleetOverride{Override: client.Override{Level: "Severe", Mode: "pin", Reason: "INC-7", SetAt: at, ExpiresAt: exp, Actor: "bob"}}}
	for _, tt := range []struct {
		name  string
		st    client.State
		actor string
		want  string
	}{
		{"a local floor, set by alice", client.State{Level: "Major", PriorityThreshold: 50, Sequence: 5, Source: "override", Reason: "override set: floor Major for 15m0s: INC-42", Since: at, Override: &ov}, "alice",
			"#5     Major      threshold 50  override override set: floor Major for 15m0s: INC-42  by alice  [override floor Major until 2026-11-30T08:30:06Z, set by alice]"},
		{"the fleet override, set by bob", client.State{Level: "Severe", PriorityThreshold: 70, Sequence: 6, Source: "fleet", Reason: "fleet override set: pin Severe for 15m0s: INC-7", Since: at, Fleet: fleet}, "bob",
			"#6     Severe     threshold 70  fleet    fleet override set: pin Severe for 15m0s: INC-7  by bob  [fleet override pin Severe until 2026-11-30T08:30:06Z, set by bob]"},
		{"shadow", client.State{Level: "Moderate", PriorityThreshold: 30, Sequence: 7, Source: "auto", Reason: "error_rate 6.10% > 5% (Moderate)", Since: at, Shadow: true}, "degraded",
			"#7     Moderate   threshold 30  auto     error_rate 6.10% > 5% (Moderate)  by degraded  [would shed priority below 30 (shadow mode)]"},
		{"an older daemon: no actor", client.State{Level: "Normal", Sequence: 8, Source: "auto", Reason: "started", Since: at}, "",
			"#8     Normal     threshold 0   auto     started"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := watchLine(tt.st, tt.actor); got != "2026-11-30T08:15:06Z  "+tt.want {
				t.Errorf("watch line:\n%s\nwant:\n2026-11-30T08:15:06Z  %s", got, tt.want)
			}
		})
	}
}
