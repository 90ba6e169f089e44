package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/degraded/degraded/levels"
)

// Store keeps the controller's durable state across restarts.
type Store interface {
	// Load returns the saved state, or nil when none was saved yet, and
	// whether it came from an older copy than the last save (FileStore's
	// state.json.prev): a state that may be older than what readers saw.
	Load() (p *Persisted, fromPrev bool, err error)
	// Save replaces the saved state; when it returns nil the state is durable.
	Save(*Persisted) error
}

// persistedVersion is the state file format; a file of another version is
// refused rather than misread.
const persistedVersion = 1

// Persisted is the durable part of the controller's state: what a restart
// must not lose. Levels are stored by name so that a changed table maps
// them by meaning, not by position.
type Persisted struct {
	Version   int       `json:"version"`
	Level     string    `json:"level"`
	Index     int       `json:"index"`
	Since     time.Time `json:"since"`
	Reason    string    `json:"reason"`
	Auto      string    `json:"auto_level"`
	AutoIndex int       `json:"auto_index"`
	AutoSince time.Time `json:"auto_since"`
	Sequence  uint64    `json:"sequence"`
	// SequenceCeiling is the highest sequence this save reserved: after an
	// unclean shutdown the controller resumes above it.
	SequenceCeiling uint64 `json:"sequence_ceiling"`
	// CleanShutdown is set only by the final save of a clean shutdown.
	CleanShutdown bool `json:"clean_shutdown"`
	// Levels maps each level name of the saving table to its priority
	// threshold, so a level removed since can be mapped by meaning.
	Levels   map[string]int `json:"levels,omitempty"`
	Override *Override      `json:"override"`
	// FleetOverride is the last fleet override seen, with its
	// mod_revision: honoured while etcd is unreachable and across restarts.
	FleetOverride *FleetOverride `json:"fleet_override,omitempty"`
	History       []Transition   `json:"history"`
	// JitterR and NotBefore are the automatic level's recovery jitter draw
	// and the earliest step down after an override ended.
	JitterR   float64   `json:"jitter_r,omitempty"`
	NotBefore time.Time `json:"not_before,omitzero"`
	// Shadow is the mode the state was published in, so a start in the
	// other mode is a history entry (absent in older files: enforce).
	Shadow bool `json:"shadow,omitempty"`
	// Admission is the admission mode the state was published in, so a
	// start in the other one is a history entry (absent in older files).
	Admission levels.AdmissionMode `json:"admission,omitempty"`
	// Capacity is the admission law's capacity estimate (graduated mode,
	// once measured), so that a restart in an overload does not measure
	// it again by overloading the service (absent in older files).
	Capacity *levels.Capacity `json:"capacity,omitempty"`
}

// FileStore saves state as JSON in Dir/state.json with an atomic replace:
// write a temp file and fsync it, keep the current file as
// state.json.prev (a hard link, so both stay whole), rename the temp file
// over state.json, fsync the directory. A crash leaves either the old or
// the new file, never a torn one, and a state.json damaged by anything
// else falls back to state.json.prev.
//
// FileStore is not safe for concurrent use; the controller serialises its
// calls.
type FileStore struct {
	// Dir is created on the first Save if it does not exist.
	Dir string
}

var _ Store = (*FileStore)(nil)

// ErrCorruptState is wrapped by Load's error when neither state.json nor
// state.json.prev can be read.
var ErrCorruptState = errors.New("state file unusable")

// Path returns the state file's path.
func (s *FileStore) Path() string { return filepath.Join(s.Dir, "state.json") }

func (s *FileStore) prevPath() string { return s.Path() + ".prev" }

// Load reads the state file. With no state saved yet it returns nil. If
// state.json is damaged (or missing) but state.json.prev is good, it
// returns the previous state with fromPrev set. If neither is usable, the
// error wraps ErrCorruptState and names the file.
func (s *FileStore) Load() (p *Persisted, fromPrev bool, err error) {
	p, err = readState(s.Path())
	switch {
	case err == nil:
		return p, false, nil
	case errors.Is(err, os.ErrNotExist):
		if !exists(s.prevPath()) {
			return nil, false, nil
		}
	case !errors.Is(err, errDamaged):
		return nil, false, err // unreadable, not damaged: the operator must fix access
	}
	prev, perr := readState(s.prevPath())
	if perr != nil {
		if errors.Is(err, os.ErrNotExist) {
			err = perr
		}
		return nil, false, fmt.Errorf("%w: %w", ErrCorruptState, err)
	}
	return prev, true, nil
}

// Reset moves an unusable state file aside (to state.json.corrupt) so the
// next start begins from Normal. It is for --reset-state.
func (s *FileStore) Reset() error {
	for _, p := range []string{s.Path(), s.prevPath()} {
		if err := os.Rename(p, p+".corrupt"); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("reset state: %w", err)
		}
	}
	return nil
}

// errDamaged marks a state file that was read but cannot be used.
var errDamaged = errors.New("damaged")

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// damaged is a state file that was read but cannot be used.
type damaged struct{ path, why string }

func (d damaged) Error() string        { return "state file " + d.path + ": " + d.why }
func (d damaged) Is(target error) bool { return target == errDamaged }

// readState reads and checks one state file; errors name the file.
func readState(path string) (*Persisted, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read state: %w", err)
	}
	var p Persisted
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, damaged{path, err.Error()}
	}
	if p.Version != persistedVersion {
		return nil, damaged{path, fmt.Sprintf("version %d, want %d", p.Version, persistedVersion)}
	}
	if p.Sequence > maxSequence || p.SequenceCeiling > maxSequence {
		return nil, damaged{path, fmt.Sprintf("sequence %d or ceiling %d above 2^53-1", p.Sequence, p.SequenceCeiling)}
	}
	if p.Override != nil && (p.Override.Mode != ModePin && p.Override.Mode != ModeFloor) {
		return nil, damaged{path, fmt.Sprintf("override mode %q", p.Override.Mode)}
	}
	return &p, nil
}

// Save writes p atomically.
func (s *FileStore) Save(p *Persisted) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	if err := os.MkdirAll(s.Dir, 0o750); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	tmp, err := os.CreateTemp(s.Dir, ".state-*.json")
	if err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op once renamed
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write state: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if err := s.keepPrevious(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), s.Path()); err != nil {
		return fmt.Errorf("replace state: %w", err)
	}
	return syncDir(s.Dir)
}

// keepPrevious makes state.json.prev a second name of the current
// state.json, if that file is good: the link is built aside and renamed
// into place, so state.json.prev is never missing or half-written.
func (s *FileStore) keepPrevious() error {
	if _, err := readState(s.Path()); err != nil {
		return nil // nothing good to keep; leave the old .prev alone
	}
	link := s.prevPath() + ".tmp"
	_ = os.Remove(link)
	if err := os.Link(s.Path(), link); err != nil {
		return fmt.Errorf("keep previous state: %w", err)
	}
	if err := os.Rename(link, s.prevPath()); err != nil {
		return fmt.Errorf("keep previous state: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync data dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync data dir: %w", err)
	}
	return nil
}

// Lock takes an exclusive lock on Dir/lock, creating Dir if needed, so two
// daemons never share one state file. It fails at once, naming the
// directory, when another process holds the lock. The lock lasts until
// the returned release is called or the process exits.
func (s *FileStore) Lock() (release func(), err error) {
	if err := os.MkdirAll(s.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("data_dir %s: %w", s.Dir, err)
	}
	path := filepath.Join(s.Dir, "lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if errors.Is(err, syscall.EROFS) {
		// A disk the kernel remounted read-only after I/O errors: the lock
		// file an earlier start made is still there, and flock holds on a
		// descriptor opened for reading. (The first save then fails, and
		// the start is held: controller.New.)
		f, err = os.Open(path)
	}
	if err != nil {
		return nil, fmt.Errorf("data_dir %s: %w", s.Dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data_dir %s is in use by another degraded (%s is locked)", s.Dir, path)
		}
		return nil, fmt.Errorf("lock data_dir %s: %w", s.Dir, err)
	}
	return func() { f.Close() }, nil
}

// RemoveTemp deletes the temp files a crash left in Dir: half-written
// state files and links. Call it only while holding [FileStore.Lock].
func (s *FileStore) RemoveTemp() error {
	for _, pattern := range []string{".state-*.json", ".probe-*", "state.json.prev.tmp"} {
		matches, err := filepath.Glob(filepath.Join(s.Dir, pattern))
		if err != nil {
			return err
		}
		for _, m := range matches {
			if err := os.Remove(m); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("remove leftover temp file: %w", err)
			}
		}
	}
	return nil
}
