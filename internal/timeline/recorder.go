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
	// DropWriteError: the write failed (a full disk, a read-only one).
	DropWriteError = "write_error"
)

// Settings are the reloadable settings (config record.*).
type Settings struct {
	// Enabled records lines; when false Record ignores them.
	Enabled bool
	// Retention deletes the files whose day ended longer ago than this
	// (0: no age limit).
	Retention time.Duration
	// MaxBytes bounds the files' total size, oldest deleted first (0: no
	// size limit). The file being written is never deleted.
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
	open     func(name string) (file, error)

	// Owned by the Run goroutine.
	cur       file
	curName   string
	failing   bool      // writes fail; logged once
	written   int64     // bytes written since the last retention pass
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
	r := &Recorder{dir: o.Dir, ch: make(chan levels.Line, o.Buffer), dropped: o.Dropped, log: o.Logger,
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

// write appends one line to its day's file. A failed write is truncated
// away, so the file keeps whole lines, and the line is dropped.
func (r *Recorder) write(l levels.Line) {
	b, err := json.Marshal(l)
	if err == nil {
		err = r.append(FileName(l.At), append(b, '\n'))
	}
	if err != nil {
		r.dropped(DropWriteError)
		if !r.failing {
			r.failing = true
			r.log.Error("timeline: cannot write, dropping lines until a write succeeds", "dir", r.dir, "err", err)
		}
		return
	}
	if r.failing {
		r.failing = false
		r.log.Info("timeline: writing again", "dir", r.dir)
	}
	if r.full.Swap(false) {
		r.log.Info("timeline: the writer caught up", "dir", r.dir)
	}
	r.written += int64(len(b) + 1)
	s := r.settings.Load()
	if name := FileName(l.At); r.lastPrune.IsZero() || l.At.Sub(r.lastPrune) >= time.Hour || (s.MaxBytes > 0 && r.written >= s.MaxBytes/8) {
		r.lastPrune, r.written = l.At, 0
		if err := prune(r.dir, name, l.At, s.Retention, s.MaxBytes); err != nil {
			r.log.Warn("timeline: retention", "dir", r.dir, "err", err)
		}
	}
}

// append writes b to the named file in the directory, opening it when it
// is not the current one. On a failed write it cuts the file back.
func (r *Recorder) append(name string, b []byte) error {
	if name != r.curName || r.cur == nil {
		r.closeFile()
		if err := os.MkdirAll(r.dir, 0o750); err != nil {
			return err
		}
		f, err := r.open(filepath.Join(r.dir, name))
		if err != nil {
			return err
		}
		r.cur, r.curName = f, name
		r.lastPrune = time.Time{} // a new day: apply retention now
	}
	st, err := r.cur.Stat()
	if err != nil {
		return err
	}
	if _, err := r.cur.Write(b); err != nil {
		if terr := r.cur.Truncate(st.Size()); terr != nil {
			err = errors.Join(err, fmt.Errorf("cut back a partial line: %w", terr))
		}
		return err
	}
	return nil
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
