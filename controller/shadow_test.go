package controller

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/degraded/degraded/levels"
)

// TestShadowModeSwitch: shadow mode publishes the level as usual with
// "shadow": true, and each switch by reload is one history entry and one
// sequence step, whichever way it goes.
func TestShadowModeSwitch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Options{Rules: levels.Rules{Shadow: true}})
		r.cpu.set(85)
		r.c.Check(context.Background())
		st := r.c.State()
		if st.Level != "Major" || !st.Shadow {
			t.Fatalf("in shadow mode: level %s shadow %v, want Major published with shadow true", st.Level, st.Shadow)
		}
		body, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatal(err)
		}
		if doc["shadow"] != true {
			t.Errorf("state document %s: want \"shadow\": true", body)
		}

		for _, sw := range []struct {
			shadow bool
			reason string
		}{
			{false, "config reload: mode shadow -> enforce"},
			{true, "config reload: mode enforce -> shadow"},
		} {
			before := r.c.State()
			entries := len(r.c.History(HistoryLimit))
			o := r.c.run.opts
			o.Rules.Shadow = sw.shadow
			if err := r.c.Reconfigure(o, "alice"); err != nil {
				t.Fatal(err)
			}
			st := r.c.State()
			h := r.c.History(HistoryLimit)
			if st.Shadow != sw.shadow || st.Sequence != before.Sequence+1 || st.Level != "Major" {
				t.Errorf("after the switch: shadow %v seq %d level %s, want shadow %v seq %d Major", st.Shadow, st.Sequence, st.Level, sw.shadow, before.Sequence+1)
			}
			want := Transition{Sequence: st.Sequence, From: "Major", To: "Major", Source: SourceConfig, Reason: sw.reason, Actor: "alice", At: h[0].At}
			if len(h) != entries+1 || h[0] != want {
				t.Errorf("history after the switch: %d entries, newest %+v; want %d, newest %+v", len(h), h[0], entries+1, want)
			}
		}

		// A reload that keeps the mode changes nothing.
		before := r.c.State().Sequence
		if err := r.c.Reconfigure(r.c.run.opts, "alice"); err != nil {
			t.Fatal(err)
		}
		if got := r.c.State().Sequence; got != before {
			t.Errorf("a reload keeping the mode moved the sequence from %d to %d", before, got)
		}
	})
}

// TestShadowModeSurvivesRestart: a start in another mode than the state
// file was saved in is one history entry, so a client's sequence moves
// with the document.
func TestShadowModeSurvivesRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &FileStore{Dir: filepath.Join(t.TempDir(), "data")}
		r := newRig(t, Options{Store: store})
		before := r.c.State()
		r.stop()

		time.Sleep(time.Second)
		again, err := New(Options{Table: defaultTable(t), Store: store, Rules: levels.Rules{Shadow: true}})
		if err != nil {
			t.Fatal(err)
		}
		st := again.State()
		if !st.Shadow || st.Sequence != before.Sequence+1 {
			t.Errorf("restarted in shadow mode: shadow %v seq %d, want true and %d", st.Shadow, st.Sequence, before.Sequence+1)
		}
		if h := again.History(1); len(h) != 1 || h[0].Source != SourceConfig || h[0].Reason != "config: mode enforce -> shadow" {
			t.Errorf("history after restart: %+v, want a config entry for the mode", h)
		}
	})
}
