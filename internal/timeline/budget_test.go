package timeline

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/degraded/degraded/levels"
)

// budgetFile checks, before every write, that the line fits the budget
// with every file already in the directory: the timeline is within
// record.max_bytes at every moment, not only after a retention pass.
type budgetFile struct {
	*os.File
	t   *testing.T
	dir string
	r   *Recorder
}

func (f *budgetFile) Write(b []byte) (int, error) {
	ds, err := days(f.dir)
	if err != nil {
		f.t.Error(err)
	}
	var total int64
	for _, d := range ds {
		total += d.size
	}
	if maxBytes := f.r.settings.Load().MaxBytes; total+int64(len(b)) > maxBytes {
		f.t.Errorf("%s: a write of %d bytes with %d on disk would take the timeline past max_bytes %d", f.Name(), len(b), total, maxBytes)
	}
	return f.File.Write(b)
}

// TestBudgetCountsTheFileBeingWritten: record.max_bytes bounds the files
// with the one being written: older files go first, oldest first; once
// today's file alone would pass the budget, the day's further lines are
// dropped (DropBudget), logged once, until the next UTC day or a reload
// that raises the budget. Before, today's file grew past max_bytes until
// the disk was full.
func TestBudgetCountsTheFileBeingWritten(t *testing.T) {
	dir := t.TempDir()
	day := t0.Truncate(24 * time.Hour) // 2026-12-01, the day of t0
	for i := 1; i <= 3; i++ {
		name := FileName(day.Add(-time.Duration(i) * 24 * time.Hour))
		if err := os.WriteFile(filepath.Join(dir, name), bytes.Repeat([]byte("x"), 400), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	one, err := json.Marshal(line(0, "Normal"))
	if err != nil {
		t.Fatal(err)
	}
	size := int64(len(one) + 1)
	maxBytes := 1200 + 3*size // room for the old files and three lines
	var log logBuffer
	d := &drops{n: map[string]int{}}
	r := New(Options{Dir: dir, Settings: Settings{Enabled: true, MaxBytes: maxBytes}, Dropped: d.add, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	r.open = func(name string) (file, error) {
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		return &budgetFile{File: f, t: t, dir: dir, r: r}, err
	}
	var lines []levels.Line
	const written = 30
	for i := range written { // t0 is 23:59:58: all within 2026-12-01
		lines = append(lines, line(time.Duration(i)*50*time.Millisecond, "Normal"))
	}
	record(t, r, lines...)

	left, _ := days(dir)
	var names []string
	for _, f := range left {
		names = append(names, f.name)
	}
	// Three lines fit beside the old files; each further one deletes the
	// oldest file (400 bytes: about one line each) until only today's is
	// left, holding all the budget has room for.
	today := filepath.Join(dir, FileName(t0))
	n := len(readLines(t, today))
	if want := int(maxBytes / size); n != want || len(names) != 1 {
		t.Errorf("left %v with %d lines today; want only today's file, with %d lines (max_bytes %d, %d bytes a line)", names, n, want, maxBytes, size)
	}
	if got := d.get(DropBudget); got != written-n || got == 0 {
		t.Errorf("dropped %d lines for the budget, want %d", got, written-n)
	}
	if c := strings.Count(log.String(), "max_bytes reached"); c != 1 {
		t.Errorf("logged the budget %d times, want once:\n%s", c, log.String())
	}

	// A reload that raises the budget resumes the day; the next day starts
	// afresh, deleting the day before to make room.
	r.Configure(Settings{Enabled: true, MaxBytes: maxBytes + size})
	record(t, r, line(1500*time.Millisecond, "Normal"))
	if got := len(readLines(t, today)); got != n+1 {
		t.Errorf("after raising max_bytes by one line, today's file has %d lines, want %d", got, n+1)
	}
	record(t, r, line(3*time.Second, "Major"))
	tomorrow := readLines(t, filepath.Join(dir, FileName(t0.Add(3*time.Second))))
	if _, err := os.Stat(today); !os.IsNotExist(err) || len(tomorrow) != 1 {
		t.Errorf("the next day: yesterday's file %v (want deleted), %d lines today (want 1)", err, len(tomorrow))
	}
	if !strings.Contains(log.String(), "writing again") {
		t.Errorf("resuming was not logged:\n%s", log.String())
	}
}

// TestShortDiskStopsRecordingFirst: when a line would leave the disk with
// less free space than the reserve (the room the state file needs), it is
// dropped (DropDiskFull) and logged once; recording resumes when there is
// room again, and says so.
func TestShortDiskStopsRecordingFirst(t *testing.T) {
	dir := t.TempDir()
	var free atomic.Int64
	free.Store(1 << 30)
	var log logBuffer
	d := &drops{n: map[string]int{}}
	synctest.Test(t, func(t *testing.T) {
		r := New(Options{Dir: dir, Settings: Settings{Enabled: true}, Dropped: d.add, Logger: slog.New(slog.NewTextHandler(&log, nil)),
			Reserve: func() int64 { return 1 << 20 }})
		r.free = func(string) (int64, error) { return free.Load(), nil }
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- r.Run(ctx) }()
		r.Record(line(0, "Normal"))
		synctest.Wait()         // Record returns before the line is written
		free.Store(1<<20 + 100) // a line of a few hundred bytes would eat into the reserve
		for i := 1; i <= 3; i++ {
			r.Record(line(time.Duration(i)*time.Millisecond, "Major"))
		}
		synctest.Wait()
		free.Store(1 << 30)
		r.Record(line(time.Second, "Major"))
		stop()
		<-done
	})

	if got := len(readLines(t, filepath.Join(dir, FileName(t0)))); got != 2 {
		t.Errorf("%d lines written, want the one before and the one after the short disk", got)
	}
	if got := d.get(DropDiskFull); got != 3 {
		t.Errorf("dropped %d lines for the short disk, want 3", got)
	}
	if c := strings.Count(log.String(), "short of space"); c != 1 || !strings.Contains(log.String(), "writing again") {
		t.Errorf("want the short disk logged once, then writing again:\n%s", log.String())
	}
}

// TestHalfBudgetIsForeseen: when today's file passes half of
// record.max_bytes early enough that, at the rate the recorder has been
// writing it, the budget would stop the rest of the day's lines, the
// recorder says so once, with the time; a budget that rate does not reach
// today is not warned about. (100 clients reporting every second write
// about 28 KiB/s: the default 256MiB in under three hours.)
func TestHalfBudgetIsForeseen(t *testing.T) {
	midnight := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) levels.Line {
		l := line(0, "Normal")
		l.At = midnight.Add(d)
		return l
	}
	one, err := json.Marshal(at(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	size := int64(len(one) + 1) // every line at a whole second has this size
	for _, tt := range []struct {
		name         string
		start, every time.Duration
		before       int64 // lines' worth of bytes in today's file before the recorder starts
		lines        int
		want         string // the warning's time and full_at; "" for none
	}{
		// Half of 40 lines at 00:03:20, 19 lines after the first in
		// 190 s: full 200 s later.
		{"fills today", 10 * time.Second, 10 * time.Second, 0, 30, "from about 00:06 UTC.*full_at=2026-12-03T00:06:40Z"},
		// Half at 20:00, 19 lines in 19 h: full tomorrow at 16:00.
		{"fills tomorrow", time.Hour, time.Hour, 0, 23, ""},
		// A restart at noon finds the file at 25 of 40 lines: the rate
		// is read from its own lines, once they span a minute (12:01:00,
		// 6 lines in 60 s, 8 lines of room).
		{"restarted at noon", 12 * time.Hour, 10 * time.Second, 25, 10, "from about 12:02 UTC.*full_at=2026-12-03T12:02:20Z"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.before > 0 {
				if err := os.WriteFile(filepath.Join(dir, FileName(midnight)), bytes.Repeat([]byte("x"), int(tt.before*size)), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var log logBuffer
			r := New(Options{Dir: dir, Settings: Settings{Enabled: true, MaxBytes: 40 * size},
				Logger: slog.New(slog.NewTextHandler(&log, nil))})
			var lines []levels.Line
			for i := range tt.lines {
				lines = append(lines, at(tt.start+time.Duration(i)*tt.every))
			}
			record(t, r, lines...)
			warned := strings.Count(log.String(), "today's file holds half of record.max_bytes")
			switch {
			case tt.want == "" && warned != 0:
				t.Errorf("warned of a budget today's rate does not reach today:\n%s", log.String())
			case tt.want != "" && (warned != 1 || !regexp.MustCompile(tt.want).MatchString(log.String())):
				t.Errorf("log:\n%s\nwant one warning matching %q", log.String(), tt.want)
			}
		})
	}
}

// TestHalfBudgetAtASlowRate: a file at half of a large budget that grows
// by a few bytes a second is days from full: no warning (the time left,
// 10^10 s, would overflow a Duration if it were one before the compare).
func TestHalfBudgetAtASlowRate(t *testing.T) {
	dir := t.TempDir()
	midnight := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	const maxBytes = 1 << 40
	f, err := os.Create(filepath.Join(dir, FileName(midnight)))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(maxBytes / 2); err != nil { // sparse: no disk is used
		t.Skipf("no sparse file here: %v", err)
	}
	f.Close()
	var log logBuffer
	r := New(Options{Dir: dir, Settings: Settings{Enabled: true, MaxBytes: maxBytes}, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	var lines []levels.Line
	for i := range 13 { // 12:00:00 to 12:02:00, a line each 10 s
		l := line(0, "Normal")
		l.At = midnight.Add(12*time.Hour + time.Duration(i)*10*time.Second)
		lines = append(lines, l)
	}
	record(t, r, lines...)
	if strings.Contains(log.String(), "half of record.max_bytes") {
		t.Errorf("warned of a budget 10^10 s away:\n%s", log.String())
	}
}
