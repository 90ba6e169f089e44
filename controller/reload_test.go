package controller

import (
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"

	"github.com/degraded/degraded/levels"
)

// covered is the state document without what travels in sample events:
// what a sequence names.
func covered(t *testing.T, st *State) string {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"signals", "recommended", "sequence"} {
		delete(doc, k)
	}
	b, _ = json.Marshal(doc)
	return string(b)
}

// TestEveryDocumentChangeMovesTheSequence: a reload that inserts, removes
// or renames levels, or changes a threshold, under no override, a local
// pin or floor, or a fleet pin or floor, moves the sequence whenever the
// document changes (so If-None-Match and SSE subscribers see it), and only
// then. As it stood, inserting a level below a pinned Major moved index
// 3 -> 4 at the same sequence.
func TestEveryDocumentChangeMovesTheSequence(t *testing.T) {
	base := func() []levels.Level {
		return []levels.Level{
			{Name: "Minor", PriorityThreshold: 10, Thresholds: levels.Thresholds{levels.CPU: 60}, Disable: []string{"recommendations"}},
			{Name: "Moderate", PriorityThreshold: 30, Thresholds: levels.Thresholds{levels.CPU: 70}},
			{Name: "Major", PriorityThreshold: 50, Thresholds: levels.Thresholds{levels.CPU: 80}},
			{Name: "Severe", PriorityThreshold: 70, Thresholds: levels.Thresholds{levels.CPU: 90}},
		}
	}
	reloads := map[string]func([]levels.Level) []levels.Level{
		"a level inserted below Major": func(ls []levels.Level) []levels.Level {
			return append(ls[:2:2], append([]levels.Level{{Name: "Elevated", PriorityThreshold: 40, Thresholds: levels.Thresholds{levels.CPU: 75}}}, ls[2:]...)...)
		},
		"Minor removed": func(ls []levels.Level) []levels.Level { return ls[1:] },
		"Moderate renamed": func(ls []levels.Level) []levels.Level {
			ls[1].Name = "Medium"
			return ls
		},
		"Major's threshold changed": func(ls []levels.Level) []levels.Level {
			ls[2].PriorityThreshold = 55
			return ls
		},
		"the same table": func(ls []levels.Level) []levels.Level { return ls },
	}
	overrides := map[string]func(*Controller) error{
		"no override":   func(*Controller) error { return nil },
		"a local pin":   pin("Major", time.Hour),
		"a local floor": floor("Major", time.Hour),
		"a fleet pin":   fleetSet(1, "Major", ModePin, time.Hour),
		"a fleet floor": fleetSet(1, "Major", ModeFloor, time.Hour),
	}
	for oname, override := range overrides {
		for rname, reload := range reloads {
			t.Run(oname+", "+rname, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					tab, err := levels.NewTable(base())
					if err != nil {
						t.Fatal(err)
					}
					r := newRig(t, Options{Table: tab})
					r.cpu.set(85) // Major
					r.c.Check(t.Context())
					if err := override(r.c); err != nil {
						t.Fatal(err)
					}
					before := r.c.State()
					next, err := levels.NewTable(reload(base()))
					if err != nil {
						t.Fatal(err)
					}
					o := r.c.run.opts
					o.Table = next
					if err := r.c.Reconfigure(o, "alice"); err != nil {
						t.Fatal(err)
					}
					after := r.c.State()
					changed := covered(t, before) != covered(t, after)
					if changed && after.Sequence == before.Sequence {
						t.Errorf("the document changed at the same sequence %d:\n before %s\n after  %s", after.Sequence, covered(t, before), covered(t, after))
					}
					if !changed && after.Sequence != before.Sequence {
						t.Errorf("the sequence moved %d -> %d with the document unchanged", before.Sequence, after.Sequence)
					}
				})
			})
		}
	}
}
