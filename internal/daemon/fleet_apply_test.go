package daemon

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/degraded/degraded/fleet"
)

// TestFleetUpdatesAreCheckedBeforeTheyApply: a step table of fleet
// override updates as the watch delivers them, against a daemon whose
// table has no Critical and whose max_override_ttl is 1h.
func TestFleetUpdatesAreCheckedBeforeTheyApply(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "degraded.yaml")
	writeConfig(t, path, "data_dir: \"\"\nmax_override_ttl: 1h\nsignals: {cpu: {source: off}, memory: {source: off}}\n"+
		"fleet: {enabled: true, name: shop, instance: web-1, etcd: {endpoints: [http://127.0.0.1:1]}}\n")
	var log lockedBuffer
	d := startFromFile(t, path, Options{Log: &log})
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- d.Controller().Run(ctx) }() // the controller's goroutine applies the updates
	t.Cleanup(func() { cancel(); <-ran })
	s := d.fleet
	now := time.Now()
	pin := func(level string, ttl time.Duration, setAt time.Time) *fleet.Override {
		return &fleet.Override{Level: level, Mode: "pin", TTL: ttl, Reason: "INC-" + level, Instance: "web-2", Actor: "alice",
			SetAt: setAt, ExpiresAt: setAt.Add(ttl)}
	}
	for _, c := range []struct {
		name     string
		u        fleet.OverrideUpdate
		level    string // published; "" when the fleet layer ended (automatic control resumes from the published level)
		source   string
		refused  string // in override_refused's error, "" for none
		refusals uint64
		log      string
	}{
		{"a valid pin applies", fleet.OverrideUpdate{Override: pin("Major", 15*time.Minute, now), Revision: 10},
			"Major", "fleet", "", 0, ""},
		{"a level this table lacks is refused and drops the pin it replaced",
			fleet.OverrideUpdate{Override: pin("Critical", 15*time.Minute, now), Revision: 11},
			"", "auto", `"Critical"`, 1, "the fleet override in etcd is refused"},
		{"a value the fleet package refused is refused likewise",
			fleet.OverrideUpdate{Refused: errors.New("not a JSON fleet override"), Revision: 12},
			"", "auto", "not a JSON fleet override", 2, "not a JSON fleet override"},
		{"the next valid one applies and clears the refusal", fleet.OverrideUpdate{Override: pin("Minor", 15*time.Minute, now), Revision: 13},
			"Minor", "fleet", "", 2, ""},
		{"one expired on arrival is logged and ends the pin", fleet.OverrideUpdate{Override: pin("Major", time.Minute, now.Add(-time.Hour)), Revision: 14},
			"", "auto", "", 2, "arrived already expired by this instance's clock"},
		{"a ttl above max_override_ttl is clamped", fleet.OverrideUpdate{Override: pin("Severe", 48*time.Hour, now), Revision: 15},
			"Severe", "fleet", "", 2, "clamped to max_override_ttl"},
		{"after a rollback a lower revision is the truth", fleet.OverrideUpdate{Override: pin("Moderate", 15*time.Minute, now), Revision: 3, Epoch: 1},
			"Moderate", "fleet", "", 2, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_ = s.apply(c.u, true)
			st := d.Controller().State()
			if c.level != "" && st.Level != c.level || st.Source != c.source {
				t.Errorf("publishes %s from %s, want %s from %s", st.Level, st.Source, c.level, c.source)
			}
			doc := s.Document(t.Context(), 10)
			switch r := doc.OverrideRefused; {
			case c.refused == "" && r != nil:
				t.Errorf("override_refused %+v, want null", r)
			case c.refused != "" && (r == nil || !strings.Contains(r.Error, c.refused) || r.Revision != c.u.Revision):
				t.Errorf("override_refused %+v, want revision %d saying %s", r, c.u.Revision, c.refused)
			}
			if got := s.refusedTotal.Load(); got != c.refusals {
				t.Errorf("%d refusals counted, want %d", got, c.refusals)
			}
			if c.log != "" && !strings.Contains(log.String(), c.log) {
				t.Errorf("the log does not say %q:\n%s", c.log, log.String())
			}
		})
	}
	if o := d.Controller().FleetOverride(); o == nil || o.ExpiresAt.After(time.Now().Add(time.Hour)) {
		t.Errorf("fleet override %+v", o)
	}
	if n := strings.Count(log.String(), "level=ERROR"); n != 2 {
		t.Errorf("%d ERROR lines, want one per refusal (2):\n%s", n, log.String())
	}
}
