package controller

import (
	"bytes"
	"errors"
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

// TestStartOnAFullDiskSaysOnce: the first save, which reserves the
// sequence block, fails: New fails with the cause, and nothing logs a
// retry that will never come (the daemon exits).
func TestStartOnAFullDiskSaysOnce(t *testing.T) {
	var logs bytes.Buffer
	store := &fakeStore{fail: syscall.ENOSPC}
	_, err := New(Options{Table: defaultTable(t), Store: store, CPU: &fakeSampler{}, Errors: &fakeErrors{}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err == nil || !strings.Contains(err.Error(), "reserve sequence numbers") || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("New on a full disk: %v, want the reservation's failure, ENOSPC", err)
	}
	if logs.Len() > 0 {
		t.Errorf("New on a full disk logged %q; the error is the daemon's to say, once", logs.String())
	}
}

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
