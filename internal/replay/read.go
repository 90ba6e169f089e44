package replay

import (
	"bufio"
	"bytes"
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/degraded/degraded/internal/timeline"
	"github.com/degraded/degraded/levels"
)

// Files expands paths into timeline files: a file is itself, a directory
// gives its *.jsonl files in name order.
func Files(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("timeline %s: %w", p, err)
		}
		if !info.IsDir() {
			out = append(out, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, fmt.Errorf("timeline %s: %w", p, err)
		}
		var names []string
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".jsonl") && !e.IsDir() {
				names = append(names, filepath.Join(p, e.Name()))
			}
		}
		slices.Sort(names)
		out = append(out, names...)
	}
	return out, nil
}

// MaxLineBytes caps one timeline line (its newline not counted). The
// recorder writes lines of a few hundred bytes; a longer line is damaged
// (or not a timeline at all): it is skipped and counted as corrupt without
// ever being held whole, so a file of one endless line (/dev/zero) costs
// no more memory than a good one.
const MaxLineBytes = 1 << 20

// futureSlack is how far past the reader's clock a line may be dated: a
// line beyond now + 1 day is damaged (a clock set to 2099 would otherwise
// stretch the report over decades).
const futureSlack = 24 * time.Hour

// stream reads one file's lines in order, each with its "at" read ahead
// of the full parse, so that files merge without being parsed twice.
type stream struct {
	f      *os.File
	br     *bufio.Reader
	latest time.Time // lines dated after it are damaged
	next   []byte
	at     time.Time
	err    error
}

// advance reads the stream's next line whose "at" reads and is not after
// s.latest; it returns false at the end. Other lines, and lines over
// MaxLineBytes, are counted in *corrupt and skipped.
func (s *stream) advance(corrupt *int) bool {
	for {
		b, long, err := readLine(s.br)
		switch {
		case long:
			*corrupt++
		case len(bytes.TrimSpace(b)) > 0:
			if at, ok := timeline.LineAt(b); ok && !at.After(s.latest) {
				s.next, s.at = b, at
				return true
			}
			*corrupt++
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.err = err
			}
			return false
		}
	}
}

// readLine reads the next line, its newline included, into a new slice.
// A line over MaxLineBytes is read to its end and dropped as it goes:
// long is true and line is nil. err is the reader's, io.EOF at the end.
func readLine(br *bufio.Reader) (line []byte, long bool, err error) {
	for {
		frag, err := br.ReadSlice('\n')
		if !long {
			if size := len(line) + len(bytes.TrimSuffix(frag, []byte("\n"))); size > MaxLineBytes {
				line, long = nil, true
			} else {
				line = append(line, frag...)
			}
		}
		if err != bufio.ErrBufferFull {
			return line, long, err
		}
	}
}

// parse reads one timeline line and reports whether it is valid: JSON,
// v 1, an at no later than latest and a known trigger.
func parse(b []byte, l *levels.Line, latest time.Time) bool {
	if json.Unmarshal(b, l) != nil || l.V != levels.LineVersion || l.At.IsZero() || l.At.After(latest) {
		return false
	}
	switch l.Trigger {
	case levels.TriggerStart, levels.TriggerTick, levels.TriggerEvent, levels.TriggerReload, levels.TriggerOverride, levels.TriggerFleet:
		return true
	}
	return false
}

// merged is a heap of streams by the time of their next line.
type merged []*stream

func (m merged) Len() int           { return len(m) }
func (m merged) Less(i, j int) bool { return m[i].at.Before(m[j].at) }
func (m merged) Swap(i, j int)      { m[i], m[j] = m[j], m[i] }
func (m *merged) Push(x any)        { *m = append(*m, x.(*stream)) }
func (m *merged) Pop() any {
	old := *m
	s := old[len(old)-1]
	*m = old[:len(old)-1]
	return s
}

// batchSize is how many lines a parse worker takes at a time, and
// batchBytes how many bytes: a batch ends at whichever comes first, so that
// the batches in flight (a few per CPU) hold a few MiB whatever the lines'
// length (1,024 lines of 1 MiB once held 512 MiB per batch).
const (
	batchSize  = 512
	batchBytes = 1 << 20
)

// batch is a run of merged lines, parsed by a worker; done is closed once
// lines and ok are filled.
type batch struct {
	raw   [][]byte
	lines []levels.Line
	ok    []bool
	done  chan struct{}
}

// each calls fn with every valid line of files, merged by at, dropping a
// line with the same at and trigger as the one before it (the same file
// given twice, or a directory and a file in it). The files are read as
// streams, never held in memory; lines are parsed by one worker per CPU
// and handed to fn in order. It returns the number of corrupt lines
// skipped: lines that do not parse, lines over MaxLineBytes and lines
// dated more than a day after now. Memory stays bounded however large
// the files or their lines.
func each(ctx context.Context, files []string, fn func(levels.Line)) (corrupt int, err error) {
	latest := time.Now().Add(futureSlack)
	h, closeAll, corrupt, err := open(ctx, files, latest)
	defer closeAll()
	if err != nil {
		return corrupt, ctxOr(ctx, err)
	}
	work := make(chan *batch)
	ordered := make(chan *batch, 2*runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for b := range work {
				for i, raw := range b.raw {
					b.ok[i] = parse(raw, &b.lines[i], latest)
				}
				close(b.done)
			}
		})
	}
	var readErr error
	var readCorrupt int
	wg.Go(func() {
		defer close(ordered)
		defer close(work)
		readErr = produce(&h, &readCorrupt, func(b *batch) {
			ordered <- b
			work <- b
		})
	})
	var last levels.Line
	for b := range ordered {
		<-b.done
		for i := range b.raw {
			l := b.lines[i]
			switch {
			case !b.ok[i]:
				corrupt++
			case l.At.Equal(last.At) && l.Trigger == last.Trigger:
			default:
				fn(l)
				last = l
			}
		}
	}
	wg.Wait()
	if readErr != nil || ctx.Err() != nil {
		readErr = ctxOr(ctx, readErr)
	}
	return corrupt + readCorrupt, readErr
}

// open opens files and reads the first line of each into a heap; lines
// dated after latest are damaged. An end of ctx closes the files, which
// ends a read that never finds a line's end (/dev/zero) or waits on a FIFO
// or a pipe; closeAll stops watching ctx and closes them.
func open(ctx context.Context, files []string, latest time.Time) (h merged, closeAll func(), corrupt int, err error) {
	all := make([]*os.File, 0, len(files))
	closeFiles := func() {
		for _, f := range all {
			f.Close()
		}
	}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			closeFiles()
			return nil, func() {}, corrupt, fmt.Errorf("timeline: %w", err)
		}
		all = append(all, f)
	}
	stop := context.AfterFunc(ctx, closeFiles)
	closeAll = func() { stop(); closeFiles() }
	for i, f := range all {
		s := &stream{f: f, br: bufio.NewReaderSize(f, 64<<10), latest: latest}
		if s.advance(&corrupt) {
			h = append(h, s)
		} else if s.err != nil {
			return nil, closeAll, corrupt, fmt.Errorf("timeline %s: %w", files[i], s.err)
		}
	}
	heap.Init(&h)
	return h, closeAll, corrupt, nil
}

// ctxOr is ctx's error once it ended (the files were closed under the
// reader), else err.
func ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// produce merges the streams of h into batches, in order of at, and
// hands each to send.
func produce(h *merged, corrupt *int, send func(*batch)) error {
	newBatch := func() *batch { return &batch{raw: make([][]byte, 0, batchSize), done: make(chan struct{})} }
	b, size := newBatch(), 0
	flush := func() {
		if len(b.raw) > 0 {
			b.lines, b.ok = make([]levels.Line, len(b.raw)), make([]bool, len(b.raw))
			send(b)
			b, size = newBatch(), 0
		}
	}
	for h.Len() > 0 {
		s := (*h)[0]
		b.raw = append(b.raw, s.next)
		size += len(s.next)
		s.next = nil // the batch holds it now
		if len(b.raw) == batchSize || size >= batchBytes {
			flush()
		}
		if s.advance(corrupt) {
			heap.Fix(h, 0)
			continue
		}
		if s.err != nil {
			flush()
			return fmt.Errorf("timeline %s: %w", s.f.Name(), s.err)
		}
		heap.Pop(h)
	}
	flush()
	return nil
}
