package replay

import (
	"bufio"
	"container/heap"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

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

// stream reads one file's valid lines in order.
type stream struct {
	f    *os.File
	br   *bufio.Reader
	next levels.Line
	err  error
}

// advance reads the stream's next valid line into next; it returns false
// at the end. Lines that do not parse, or lack v 1, at or a known trigger,
// are counted in *corrupt and skipped.
func (s *stream) advance(corrupt *int) bool {
	for {
		b, err := s.br.ReadBytes('\n')
		if len(b) > 0 {
			s.next = levels.Line{}
			if parse(b, &s.next) {
				return true
			}
			if len(strings.TrimSpace(string(b))) > 0 {
				*corrupt++
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.err = err
			}
			return false
		}
	}
}

// parse reads one timeline line and reports whether it is valid.
func parse(b []byte, l *levels.Line) bool {
	if json.Unmarshal(b, l) != nil || l.V != levels.LineVersion || l.At.IsZero() {
		return false
	}
	switch l.Trigger {
	case levels.TriggerStart, levels.TriggerTick, levels.TriggerEvent, levels.TriggerReload:
		return true
	}
	return false
}

// merged yields the lines of several files in order of at, each file
// read as a stream: the files are never held in memory.
type merged []*stream

func (m merged) Len() int           { return len(m) }
func (m merged) Less(i, j int) bool { return m[i].next.At.Before(m[j].next.At) }
func (m merged) Swap(i, j int)      { m[i], m[j] = m[j], m[i] }
func (m *merged) Push(x any)        { *m = append(*m, x.(*stream)) }
func (m *merged) Pop() any {
	old := *m
	s := old[len(old)-1]
	*m = old[:len(old)-1]
	return s
}

// each calls fn with every valid line of files, merged by at, dropping a
// line with the same at and trigger as the one before it (the same file
// given twice, or a directory and a file in it). It returns the number of
// corrupt lines skipped.
func each(files []string, fn func(levels.Line)) (corrupt int, err error) {
	var h merged
	var all []*stream
	defer func() {
		for _, s := range all {
			s.f.Close()
		}
	}()
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return corrupt, fmt.Errorf("timeline: %w", err)
		}
		s := &stream{f: f, br: bufio.NewReaderSize(f, 256<<10)}
		all = append(all, s)
		if s.advance(&corrupt) {
			h = append(h, s)
		} else if s.err != nil {
			return corrupt, fmt.Errorf("timeline %s: %w", name, s.err)
		}
	}
	heap.Init(&h)
	var last levels.Line
	for h.Len() > 0 {
		s := h[0]
		l := s.next
		if !l.At.Equal(last.At) || l.Trigger != last.Trigger {
			fn(l)
			last = l
		}
		if s.advance(&corrupt) {
			heap.Fix(&h, 0)
			continue
		}
		if s.err != nil {
			return corrupt, fmt.Errorf("timeline %s: %w", s.f.Name(), s.err)
		}
		heap.Pop(&h)
	}
	return corrupt, nil
}
