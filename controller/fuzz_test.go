package controller

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzStateFile feeds arbitrary bytes as state.json: loading must never
// panic, and whatever loads must give a controller whose state is inside
// the table.
func FuzzStateFile(f *testing.F) {
	f.Add([]byte(`{"version":1,"level":"Major","index":3,"sequence":7,"override":{"level":"Severe","mode":"pin","reason":"x","expires_at":"2030-01-01T00:00:00Z"}}`))
	f.Add([]byte(`{"version":1,"level":"Gone","index":99,"auto_index":-5,"history":[{"sequence":1}]}`))
	f.Add([]byte(`{"version":1,"override":{"level":"Nope","mode":"floor"}}`))
	f.Add([]byte(`{"version":2}`))
	f.Add([]byte(`{"version":1,"level":"Minor","since":"9999-01-01T00:00:00Z","auto_since":"9999-01-01T00:00:00Z","sequence":9007199254740991,"sequence_ceiling":9007199254740991,"clean_shutdown":false}`))
	f.Add([]byte(`{"version":1,"level":"Removed","levels":{"Removed":40},"sequence":18446744073709551615}`))
	f.Add([]byte(`{"version":1,"level":"Minor","override":{"level":"Gone","mode":"pin","reason":"x","set_at":"9999-01-01T00:00:00Z","expires_at":"9999-01-01T00:00:00Z"},"clean_shutdown":true}`))
	f.Add([]byte(`{`))
	tab := defaultTable(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "state.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := New(Options{Table: tab, Store: &FileStore{Dir: dir}})
		if err != nil {
			return
		}
		st := c.State()
		now := time.Now()
		if st.Since.After(now) || st.Sequence > 1<<54 {
			t.Fatalf("since %v in the future or sequence %d wrapped: %+v", st.Since, st.Sequence, st)
		}
		if st.Override != nil && st.Override.ExpiresAt.After(now.Add(24*time.Hour)) {
			t.Fatalf("restored override outlives max_override_ttl: %+v", st.Override)
		}
		if st.Index < 0 || st.Index >= tab.Len() || tab.Level(st.Index).Name != st.Level {
			t.Fatalf("state outside the table: %+v", st)
		}
		if st.Override != nil {
			if _, err := tab.Index(st.Override.Level); err != nil {
				t.Fatalf("override level not in the table: %+v", st.Override)
			}
		}
		runController(t, c)
		if _, err := c.SetOverride(OverrideRequest{Level: "Minor", Mode: ModePin, TTL: time.Minute, Reason: "fuzz"}); err != nil {
			t.Fatalf("a loaded state must accept an override: %v", err)
		}
	})
}
