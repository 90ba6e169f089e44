package timeline

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"time"
)

// WriteRange writes to w, in file order, every complete line whose "at"
// is within [from, to]; a zero from or to leaves that end open. Files
// whose day lies outside the range are not read; lines that do not parse
// are skipped. A line still being written is left out. It stops with
// ctx.Err() when ctx ends.
func (r *Recorder) WriteRange(ctx context.Context, w io.Writer, from, to time.Time) error {
	ds, err := days(r.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil // nothing recorded yet
	}
	if err != nil {
		return err
	}
	for _, d := range ds {
		if (!from.IsZero() && !d.start.Add(24*time.Hour).After(from)) || (!to.IsZero() && d.start.After(to)) {
			continue
		}
		if err := copyRange(ctx, w, filepath.Join(r.dir, d.name), from, to); err != nil {
			return err
		}
	}
	return nil
}

// copyRange copies the lines of one file within [from, to] to w.
func copyRange(ctx context.Context, w io.Writer, path string, from, to time.Time) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil // deleted by retention meanwhile
	}
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		line, err := br.ReadBytes('\n')
		if err == io.EOF {
			return nil // a last line without its newline is still being written
		}
		if err != nil {
			return err
		}
		// The "at" alone decides the range, read without parsing the line:
		// a narrow range of a day's file (the History view's hover) costs
		// a scan, not a parse of every line. The lines served are checked.
		at, ok := lineAt(line)
		if !ok || (!from.IsZero() && at.Before(from)) || (!to.IsZero() && at.After(to)) || !json.Valid(line) {
			continue
		}
		if _, err := w.Write(line); err != nil {
			return err
		}
	}
}
