package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Store keeps the controller's durable state across restarts.
type Store interface {
	// Load returns the saved state, or (nil, nil) when none was saved yet.
	Load() (*Persisted, error)
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
	Version   int          `json:"version"`
	Level     string       `json:"level"`
	Index     int          `json:"index"`
	Since     time.Time    `json:"since"`
	Reason    string       `json:"reason"`
	Auto      string       `json:"auto_level"`
	AutoIndex int          `json:"auto_index"`
	AutoSince time.Time    `json:"auto_since"`
	Sequence  uint64       `json:"sequence"`
	Override  *Override    `json:"override"`
	History   []Transition `json:"history"`
}

// FileStore saves state as JSON in Dir/state.json with an atomic replace:
// write a temp file, fsync it, rename it over state.json, fsync the
// directory. A crash leaves either the old or the new file, never a torn one.
// FileStore is not safe for concurrent Saves; the controller serialises them.
type FileStore struct {
	// Dir is created on the first Save if it does not exist.
	Dir string
}

var _ Store = (*FileStore)(nil)

// Path returns the state file's path.
func (s *FileStore) Path() string { return filepath.Join(s.Dir, "state.json") }

// Load reads the state file. A missing file is (nil, nil); a file that is
// not valid JSON or of another version is an error naming the file.
func (s *FileStore) Load() (*Persisted, error) {
	b, err := os.ReadFile(s.Path())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state: %w", err)
	}
	var p Persisted
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("state file %s: %w", s.Path(), err)
	}
	if p.Version != persistedVersion {
		return nil, fmt.Errorf("state file %s: version %d, want %d", s.Path(), p.Version, persistedVersion)
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
	if err := os.Rename(tmp.Name(), s.Path()); err != nil {
		return fmt.Errorf("replace state: %w", err)
	}
	d, err := os.Open(s.Dir)
	if err != nil {
		return fmt.Errorf("sync data dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync data dir: %w", err)
	}
	return nil
}
