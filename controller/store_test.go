package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/degraded/degraded/levels"
)

func saved(t *testing.T, s *FileStore, seq uint64) {
	t.Helper()
	if err := s.Save(&Persisted{Version: persistedVersion, Level: "Normal", Sequence: seq}); err != nil {
		t.Fatal(err)
	}
}

func TestFileStoreKeepsPrevious(t *testing.T) {
	s := &FileStore{Dir: filepath.Join(t.TempDir(), "data")}
	if p, _, err := s.Load(); p != nil || err != nil {
		t.Fatalf("empty dir: %v %v, want nothing and no error", p, err)
	}
	saved(t, s, 1)
	saved(t, s, 2)
	prev, err := readState(s.prevPath())
	if err != nil || prev.Sequence != 1 {
		t.Fatalf("state.json.prev = %+v, %v, want sequence 1", prev, err)
	}
	entries, _ := os.ReadDir(s.Dir)
	if len(entries) != 2 {
		t.Errorf("data dir holds %d files, want state.json and state.json.prev only", len(entries))
	}
}

func TestFileStoreRecoversFromDamage(t *testing.T) {
	tests := []struct {
		name    string
		damage  func(s *FileStore)
		wantSeq uint64
		wantErr string
	}{
		{"truncated", func(s *FileStore) { os.Truncate(s.Path(), 10) }, 1, ""},
		{"garbage", func(s *FileStore) { os.WriteFile(s.Path(), []byte("\x00\x01not json"), 0o600) }, 1, ""},
		{"wrong version", func(s *FileStore) { os.WriteFile(s.Path(), []byte(`{"version":99}`), 0o600) }, 1, ""},
		{"missing", func(s *FileStore) { os.Remove(s.Path()) }, 1, ""},
		{"both damaged", func(s *FileStore) {
			os.WriteFile(s.Path(), []byte("{"), 0o600)
			os.WriteFile(s.prevPath(), []byte("{"), 0o600)
		}, 0, "state.json: unexpected end of JSON input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &FileStore{Dir: t.TempDir()}
			saved(t, s, 1)
			saved(t, s, 2)
			tt.damage(s)
			p, fromPrev, err := s.Load()
			if tt.wantErr != "" {
				if !errors.Is(err, ErrCorruptState) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want ErrCorruptState naming %q", err, tt.wantErr)
				}
				if err := s.Reset(); err != nil {
					t.Fatal(err)
				}
				if p, _, err := s.Load(); p != nil || err != nil {
					t.Fatalf("after Reset: %v %v, want a fresh start", p, err)
				}
				return
			}
			if err != nil || p.Sequence != tt.wantSeq || !fromPrev {
				t.Fatalf("Load = %+v, %v (from .prev %v), want sequence %d from state.json.prev", p, err, fromPrev, tt.wantSeq)
			}
		})
	}
}

// TestOverrideNotSavedIsNotApplied: an override whose save fails is
// refused (ErrNotSaved: the API's 503) and changes nothing, so a restart
// can never lose an override an operator was told is in force; once the
// disk is fixed the same request succeeds and is on disk.
func TestOverrideNotSavedIsNotApplied(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "data")
	store := &FileStore{Dir: blocker}
	r := newRig(t, Options{Store: store})
	os.RemoveAll(blocker)
	os.WriteFile(blocker, []byte("a file where the data dir should be"), 0o600)

	req := OverrideRequest{Level: "Major", Mode: ModePin, TTL: time.Hour, Reason: "INC-5"}
	before := r.c.State()
	if _, err := r.c.SetOverride(req); !errors.Is(err, ErrNotSaved) {
		t.Fatalf("err = %v, want ErrNotSaved", err)
	}
	if st := r.c.State(); st.Override != nil || st.Level != "Normal" || st.Sequence != before.Sequence {
		t.Fatalf("after a failed save: level %s, override %+v, sequence %d; want nothing applied at sequence %d", st.Level, st.Override, st.Sequence, before.Sequence)
	}
	os.Remove(blocker) // the operator fixes the disk
	if _, err := r.c.SetOverride(req); err != nil {
		t.Fatal(err)
	}
	p, _, err := store.Load()
	if err != nil || p == nil || p.Override == nil || p.Override.Reason != "INC-5" {
		t.Fatalf("the state file holds %+v, %v; want the override", p, err)
	}
}

// fakeStore records saves and can fail them.
type fakeStore struct {
	mu    sync.Mutex
	saves []uint64
	fail  error
}

func (f *fakeStore) Load() (*Persisted, bool, error) { return nil, false, nil }

func (f *fakeStore) Save(p *Persisted) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.saves = append(f.saves, p.Sequence)
	return nil
}

// fullDisk is a FileStore on a disk with no room: it loads what the file
// holds, and its saves fail with ENOSPC until room.
type fullDisk struct {
	*FileStore
	mu       sync.Mutex
	room     bool
	attempts int // saves tried
}

func (f *fullDisk) Save(p *Persisted) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempts++
	if !f.room {
		return fmt.Errorf("write state: %w", &os.PathError{Op: "write", Path: filepath.Join(f.Dir, ".state-1.json"), Err: syscall.ENOSPC})
	}
	return f.FileStore.Save(p)
}

func (f *fullDisk) free() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.room = true
}

// TestStartOnAFullDiskServesTheSavedState: killed mid-incident with the
// disk full, the daemon restarts into a reservation it cannot save. It
// serves the state the file saved, under the sequence the file saved (it
// may publish nothing new: readers may have seen every sequence up to the
// file's ceiling), holds the restart entry and every change, says so once,
// is ready after its first health check, refuses overrides (503), and
// publishes above the ceiling at the first save that succeeds. (It exited
// instead, into a restart loop the supervisor gives up on, its clients
// left to fail open.)
func TestStartOnAFullDiskServesTheSavedState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &FileStore{Dir: t.TempDir()}
		first := newRig(t, Options{Store: store})
		if _, err := first.c.SetOverride(OverrideRequest{Level: "Major", Mode: ModePin, TTL: time.Hour, Reason: "INC-7"}); err != nil {
			t.Fatal(err)
		}
		// first is never stopped cleanly: its last save, sequence 1 with
		// ceiling 1001, is what a SIGKILL leaves.

		var logs bytes.Buffer
		disk := &fullDisk{FileStore: store}
		c, err := New(Options{Table: defaultTable(t), Store: disk, CPU: &fakeSampler{}, Errors: &fakeErrors{},
			HealthCheckInterval: never, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatalf("New on a full disk: %v, want a daemon that starts", err)
		}
		st := c.State()
		if st.Sequence != 1 || st.Level != "Major" || st.Override == nil || st.Override.Reason != "INC-7" {
			t.Fatalf("served at start: sequence %d, level %s, override %+v; want the saved state, 1, Major pinned for INC-7", st.Sequence, st.Level, st.Override)
		}
		if h := c.History(1); len(h) != 1 || h[0].Sequence != 1 || !c.Held() {
			t.Fatalf("history at start %+v, held %v; want the saved entry 1, the restart entry held", h, c.Held())
		}
		began := time.Now()
		if f := c.SaveFailure(); f == nil || !strings.Contains(f.Error, "no space left on device") || !f.Since.Equal(began) {
			t.Fatalf("SaveFailure at start: %+v; want ENOSPC since %s (what GET /v1/level's state_file shows)", f, began)
		}
		if c.Ready() {
			t.Fatal("ready before the first health check")
		}
		if n := strings.Count(logs.String(), "level=ERROR"); n != 1 || !strings.Contains(logs.String(), "cannot reserve sequence numbers at start") || !strings.Contains(logs.String(), "no space left on device") {
			t.Fatalf("logs at start: %q; want one ERROR naming the reservation and ENOSPC", logs.String())
		}
		stop := runController(t, c)
		if !c.Ready() {
			t.Fatal("not ready after the first health check while held: /readyz would take the daemon out of service")
		}
		if st := c.State(); st.Sequence != 1 {
			t.Fatalf("held, the first health check published sequence %d, past the file's ceiling", st.Sequence)
		}
		if _, err := c.SetOverride(OverrideRequest{Level: "Minor", Mode: ModePin, TTL: time.Hour, Reason: "x"}); !errors.Is(err, ErrNotSaved) {
			t.Fatalf("override on a full disk: %v, want ErrNotSaved (503)", err)
		}
		// Reports evaluate four times a second; the failed save is retried
		// at the health checks alone.
		disk.mu.Lock()
		tried := disk.attempts
		disk.mu.Unlock()
		for range 20 {
			time.Sleep(300 * time.Millisecond)
			c.Reported(levels.Report{At: time.Now(), Success: 10})
			synctest.Wait()
		}
		c.Check(context.Background())
		disk.mu.Lock()
		tried = disk.attempts - tried
		disk.mu.Unlock()
		if tried != 1 {
			t.Errorf("20 report evaluations and a health check on a full disk tried %d saves, want 1 (the health check's)", tried)
		}
		if f := c.SaveFailure(); f == nil || !f.Since.Equal(began) {
			t.Errorf("SaveFailure 6 s on: %+v; want the failure since the start, %s", f, began)
		}
		if n := strings.Count(logs.String(), "level=ERROR"); n != 2 {
			t.Fatalf("logs after a health check and a refused override: %q; want the start's ERROR and the override's, not the retry's", logs.String())
		}

		disk.free() // the operator makes room
		c.Check(context.Background())
		st = c.State()
		h := c.History(1)[0]
		if st.Sequence != 1002 || h.Sequence != 1002 || h.Source != SourceRestart || st.Level != "Major" || c.Held() {
			t.Fatalf("after a save succeeds: sequence %d, level %s, last entry %+v, held %v; want 1002, Major, the restart entry, nothing held", st.Sequence, st.Level, h, c.Held())
		}
		if f := c.SaveFailure(); f != nil {
			t.Errorf("SaveFailure after a save succeeded: %+v, want nil", f)
		}
		if err := stop(); !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		if p, _, err := store.Load(); err != nil || p.Sequence != 1002 || !p.CleanShutdown || p.Override == nil {
			t.Fatalf("the state file after a clean stop: %+v, %v; want 1002, clean, the override", p, err)
		}
	})
}

// TestStartOnAFullDiskAfterACleanStop: after a clean stop the file still
// says clean while the start cannot save, so a crash would restart from
// its sequence again: the start on a full disk publishes nothing new
// either, and resumes after the file's sequence once a save succeeds.
func TestStartOnAFullDiskAfterACleanStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &FileStore{Dir: t.TempDir()}
		first := newRig(t, Options{Store: store})
		first.cpu.set(85)
		first.c.Check(context.Background())
		stopFirst(t, first)
		saved, _, err := store.Load()
		if err != nil || !saved.CleanShutdown || saved.Level == "Normal" {
			t.Fatalf("the first controller's file: %+v, %v; want a clean shutdown above Normal", saved, err)
		}
		cpu := &fakeSampler{v: 85}
		disk := &fullDisk{FileStore: store}
		c, err := New(Options{Table: defaultTable(t), Store: disk, CPU: cpu, Errors: &fakeErrors{}, HealthCheckInterval: never,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		if st := c.State(); st.Sequence != saved.Sequence || st.Level != saved.Level {
			t.Fatalf("served at start: %d %s, want the clean stop's %d %s", st.Sequence, st.Level, saved.Sequence, saved.Level)
		}
		runController(t, c)
		cpu.set(10)
		for range 30 {
			time.Sleep(time.Minute)
			c.Check(context.Background())
		}
		if st := c.State(); st.Sequence != saved.Sequence || st.Level != saved.Level {
			t.Fatalf("the CPU fell on a full disk: %s at sequence %d published; want %s at %d held", st.Level, st.Sequence, saved.Level, saved.Sequence)
		}
		disk.free()
		c.Check(context.Background())
		if st := c.State(); st.Level != "Normal" || st.Sequence <= saved.Sequence {
			t.Fatalf("after a save succeeds: %s at sequence %d; want Normal past %d", st.Level, st.Sequence, saved.Sequence)
		}
	})
}

// TestStartOnAReadOnlyDataDirFails: a failure to save at start that is
// not a full disk, in a data dir the daemon never saved in (a wrong
// owner, a read-only mount), is the setup's fault, and the daemon exits
// on it.
func TestStartOnAReadOnlyDataDirFails(t *testing.T) {
	for _, cause := range []error{syscall.EROFS, syscall.EACCES} {
		store := &fakeStore{fail: cause}
		_, err := New(Options{Table: defaultTable(t), Store: store, CPU: &fakeSampler{}, Errors: &fakeErrors{}})
		if err == nil || !strings.Contains(err.Error(), "reserve sequence numbers") || !errors.Is(err, cause) {
			t.Fatalf("New on a data dir failing with %v: %v, want the reservation's failure naming it", cause, err)
		}
	}
}

// TestStartOnADiskRemountedReadOnly: a data dir the daemon saved in
// before, now read-only (the kernel remounts a disk read-only after I/O
// errors) or failing with EIO, is an incident's disk: the start is held,
// as on a full disk. A wrong owner is still the setup's fault.
func TestStartOnADiskRemountedReadOnly(t *testing.T) {
	for _, tc := range []struct {
		cause error
		held  bool
	}{{syscall.EROFS, true}, {syscall.EIO, true}, {syscall.EACCES, false}} {
		store := &FileStore{Dir: t.TempDir()}
		if err := store.Save(&Persisted{Version: persistedVersion, Level: "Major", Index: 3, Auto: "Major", AutoIndex: 3,
			Sequence: 7, SequenceCeiling: 1007, Since: time.Now(), AutoSince: time.Now()}); err != nil {
			t.Fatal(err)
		}
		c, err := New(Options{Table: defaultTable(t), Store: &failingSaves{store, tc.cause}, CPU: &fakeSampler{}, Errors: &fakeErrors{},
			Logger: slog.New(slog.DiscardHandler)})
		switch {
		case tc.held && err != nil:
			t.Errorf("%v in a data dir saved in before: %v, want a held start", tc.cause, err)
		case tc.held && (c.State().Sequence != 7 || c.State().Level != "Major"):
			t.Errorf("%v: served %d %s, want the saved 7 Major", tc.cause, c.State().Sequence, c.State().Level)
		case !tc.held && !errors.Is(err, tc.cause):
			t.Errorf("%v: %v, want New to fail naming it", tc.cause, err)
		}
	}
}

// failingSaves loads from a FileStore and fails every save with err.
type failingSaves struct {
	*FileStore
	err error
}

func (f *failingSaves) Save(*Persisted) error { return fmt.Errorf("write state: %w", f.err) }

func TestEveryChangeIsSavedInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &fakeStore{}
		r := newRig(t, Options{Store: store})
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				r.c.SetOverride(OverrideRequest{Level: "Minor", Mode: ModePin, TTL: time.Hour, Reason: "x"})
			})
		}
		wg.Wait()
		for i := 1; i < len(store.saves); i++ {
			if store.saves[i] < store.saves[i-1] {
				t.Fatalf("saves went back in time: %v", store.saves)
			}
		}
		if last := store.saves[len(store.saves)-1]; last != 20 {
			t.Fatalf("last save holds sequence %d, want 20", last)
		}
	})
}

func TestLockIsExclusive(t *testing.T) {
	dir := t.TempDir()
	a := &FileStore{Dir: dir}
	release, err := a.Lock()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (&FileStore{Dir: dir}).Lock(); err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second lock: %v, want an error naming %s in use", err, dir)
	}
	release()
	again, err := (&FileStore{Dir: dir}).Lock()
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	again()
}

func TestRemoveTempKeepsState(t *testing.T) {
	dir := t.TempDir()
	s := &FileStore{Dir: dir}
	if err := s.Save(&Persisted{Version: persistedVersion, Level: "Normal"}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{".state-123.json", ".state-9.json", ".probe-1", "state.json.prev.tmp"} {
		os.WriteFile(filepath.Join(dir, n), []byte("{"), 0o600)
	}
	if err := s.RemoveTemp(); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if d := cmp.Diff([]string{"state.json"}, names); d != "" {
		t.Errorf("files left (-want +got):\n%s", d)
	}
}
