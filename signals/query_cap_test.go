package signals

import (
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// hugeAnswer serves a valid instant vector of size bytes, streamed, so
// that the server holds nothing; gzipped, when asked, so that the wire
// carries a small fraction of it. It counts what it managed to write.
type hugeAnswer struct {
	size    int64
	gzipped bool
	written atomic.Int64
}

func (h *hugeAnswer) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	var out io.Writer = w
	if h.gzipped {
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		defer zw.Close()
		out = zw
	}
	const head, tail = `{"status":"success","data":{"resultType":"vector","result":[`, `]}}`
	sample := []byte(`{"metric":{"__name__":"queue_depth","instance":"i"},"value":[1700000000,"7"]},`)
	samples := []byte(strings.Repeat(string(sample), 64<<10/len(sample)))
	n, err := io.WriteString(out, head)
	for written := int64(n); err == nil && written+int64(len(samples)) < h.size-int64(len(tail)+len(sample)); {
		n, err = out.Write(samples)
		written += int64(n)
		h.written.Store(written)
	}
	if err != nil {
		return // the client went away
	}
	_, _ = io.WriteString(out, string(sample[:len(sample)-1])+tail)
}

// TestQueryAnswerSizeIsCapped: an answer over MaxAnswerBytes (a valid
// vector, 400 MB plain or gzipped) fails the query with an error naming
// the cap; it is read no further, and the memory allocated meanwhile
// stays a few MiB however large the answer (before the cap, the whole
// answer was read into one buffer: 400 MB took the daemon's RSS from
// 22 MB to 1.74 GB). An answer under the cap is read as before.
func TestQueryAnswerSizeIsCapped(t *testing.T) {
	tests := []struct {
		name    string
		size    int64
		gzipped bool
		outcome string
	}{
		{"under the cap", MaxAnswerBytes - 1024, false, "available"},
		{"400 MB", 400 << 20, false, "failed"},
		{"400 MB gzipped: the cap counts after decompression", 400 << 20, true, "failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &hugeAnswer{size: tt.size, gzipped: tt.gzipped}
			srv := httptest.NewServer(h)
			defer srv.Close()
			q := newTestQuery(t, QueryOptions{URL: srv.URL, Query: "queue_depth", Timeout: time.Minute})

			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			v, err := q.Sample(t.Context(), time.Time{})
			runtime.ReadMemStats(&after)

			if o := outcome(err); o != tt.outcome {
				t.Fatalf("Sample = %v, %v: want %s", v, err, tt.outcome)
			}
			if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 32<<20 {
				t.Errorf("a %d MiB answer allocated %d MiB, want at most 32 MiB", tt.size>>20, allocated>>20)
			}
			if tt.outcome == "available" {
				if v != 7 {
					t.Errorf("Sample = %v, want 7", v)
				}
				return
			}
			if !errors.Is(err, ErrAnswerTooLarge) || !strings.Contains(err.Error(), "1 MiB") {
				t.Errorf("Sample error %q, want ErrAnswerTooLarge naming the 1 MiB cap", err)
			}
			if w := h.written.Load(); !tt.gzipped && w > 64<<20 {
				t.Errorf("the server wrote %d MiB before the client gave up, want it cut off near the cap", w>>20)
			}
		})
	}
}
