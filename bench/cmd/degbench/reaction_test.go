package main

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestParseLevelEvent(t *testing.T) {
	ev := sseEvent{ID: 7, Event: "level", At: 99,
		Data: []byte(`{"level":"Major","index":3,"since":"2026-11-30T08:15:06.000000123Z","sequence":7}`)}
	got, ok := parseLevelEvent(ev)
	since := time.Date(2026, 11, 30, 8, 15, 6, 123, time.UTC).UnixNano()
	if want := (levelEvent{id: 7, index: 3, name: "Major", since: since, at: 99}); !ok || got != want {
		t.Errorf("parseLevelEvent = %+v, %v; want %+v with the since to the nanosecond", got, ok, want)
	}
	for _, ev := range []sseEvent{
		{ID: 8, Event: "sample", Data: []byte(`{"cpu_percent":12}`)},
		{ID: 9, Event: "level", Data: []byte(`not json`)},
	} {
		if _, ok := parseLevelEvent(ev); ok {
			t.Errorf("parseLevelEvent(%s %s) read a level, want none", ev.Event, ev.Data)
		}
	}
}

func TestAwaitState(t *testing.T) {
	events := make(chan levelEvent, 4)
	events <- levelEvent{id: 4, index: 5} // the previous trial's escalation: skipped
	events <- levelEvent{id: 5}           // the pin
	events <- levelEvent{id: 6}           // the DELETE
	got, err := awaitState(events, 6, time.Second)
	if err != nil || got.id != 6 {
		t.Errorf("awaitState(6) = %+v, %v; want the DELETE's event, sequence 6", got, err)
	}

	events <- levelEvent{id: 8, index: 2} // a health check escalated after the reset
	if got, err := awaitState(events, 7, time.Second); err != nil || got.index != 2 {
		t.Errorf("awaitState(7) = %+v, %v; want the later escalation, for the caller to discard", got, err)
	}

	close(events)
	if _, err := awaitState(events, 9, time.Second); err == nil || err.Error() != "the measuring subscriber's stream ended" {
		t.Errorf("closed stream: %v, want an error saying the stream ended", err)
	}

	synctest.Test(t, func(t *testing.T) {
		events := make(chan levelEvent, 1)
		events <- levelEvent{id: 3}
		_, err := awaitState(events, 4, 2*time.Second)
		if err == nil || err.Error() != "no event: level with sequence 4 or later within 2s of the reset" {
			t.Errorf("timeout: %v, want an error naming the sequence and the wait", err)
		}
	})
}

func TestAwaitEscalation(t *testing.T) {
	events := make(chan levelEvent, 4)
	events <- levelEvent{id: 6, index: 4} // up to the reset: skipped
	events <- levelEvent{id: 7, index: 0} // Normal: skipped
	events <- levelEvent{id: 8, index: 1, name: "Minor"}
	got, err := awaitEscalation(events, 6, time.Second)
	if err != nil || got.id != 8 || got.name != "Minor" {
		t.Errorf("awaitEscalation(6) = %+v, %v; want Minor, sequence 8", got, err)
	}

	synctest.Test(t, func(t *testing.T) {
		_, err := awaitEscalation(make(chan levelEvent), 6, 2*time.Second)
		if err == nil || err.Error() != "no event: level above Normal within 2s of the report" {
			t.Errorf("timeout: %v, want an error saying no level above Normal came", err)
		}
	})
}

func TestStateSequence(t *testing.T) {
	if got, err := stateSequence([]byte(`{"level":"Normal","sequence":17}`)); err != nil || got != 17 {
		t.Errorf("stateSequence = %d, %v; want 17", got, err)
	}
	if _, err := stateSequence([]byte(`{"error":"shed"}`)); err == nil || !strings.Contains(err.Error(), `no sequence in the state document "{\"error\":\"shed\"}"`) {
		t.Errorf("no sequence: %v, want an error quoting the document", err)
	}
}

// TestRawConn checks that each request goes out whole, framed as HTTP/1.1
// with a JSON body, and that a status other than the one wanted is an
// error naming the request and the daemon's answer.
func TestRawConn(t *testing.T) {
	client, server := net.Pipe()
	c := &rawConn{conn: client, br: bufio.NewReader(client), host: "127.0.0.1:8470"}
	defer c.Close()
	got := make(chan string, 1)
	go func() {
		defer server.Close()
		br := bufio.NewReader(server)
		buf := make([]byte, 4096)
		n, _ := br.Read(buf)
		got <- string(buf[:n])
		_, _ = server.Write([]byte("HTTP/1.1 202 Accepted\r\nContent-Length: 16\r\n\r\n{\"accepted\":100}"))
		n, _ = br.Read(buf)
		got <- string(buf[:n])
		_, _ = server.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 25\r\n\r\n{\"error\":\"unknown level\"}"))
	}()

	b, err := c.do("POST", "/v1/outcomes", failureBody, 202)
	if err != nil || string(b) != `{"accepted":100}` {
		t.Errorf("POST: %q, %v; want the 202's body", b, err)
	}
	want := "POST /v1/outcomes HTTP/1.1\r\nHost: 127.0.0.1:8470\r\nContent-Type: application/json\r\nContent-Length: 27\r\n\r\n" + failureBody
	if req := <-got; req != want {
		t.Errorf("request on the wire:\n%q\nwant\n%q", req, want)
	}
	_, err = c.do("PUT", "/v1/override", resetBody, 200)
	if err == nil || err.Error() != `PUT /v1/override: 400 Bad Request, want 200: {"error":"unknown level"}` {
		t.Errorf("400: %v, want an error naming the request, the status and the body", err)
	}
	<-got
}

func TestReportReaction(t *testing.T) {
	one := reactionSeries{Trials: []float64{0.4, 0.5, 0.6, 1.2}, Levels: []string{"Minor", "Major", "Major", "Major"}}
	many := reactionSeries{Others: 10000, Trials: []float64{1, 2, 3, 9}, Arrivals: []float64{0.5, 1, 2, 4.5}, Levels: []string{"Severe", "Severe", "Severe", "Severe"},
		OthersMs: []changeStats{{FirstMs: 1, LastMs: 20}, {FirstMs: 2, LastMs: 30}, {FirstMs: 3, LastMs: 40}, {FirstMs: 4, LastMs: 50}}, Discards: 1, Busy: 2}
	r := report{reaction: &reactionResult{WarmS: 10.1, Series: []reactionSeries{one, many}}}
	var b strings.Builder
	r.writeReaction(&b)
	for _, row := range []string{
		"| 1 subscriber | read | 4 | 0 | 0 | 0.50 ms | 1.20 ms | 1.20 ms | 1.20 ms | Major ×3, Minor ×1 | – | – | – |",
		"| 10001 subscribers (the measuring one + 10000) | arrived | 4 | 1 | 2 | 1.00 ms | 4.50 ms | 4.50 ms | 4.50 ms | Severe ×4 | 2.00 ms | 30.00 ms | 50.00 ms |",
		"| 10001 subscribers (the measuring one + 10000) | read | 4 | 1 | 2 | 2.00 ms | 9.00 ms | 9.00 ms | 9.00 ms | Severe ×4 | 2.00 ms | 30.00 ms | 50.00 ms |",
	} {
		if !strings.Contains(b.String(), row) {
			t.Errorf("section:\n%s\nwant the row\n%s", b.String(), row)
		}
	}
	if len(r.verdicts) != 2 {
		t.Fatalf("verdicts %+v, want one per series", r.verdicts)
	}
	// Without receive timestamps the read times are judged.
	if v := r.verdicts[0]; v.target != "reaction p99 ≤ 5 ms at the default 30s tick, 1 subscriber" || v.met != "**met**" ||
		v.measured != "read: p99 1.20 ms over 4 trials (p50 0.50 ms)" {
		t.Errorf("1 subscriber: %+v, want the 5 ms target met at p99 1.20 ms", v)
	}
	// With them, the arrival at the socket is, and the read is shown.
	if v := r.verdicts[1]; v.met != "**met**" || !strings.Contains(v.target, "10001 subscribers") ||
		v.measured != "arrived: p99 4.50 ms over 4 trials (p50 1.00 ms); read: p99 9.00 ms (p50 2.00 ms)" {
		t.Errorf("10001 subscribers: %+v, want met on arrival at p99 4.5 ms, with the read's 9 ms shown", v)
	}
	many.Arrivals[3] = 6
	r = report{reaction: &reactionResult{Series: []reactionSeries{many}}}
	r.writeReaction(&strings.Builder{})
	if v := r.verdicts[0]; v.met != "**not met**: see finding F5" {
		t.Errorf("arrived p99 6 ms: %+v, want not met, pointing to F5", v)
	}
}

// TestAwaitQuiet: a process is quiet when none of its threads is running
// or runnable in two reads; a busy one is waited for at most the bound.
func TestAwaitQuiet(t *testing.T) {
	proc := t.TempDir()
	state := func(tid, comm, st string) {
		dir := filepath.Join(proc, "task", tid)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		line := tid + " (" + comm + ") " + st + " 1 1 1 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 7 0\n"
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	state("10", "degraded", "S")
	state("11", "a (R) name", "S") // a ')' and an R in the command name are not the state
	state("12", "degraded", "R")
	if n, err := runnable(proc); n != 1 || err != nil {
		t.Fatalf("runnable = %d, %v; want the one thread in state R", n, err)
	}
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if quiet, err := awaitQuiet(proc, 10*time.Millisecond); quiet || err != nil {
			t.Fatalf("a busy thread: awaitQuiet = %v, %v; want false once the bound passed", quiet, err)
		}
		if waited := time.Since(start); waited < 10*time.Millisecond || waited > 11*time.Millisecond {
			t.Errorf("waited %v for a busy process, want the 10ms bound", waited)
		}
		state("12", "degraded", "S")
		if quiet, err := awaitQuiet(proc, 10*time.Millisecond); !quiet || err != nil {
			t.Fatalf("every thread sleeping: awaitQuiet = %v, %v; want true", quiet, err)
		}
	})
	if _, err := awaitQuiet(filepath.Join(proc, "gone"), time.Second); err == nil {
		t.Error("awaitQuiet of a process that is gone: no error")
	}
}
