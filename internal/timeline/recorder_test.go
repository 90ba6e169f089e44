package timeline

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/degraded/degraded/levels"
)

var t0 = time.Date(2026, 12, 1, 23, 59, 58, 0, time.UTC)

// line is a tick at t0+d publishing level.
func line(d time.Duration, level string) levels.Line {
	cpu := 42.0
	return levels.Line{V: 1, At: t0.Add(d), Trigger: levels.TriggerTick, Published: level, Recommended: level, Source: "auto",
		Signals: map[levels.Signal]levels.LineSignal{levels.CPU: {Value: &cpu, State: "available"}}}
}

// drops counts Dropped calls by reason.
type drops struct {
	mu sync.Mutex
	n  map[string]int
}

func (d *drops) add(reason string) { d.mu.Lock(); d.n[reason]++; d.mu.Unlock() }
func (d *drops) get(reason string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[reason]
}

// logBuffer is a concurrency-safe log sink.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *logBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// record runs a recorder over lines and returns once they are written.
func record(t *testing.T, r *Recorder, lines ...levels.Line) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	for _, l := range lines {
		r.Record(l)
	}
	stop()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Run returned %v, want context.Canceled", err)
	}
}

func readLines(t *testing.T, path string) []levels.Line {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []levels.Line
	for s := range strings.SplitSeq(strings.TrimSuffix(string(b), "\n"), "\n") {
		var l levels.Line
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatalf("%s holds a line that is not JSON: %q: %v", path, s, err)
		}
		out = append(out, l)
	}
	return out
}

func TestLinesGoToDailyFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "timeline")
	r := New(Options{Dir: dir, Settings: Settings{Enabled: true}})
	record(t, r, line(0, "Normal"), line(time.Second, "Major"), line(3*time.Second, "Major"))

	first := readLines(t, filepath.Join(dir, "2026-12-01.jsonl"))
	second := readLines(t, filepath.Join(dir, "2026-12-02.jsonl"))
	if len(first) != 2 || len(second) != 1 || first[1].Published != "Major" || !second[0].At.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("2026-12-01: %+v\n2026-12-02: %+v\nwant two lines on the first day and one after midnight UTC", first, second)
	}

	var out bytes.Buffer
	if err := r.WriteRange(context.Background(), &out, t0.Add(time.Second), t0.Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(out.String(), "\n"); got != 2 || strings.Contains(out.String(), `"Normal"`) {
		t.Errorf("WriteRange(t0+1s, t0+3s) = %q, want the two Major lines across both files", out.String())
	}
}

func TestDisabledRecordsNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "timeline")
	r := New(Options{Dir: dir})
	record(t, r, line(0, "Normal"))
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a disabled recorder created %s (err %v)", dir, err)
	}
}

// TestFullBufferDropsWithoutBlocking: with the writer stalled, Record
// returns at once, counts each dropped line and logs once.
func TestFullBufferDropsWithoutBlocking(t *testing.T) {
	var log logBuffer
	d := &drops{n: map[string]int{}}
	r := New(Options{Dir: t.TempDir(), Settings: Settings{Enabled: true}, Buffer: 2, Dropped: d.add, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	for i := range 10 {
		r.Record(line(time.Duration(i)*time.Second, "Normal")) // no writer runs: must not block
	}
	if got := d.get(DropFull); got != 8 {
		t.Errorf("dropped %d lines as full, want 8 (10 into a buffer of 2)", got)
	}
	if n := strings.Count(log.String(), "buffer full"); n != 1 {
		t.Errorf("logged the full buffer %d times, want once:\n%s", n, log.String())
	}
}

// failingFile fails every write with ENOSPC after a partial write while
// full is set.
type failingFile struct {
	mu   sync.Mutex
	full bool
	data []byte
}

func (f *failingFile) Write(b []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.full {
		f.data = append(f.data, b[:len(b)/2]...)
		return len(b) / 2, syscall.ENOSPC
	}
	f.data = append(f.data, b...)
	return len(b), nil
}
func (f *failingFile) Truncate(n int64) error {
	f.mu.Lock()
	f.data = f.data[:n]
	f.mu.Unlock()
	return nil
}
func (f *failingFile) Close() error { return nil }
func (f *failingFile) Stat() (os.FileInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return sizeInfo(len(f.data)), nil
}

type sizeInfo int64

func (s sizeInfo) Name() string       { return "" }
func (s sizeInfo) Size() int64        { return int64(s) }
func (s sizeInfo) Mode() os.FileMode  { return 0 }
func (s sizeInfo) ModTime() time.Time { return time.Time{} }
func (s sizeInfo) IsDir() bool        { return false }
func (s sizeInfo) Sys() any           { return nil }

// TestFullDiskIsCountedAndLoggedOnce: writes that fail are dropped and
// counted, logged once, cut back to whole lines, and recording resumes
// when the disk has room again.
func TestFullDiskIsCountedAndLoggedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log logBuffer
		d := &drops{n: map[string]int{}}
		f := &failingFile{}
		r := New(Options{Dir: t.TempDir(), Settings: Settings{Enabled: true}, Dropped: d.add, Logger: slog.New(slog.NewTextHandler(&log, nil))})
		r.open = func(string) (file, error) { return f, nil }
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- r.Run(ctx) }()

		r.Record(line(0, "Normal"))
		synctest.Wait()
		f.mu.Lock()
		f.full = true
		f.mu.Unlock()
		for i := 1; i <= 5; i++ {
			r.Record(line(time.Duration(i)*time.Millisecond, "Major"))
		}
		synctest.Wait()
		f.mu.Lock()
		f.full = false
		f.mu.Unlock()
		r.Record(line(time.Second, "Major"))
		stop()
		<-done

		if got := d.get(DropDiskFull); got != 5 {
			t.Errorf("counted %d lines dropped for a full disk, want 5", got)
		}
		if n := strings.Count(log.String(), "short of space"); n != 1 {
			t.Errorf("logged the full disk %d times, want once:\n%s", n, log.String())
		}
		lines := strings.Split(strings.TrimSuffix(string(f.data), "\n"), "\n")
		if len(lines) != 2 {
			t.Fatalf("file holds %q, want the line before and the line after the full disk", f.data)
		}
		for _, s := range lines {
			if !json.Valid([]byte(s)) {
				t.Errorf("a partial write was left in the file: %q", s)
			}
		}
	})
}

// TestReadOnlyDirectoryKeepsRunning: a directory that cannot be written
// drops lines, and Run still ends cleanly.
func TestReadOnlyDirectoryKeepsRunning(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes into read-only directories")
	}
	parent := t.TempDir()
	if err := os.Chmod(parent, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(parent, 0o700) })
	d := &drops{n: map[string]int{}}
	r := New(Options{Dir: filepath.Join(parent, "timeline"), Settings: Settings{Enabled: true}, Dropped: d.add})
	record(t, r, line(0, "Normal"), line(time.Second, "Normal"))
	if got := d.get(DropWriteError); got != 2 {
		t.Errorf("counted %d write errors in a read-only directory, want 2", got)
	}
}

func TestRetention(t *testing.T) {
	const day = 24 * time.Hour
	now := time.Date(2026, 12, 10, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		retention time.Duration
		maxBytes  int64
		want      []string
	}{
		{"by age", 3 * day, 0, []string{"2026-12-07.jsonl", "2026-12-08.jsonl", "2026-12-09.jsonl", "2026-12-10.jsonl"}},
		{"by size, oldest first", 0, 250, []string{"2026-12-09.jsonl", "2026-12-10.jsonl"}},
		{"never the current file", 0, 1, []string{"2026-12-10.jsonl"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for i := range 10 { // 2026-12-01 .. 2026-12-10, 100 bytes each
				name := FileName(now.Add(-time.Duration(i) * day))
				if err := os.WriteFile(filepath.Join(dir, name), bytes.Repeat([]byte("x"), 100), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := prune(dir, FileName(now), now, tt.retention, tt.maxBytes); err != nil {
				t.Fatal(err)
			}
			ds, _ := days(dir)
			var got []string
			for _, d := range ds {
				got = append(got, d.name)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("left %v, want %v", got, tt.want)
			}
			if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
				t.Errorf("retention touched a file that is not the timeline's: %v", err)
			}
		})
	}
}

// TestWriteRangeLeavesOutALineBeingWritten: a last line without its
// newline (a write in progress) is not served, nor are lines that do not
// parse; files outside the range are not read.
func TestWriteRangeLeavesOutALineBeingWritten(t *testing.T) {
	dir := t.TempDir()
	whole, _ := json.Marshal(line(0, "Normal"))
	partial, _ := json.Marshal(line(time.Second, "Major"))
	body := string(whole) + "\n" + "not json\n" + string(partial[:len(partial)/2])
	if err := os.WriteFile(filepath.Join(dir, FileName(t0)), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "2026-11-01.jsonl"), []byte("{torn"), 0o000); err != nil {
		t.Fatal(err)
	}
	r := New(Options{Dir: dir, Settings: Settings{Enabled: true}})
	var out bytes.Buffer
	if err := r.WriteRange(context.Background(), &out, t0.Add(-time.Hour), time.Time{}); err != nil {
		t.Fatalf("WriteRange: %v (a file outside the range must not be opened)", err)
	}
	if got := out.String(); got != string(whole)+"\n" {
		t.Errorf("WriteRange = %q, want only the whole line", got)
	}
}
