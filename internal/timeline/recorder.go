package timeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/levels"
)

// The reasons a line is dropped, the label values of
// degraded_timeline_dropped_total{reason} (api exports each at 0; the
// daemon's TestTimelineDropReasonsExported checks they match).
const (
	// DropFull: the buffer was full (the writer is behind).
	DropFull = "full"
	// DropWriteError: the write failed for another reason than a full
	// disk (a read-only one, an I/O error).
	DropWriteError = "write_error"
	// DropBudget: the file being written has reached record.max_bytes
	// (the older files are already deleted): recording stops until the
	// next UTC day, or until a reload raises the budget.
	DropBudget = "budget"
	// DropDiskFull: the disk is full (ENOSPC), or its free space is below
	// Options.Reserve: recording stops first, so that the state file can
	// still be saved, and resumes once there is room again.
	DropDiskFull = "disk_full"
)

// DropReasons are every reason a line is dropped for.
var DropReasons = []string{DropFull, DropWriteError, DropBudget, DropDiskFull}

// Settings are the reloadable settings (config record.*).
type Settings struct {
	// Enabled records lines; when false Record ignores them.
	Enabled bool
	// Retention deletes the files whose day ended longer ago than this
	// (0: no age limit).
	Retention time.Duration
	// MaxBytes bounds the files' total size at every moment, the file
	// being written included (0: no size limit). Before a line would take
	// the total over it, the oldest files are deleted; the file being
	// written never is, so once it alone would pass MaxBytes the day's
	// further lines are dropped (DropBudget) until the next UTC day.
	MaxBytes int64
}

// Options configure a Recorder.
type Options struct {
	// Dir holds the files (data_dir/timeline); it is created when needed.
	Dir string
	// Settings are the settings in force until Configure.
	Settings Settings
	// Buffer is how many lines may wait for the writer (default 4096).
	Buffer int
	// Dropped is called with a drop reason for each dropped line; nil
	// ignores drops. It must not block.
	Dropped func(reason string)
	// Logger logs the first drop of each kind; nil discards.
	Logger *slog.Logger
	// Reserve, if set, is the free space in bytes to leave on the disk
	// that holds Dir: a line that would leave less is dropped
	// (DropDiskFull), so that the timeline never takes the room the state
	// file needs. It is called before each write.
	Reserve func() int64
}

// Recorder writes timeline lines. Create it with New, run its writer with
// Run; Record, Configure, Enabled and WriteRange are safe for concurrent
// use. It implements controller.Recorder.
type Recorder struct {
	dir      string
	ch       chan levels.Line
	settings atomic.Pointer[Settings]
	dropped  func(string)
	log      *slog.Logger
	full     atomic.Bool // the buffer overflowed; logged, not yet written again
	reserve  func() int64
	open     func(name string) (file, error)
	free     func(dir string) (int64, error) // bytes free to us on dir's disk

	// Owned by the Run goroutine.
	cur       file
	curName   string
	stopped   string    // the reason lines are being dropped for; logged once
	total     int64     // the files' total size; -1: not known
	overDay   string    // the day whose file reached overMax
	overMax   int64     // the budget it reached
	halfDay   string    // the day whose file passed half of halfMax (foresee)
	halfMax   int64     // the budget it passed half of
	dayName   string    // the file foresee measures the rate of
	dayAt     time.Time // the time of the first line this recorder wrote to it
	daySize   int64     // and the file's size after that line
	lastPrune time.Time // the line time of the last retention pass
}

var _ controller.Recorder = (*Recorder)(nil)

// file is what the writer needs of an open file.
type file interface {
	io.WriteCloser
	Truncate(size int64) error
	Stat() (os.FileInfo, error)
}

// New returns a recorder writing into o.Dir. It does no I/O and starts
// nothing.
func New(o Options) *Recorder {
	if o.Buffer <= 0 {
		o.Buffer = 4096
	}
	if o.Dropped == nil {
		o.Dropped = func(string) {}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Recorder{dir: o.Dir, ch: make(chan levels.Line, o.Buffer), dropped: o.Dropped, log: o.Logger, reserve: o.Reserve,
		total: -1, free: freeSpace,
		open: func(name string) (file, error) {
			return os.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
		}}
	r.Configure(o.Settings)
	return r
}

// Configure puts new settings in force (a config reload).
func (r *Recorder) Configure(s Settings) { r.settings.Store(&s) }

// Enabled reports whether recording is on.
func (r *Recorder) Enabled() bool { return r.settings.Load().Enabled }

// Record queues one line for writing and returns at once. When the buffer
// is full the line is dropped, counted as DropFull, and the first drop of
// a run of them is logged.
func (r *Recorder) Record(l levels.Line) {
	if !r.Enabled() {
		return
	}
	select {
	case r.ch <- l:
	default:
		r.dropped(DropFull)
		if !r.full.Swap(true) {
			r.log.Warn("timeline: buffer full, dropping lines until the writer catches up", "dir", r.dir)
		}
	}
}

// Run writes queued lines until ctx ends, then writes what is still
// queued and closes the file. It returns ctx.Err(). Call it once.
func (r *Recorder) Run(ctx context.Context) error {
	defer r.closeFile()
	for {
		select {
		case l := <-r.ch:
			r.write(l)
		case <-ctx.Done():
			for {
				select {
				case l := <-r.ch:
					r.write(l)
				default:
					return ctx.Err()
				}
			}
		}
	}
}

// write appends one line to its day's file, within the budget and the
// disk's reserve. A failed write is truncated away, so the file keeps
// whole lines, and the line is dropped.
func (r *Recorder) write(l levels.Line) {
	b, err := json.Marshal(l)
	if err != nil {
		r.drop(DropWriteError, err)
		return
	}
	b = append(b, '\n')
	name, s := FileName(l.At), r.settings.Load()
	if r.lastPrune.IsZero() || l.At.Sub(r.lastPrune) >= time.Hour {
		r.prune(name, l.At, s, 0) // the hourly pass by age
	}
	if reason, err := r.budget(name, l.At, s, int64(len(b))); reason != "" {
		r.drop(reason, err)
		return
	}
	size, err := r.append(name, b)
	if err != nil {
		reason := DropWriteError
		if errors.Is(err, errDiskShort) || errors.Is(err, syscall.ENOSPC) {
			reason = DropDiskFull
		}
		r.drop(reason, err)
		return
	}
	if r.total >= 0 {
		r.total += int64(len(b))
	}
	r.foresee(name, l.At, s, size)
	if r.stopped != "" {
		r.stopped = ""
		r.log.Info("timeline: writing again", "dir", r.dir)
	}
	if r.full.Swap(false) {
		r.log.Info("timeline: the writer caught up", "dir", r.dir)
	}
}

// budget says why a line of n bytes for the named file must be dropped
// ("" if it fits): the oldest other files are deleted to make room under
// s.MaxBytes, and once the named file alone leaves no room the day is
// over budget.
func (r *Recorder) budget(name string, now time.Time, s *Settings, n int64) (reason string, err error) {
	if s.MaxBytes <= 0 {
		return "", nil
	}
	if r.overDay == name && r.overMax == s.MaxBytes {
		return DropBudget, errOverBudget
	}
	if r.total >= 0 && r.total+n <= s.MaxBytes {
		return "", nil
	}
	r.prune(name, now, s, n)
	if r.total < 0 || r.total+n <= s.MaxBytes {
		return "", nil // a directory that cannot be listed: the write will say
	}
	r.overDay, r.overMax = name, s.MaxBytes
	return DropBudget, errOverBudget
}

// prune applies retention, leaving room for a line of n bytes under
// s.MaxBytes, and recounts the files' total size.
func (r *Recorder) prune(current string, now time.Time, s *Settings, n int64) {
	r.lastPrune = now
	maxBytes := s.MaxBytes
	if maxBytes > 0 {
		maxBytes = max(maxBytes-n, 1) // 0 would mean no limit
	}
	total, err := prune(r.dir, current, now, s.Retention, maxBytes)
	r.total = total
	if err != nil {
		r.log.Warn("timeline: retention", "dir", r.dir, "err", err)
	}
}

var (
	errOverBudget = errors.New("the file being written has reached record.max_bytes; recording resumes on the next UTC day")
	errDiskShort  = errors.New("free space on the disk is below the reserve kept for the state file")
)

// drop counts a dropped line and logs the first of a run of drops for
// the same reason.
func (r *Recorder) drop(reason string, err error) {
	r.dropped(reason)
	if r.stopped == reason {
		return
	}
	r.stopped = reason
	switch reason {
	case DropBudget:
		r.log.Warn("timeline: record.max_bytes reached by today's file; dropping lines until the next UTC day", "dir", r.dir,
			"max_bytes", r.settings.Load().MaxBytes)
	case DropDiskFull:
		r.log.Error("timeline: the disk is short of space; dropping lines until there is room, so that the state file can still be saved",
			"dir", r.dir, "err", err)
	default:
		r.log.Error("timeline: cannot write, dropping lines until a write succeeds", "dir", r.dir, "err", err)
	}
}

// foresee warns, once a day and budget, when today's file holds half of
// s.MaxBytes early enough that at the rate this recorder has been writing
// it the rest of the day's lines would be dropped (the budget stops a
// day's file, not the oldest lines): every client report an evaluation
// merges is recorded, so a daemon many clients report to can fill the
// default budget in hours, and the operator should hear of it while a
// reload can still raise it. size is the file's size after the line at.
func (r *Recorder) foresee(name string, at time.Time, s *Settings, size int64) {
	if r.dayName != name {
		r.dayName, r.dayAt, r.daySize = name, at, size
	}
	if s.MaxBytes <= 0 || size*2 < s.MaxBytes || r.halfDay == name && r.halfMax == s.MaxBytes {
		return
	}
	elapsed := at.Sub(r.dayAt)
	if elapsed < time.Minute {
		return // too soon to tell a rate: the next lines will
	}
	r.halfDay, r.halfMax = name, s.MaxBytes
	rate := float64(size-r.daySize) / elapsed.Seconds()
	if rate <= 0 {
		return
	}
	left := float64(s.MaxBytes-size) / rate // seconds; compared before it is a Duration, which it may overflow
	if left >= at.UTC().Truncate(24*time.Hour).Add(24*time.Hour).Sub(at).Seconds() {
		return
	}
	full := at.Add(time.Duration(left * float64(time.Second)))
	r.log.Warn("timeline: today's file holds half of record.max_bytes; at today's rate, lines will be dropped from about "+
		full.UTC().Format("15:04")+" UTC until the next UTC day: raise record.max_bytes", "dir", r.dir,
		"max_bytes", s.MaxBytes, "file_bytes", size, "full_at", full.UTC().Format(time.RFC3339))
}

// append writes b to the named file in the directory, opening it when it
// is not the current one, unless the disk would be left with less than the
// reserve, and returns the file's size after it. On a failed write it cuts
// the file back.
func (r *Recorder) append(name string, b []byte) (int64, error) {
	if name != r.curName || r.cur == nil {
		r.closeFile()
		if err := os.MkdirAll(r.dir, 0o750); err != nil {
			return 0, err
		}
		f, err := r.open(filepath.Join(r.dir, name))
		if err != nil {
			return 0, err
		}
		r.cur, r.curName = f, name
	}
	if r.reserve != nil {
		if free, err := r.free(r.dir); err == nil {
			if reserve := r.reserve(); free-int64(len(b)) < reserve {
				return 0, fmt.Errorf("%w: %d bytes free, %d kept: %w", errDiskShort, free, reserve, syscall.ENOSPC)
			}
		}
	}
	st, err := r.cur.Stat()
	if err != nil {
		return 0, err
	}
	if _, err := r.cur.Write(b); err != nil {
		if terr := r.cur.Truncate(st.Size()); terr != nil {
			err = errors.Join(err, fmt.Errorf("cut back a partial line: %w", terr))
		}
		return 0, err
	}
	return st.Size() + int64(len(b)), nil
}

func (r *Recorder) closeFile() {
	if r.cur != nil {
		_ = r.cur.Close() // O_APPEND writes: nothing is buffered
		r.cur, r.curName = nil, ""
	}
}

// FileName is the name of the file a line at t goes into: its UTC date,
// "2026-12-01.jsonl".
func FileName(t time.Time) string { return t.UTC().Format(time.DateOnly) + ".jsonl" }
