package timeline

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/degraded/degraded/levels"
)

// WriteSeries writes the Series of [from, to] in points buckets to w as
// one JSON document. It reads the files as streams: the lines before from
// only by their "at" (and, for the table in force, the last start or
// reload line before it, looked for in earlier files when needed); the
// lines in range are parsed by one worker per CPU and summarized in order.
// Nothing is written before the summary is complete, so an error (ctx
// ended, a file that cannot be read) leaves w untouched.
func (r *Recorder) WriteSeries(ctx context.Context, w io.Writer, from, to time.Time, points int) error {
	s, err := ReadSeries(ctx, r.dir, from, to, points)
	if err != nil {
		return err
	}
	return json.NewEncoder(w).Encode(s)
}

// ReadSeries summarizes the timeline files in dir over [from, to] (see
// WriteSeries).
func ReadSeries(ctx context.Context, dir string, from, to time.Time, points int) (*Series, error) {
	b := NewBuilder(from, to, points)
	ds, err := days(dir)
	if errors.Is(err, os.ErrNotExist) {
		return b.Series(), nil
	}
	if err != nil {
		return nil, err
	}
	sc := &scan{ctx: ctx, b: b, from: from, to: to}
	for i, d := range ds {
		if !d.start.Add(24*time.Hour).After(from) || d.start.After(to) {
			continue
		}
		sc.earlier = sc.earlier[:0]
		for _, e := range ds[:i] {
			sc.earlier = append(sc.earlier, filepath.Join(dir, e.name))
		}
		if err := sc.file(filepath.Join(dir, d.name)); err != nil {
			sc.flush()
			return nil, err
		}
	}
	if !sc.started {
		// No line in range: the table in force at from still heads the
		// answer, for what comes live.
		sc.earlier = sc.earlier[:0]
		for _, e := range ds {
			if e.start.Before(from) {
				sc.earlier = append(sc.earlier, filepath.Join(dir, e.name))
			}
		}
		if err := sc.prime(); err != nil {
			return nil, err
		}
	}
	if err := sc.flush(); err != nil {
		return nil, err
	}
	return b.Series(), nil
}

// scan reads the files of a range into a builder.
type scan struct {
	ctx      context.Context
	b        *Builder
	from, to time.Time
	started  bool     // a line in range was handed on
	config   []byte   // the last start or reload line before from
	before   []byte   // the last line before from
	earlier  []string // the files before the one being read, oldest first
	batch    [][]byte
	pipe     *pipeline
}

// configKey marks the lines that carry a config (start and reload).
var configKey = []byte(`"config":{`)

// file reads one file's lines.
func (sc *scan) file(path string) error {
	return eachLine(sc.ctx, path, func(line []byte) error {
		at, ok := lineAt(line)
		switch {
		case !ok:
			return nil
		case at.Before(sc.from):
			if sc.started {
				return nil // a clock that went back: not a line of the range's past
			}
			if bytes.Contains(line, configKey) {
				sc.config = append(sc.config[:0], line...)
			}
			sc.before = append(sc.before[:0], line...)
			return nil
		case at.After(sc.to):
			return nil
		}
		if !sc.started {
			sc.started = true
			if err := sc.prime(); err != nil {
				return err
			}
		}
		return sc.add(bytes.Clone(line))
	})
}

// prime hands the builder the lines before the range it needs: the last
// config line (looked for in earlier files, newest first, when the file
// being read has none before from) and the last line.
func (sc *scan) prime() error {
	for i := len(sc.earlier) - 1; i >= 0 && sc.config == nil; i-- {
		err := eachLine(sc.ctx, sc.earlier[i], func(line []byte) error {
			if bytes.Contains(line, configKey) {
				sc.config = append(sc.config[:0], line...)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for _, raw := range [][]byte{sc.config, sc.before} {
		var l levels.Line
		if raw != nil && parseLine(raw, &l) {
			sc.b.Add(&l)
		}
	}
	return nil
}

// maxLine bounds a line eachLine gathers: a longer one is damaged (as
// degraded replay counts it), and skipped without being held.
const maxLine = 1 << 20

// eachLine calls fn with every complete line of the file (a last line
// without its newline is still being written). A file deleted meanwhile
// has no lines.
func eachLine(ctx context.Context, path string, fn func([]byte) error) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 256<<10)
	for n := 0; ; n++ {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer is gathered up to maxLine;
			// past it the line is damaged, passed over, never held whole.
			long := bytes.Clone(line)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				if long != nil && len(long)+len(line) <= maxLine {
					long = append(long, line...)
				} else {
					long = nil
				}
			}
			if line = long; line == nil && err == nil {
				continue
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(line); err != nil {
			return err
		}
	}
}

// lineAt reads the "at" of a line as the recorder writes it, without
// parsing the rest; the full parse checks the line.
func lineAt(b []byte) (time.Time, bool) {
	const key = `"at":"`
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return time.Time{}, false
	}
	rest := b[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return time.Time{}, false
	}
	at, err := time.Parse(time.RFC3339Nano, string(rest[:j]))
	return at, err == nil
}

// parseLine reads one line and reports whether it is a valid one.
func parseLine(b []byte, l *levels.Line) bool {
	return json.Unmarshal(b, l) == nil && l.V == levels.LineVersion && !l.At.IsZero()
}

// ---- parsing in parallel, summarizing in order ----

// batchLines is how many lines a parse worker takes at a time.
const batchLines = 256

// add queues a line in range for parsing.
func (sc *scan) add(line []byte) error {
	sc.batch = append(sc.batch, line)
	if len(sc.batch) < batchLines {
		return nil
	}
	return sc.send()
}

func (sc *scan) send() error {
	if len(sc.batch) == 0 {
		return nil
	}
	if sc.pipe == nil {
		sc.pipe = startPipeline(sc.b)
	}
	b := &parseBatch{raw: sc.batch, done: make(chan struct{})}
	sc.batch = nil
	return sc.pipe.send(sc.ctx, b)
}

// flush parses what is queued and waits for the summary to take it.
func (sc *scan) flush() error {
	err := sc.send()
	if sc.pipe != nil {
		sc.pipe.close()
	}
	if err != nil {
		return err
	}
	return sc.ctx.Err()
}

// parseBatch is a run of lines, parsed by a worker; done is closed once
// lines and ok are filled.
type parseBatch struct {
	raw   [][]byte
	lines []levels.Line
	ok    []bool
	done  chan struct{}
}

// pipeline hands batches to the workers and, in order, to the builder.
type pipeline struct {
	work    chan *parseBatch
	ordered chan *parseBatch
	wg      sync.WaitGroup
}

func startPipeline(b *Builder) *pipeline {
	n := max(runtime.GOMAXPROCS(0), 1)
	p := &pipeline{work: make(chan *parseBatch), ordered: make(chan *parseBatch, 2*n)}
	for range n {
		p.wg.Go(func() {
			d := &lineDecoder{names: map[string]levels.Signal{}}
			for pb := range p.work {
				pb.lines, pb.ok = make([]levels.Line, len(pb.raw)), make([]bool, len(pb.raw))
				for i, raw := range pb.raw {
					pb.ok[i] = d.decode(raw, &pb.lines[i])
				}
				close(pb.done)
			}
		})
	}
	p.wg.Go(func() {
		for pb := range p.ordered {
			<-pb.done
			for i := range pb.lines {
				if pb.ok[i] {
					b.Add(&pb.lines[i])
				}
			}
		}
	})
	return p
}

// send queues a batch; the order of sends is the order of the summary.
func (p *pipeline) send(ctx context.Context, pb *parseBatch) error {
	select {
	case p.ordered <- pb:
	case <-ctx.Done():
		return ctx.Err()
	}
	p.work <- pb // a worker is always free within the ordered queue's depth
	return nil
}

// close waits for every queued batch to be summarized.
func (p *pipeline) close() {
	close(p.work)
	close(p.ordered)
	p.wg.Wait()
}
