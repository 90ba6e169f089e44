package replay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// padded is a valid tick line at second sec padded with an unknown field
// to exactly size bytes, its newline not counted.
func padded(t *testing.T, sec, size int) string {
	t.Helper()
	head := fmt.Sprintf(`{"v":1,"at":%q,"trigger":"tick","published":"Normal","recommended":"Normal","source":"auto","pad":"`,
		t0.Add(time.Duration(sec)*time.Second).Format(time.RFC3339Nano))
	const tail = `"}`
	if size < len(head)+len(tail) {
		t.Fatalf("cannot pad a line to %d bytes", size)
	}
	return head + strings.Repeat("x", size-len(head)-len(tail)) + tail
}

// TestLongLinesAreDamaged: a line over MaxLineBytes is skipped and counted
// as corrupt, wherever it is (a last line without its newline included);
// a line of exactly MaxLineBytes is read.
func TestLongLinesAreDamaged(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "long.jsonl")
	body := strings.Join([]string{
		toJSON(t, tick(0, 0, 0, "Normal")),
		strings.Repeat("y", 3*MaxLineBytes),
		padded(t, 1, MaxLineBytes),
		padded(t, 2, MaxLineBytes+1),
		toJSON(t, tick(3, 0, 0, "Normal")),
		strings.Repeat("z", 2*MaxLineBytes), // torn and long: no newline
	}, "\n")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := Run(Options{Config: recorded(t), Files: []string{path}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Lines != 3 || res.Corrupt != 3 {
		t.Errorf("lines %d, corrupt %d; want 3 lines (one of exactly %d bytes) and 3 corrupt (over the cap)", res.Lines, res.Corrupt, MaxLineBytes)
	}
}

// TestReadLineNeverHoldsALongLine: reading a line over the cap keeps no
// more than the reader's buffer, however long the line.
func TestReadLineNeverHoldsALongLine(t *testing.T) {
	br := bufio.NewReaderSize(&repeatReader{b: 'x', n: 64 * MaxLineBytes}, 64<<10)
	line, long, err := readLine(br)
	if !long || line != nil || err == nil {
		t.Errorf("readLine of a 64 MiB line = %d bytes, long %v, err %v; want nil, long, io.EOF", len(line), long, err)
	}
}

// repeatReader reads n copies of b.
type repeatReader struct {
	b byte
	n int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, os.ErrClosed
	}
	n := min(len(p), r.n)
	copy(p, bytes.Repeat([]byte{r.b}, n))
	r.n -= n
	return n, nil
}

// TestLinesFromTheFutureAreDamaged: a line dated more than a day after
// now (a clock set to 2099) is corrupt, and does not stretch the report.
func TestLinesFromTheFutureAreDamaged(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "future.jsonl")
	future := tick(0, 0, 0, "Major")
	future.At = time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
	soon := tick(0, 0, 0, "Normal")
	soon.At = time.Now().Add(time.Hour) // within a day: a clock a little ahead
	writeLines(t, path, tick(0, 0, 0, "Normal"), tick(2, 0, 0, "Normal"), future, soon)
	res, err := Run(Options{Config: recorded(t), Files: []string{path}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Lines != 3 || res.Corrupt != 1 {
		t.Errorf("lines %d, corrupt %d; want the 2099 line corrupt and the other 3 read", res.Lines, res.Corrupt)
	}
	if res.Last.Year() == 2099 {
		t.Errorf("the report ends in %v: a line from the future was used", res.Last)
	}
}

// TestBatchesAreBoundedInBytes: lines of nearly MaxLineBytes make batches
// of about batchBytes, not of batchSize lines (512 MiB each before).
func TestBatchesAreBoundedInBytes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "big.jsonl")
	var b strings.Builder
	for i := range 40 {
		b.WriteString(padded(t, i, 600<<10) + "\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	h, closeAll, _, err := open(context.Background(), []string{path}, time.Now().Add(futureSlack))
	defer closeAll()
	if err != nil {
		t.Fatal(err)
	}
	var corrupt, lines, largest int
	if err := produce(&h, &corrupt, func(b *batch) {
		size := 0
		for _, raw := range b.raw {
			size += len(raw)
		}
		largest = max(largest, size)
		lines += len(b.raw)
	}); err != nil {
		t.Fatal(err)
	}
	if lines != 40 || largest > batchBytes+MaxLineBytes {
		t.Errorf("%d lines in batches of at most %d bytes; want 40 lines, batches of at most %d", lines, largest, batchBytes+MaxLineBytes)
	}
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
