package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The load generator of `degbench overload`: open-loop Poisson arrivals
// (it never waits for answers), each sent on an idle keep-alive connection
// of its own pool, or on a new one while fewer than the in-flight cap are
// open; an arrival that finds the cap reached is counted as failed. The
// requests are raw HTTP/1.1 written in one write and read with a minimal
// parser, so that the generator costs little beside the services it
// measures.

// arrivals is a Poisson process over a sequence of phases, each of
// constant rate per class: exponential gaps at the phase's total rate,
// each arrival's class drawn by the classes' shares of that rate. At a
// phase's end the process restarts from the boundary (it is memoryless).
type arrivals struct {
	rng    *rand.Rand
	phases []phaseSpec
	i      int     // current phase
	start  float64 // its start, seconds
	t      float64 // the last arrival, seconds
}

func newArrivals(seed uint64, phases []phaseSpec) *arrivals {
	return &arrivals{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), phases: phases}
}

// next returns the next arrival's time (seconds from the start) and class;
// ok is false after the last phase.
func (a *arrivals) next() (at float64, class int, ok bool) {
	for a.i < len(a.phases) {
		p := a.phases[a.i]
		end := a.start + p.Seconds
		if total := p.Offered(); total > 0 {
			t := a.t + a.rng.ExpFloat64()/total
			if t < end {
				a.t = t
				u := a.rng.Float64() * total
				for c, r := range p.Rates {
					if u < r || c == len(p.Rates)-1 {
						return t, c, true
					}
					u -= r
				}
			}
		}
		a.i++
		a.start, a.t = end, end
	}
	return 0, 0, false
}

// classBin counts one class's arrivals in one bin of time, by outcome.
// Outcomes are counted in the bin of the arrival, so a bin's counts always
// add up: Offered = OK + Shed + Failed once the run is over.
type classBin struct {
	Offered int64
	OK      int64 // answered 200
	Good    int64 // answered 200 within the SLO (sloFactor x the service time)
	Shed    int64 // answered 503 by the gate
	Failed  int64 // answered 500 (the queue wait ran out), anything else, or no answer
	CapHit  int64 // of Failed: found the in-flight cap reached, never sent
}

// recorder collects a run's outcomes: bins of binWidth per class, and the
// latency of every success after judgeAfter into its phase, for p50 and
// p99 per class and phase.
type recorder struct {
	binWidth float64 // seconds
	slo      time.Duration
	phases   []phaseSpec
	bins     [][]classBin

	mu  sync.Mutex
	lat [][][]float64 // [phase][class] ms
}

func newRecorder(phases []phaseSpec, binWidth float64, slo time.Duration) *recorder {
	var total float64
	for _, p := range phases {
		total += p.Seconds
	}
	r := &recorder{binWidth: binWidth, slo: slo, phases: phases}
	r.bins = make([][]classBin, int(math.Ceil(total/binWidth-1e-9)))
	for i := range r.bins {
		r.bins[i] = make([]classBin, len(overloadClasses))
	}
	r.lat = make([][][]float64, len(phases))
	for i := range r.lat {
		r.lat[i] = make([][]float64, len(overloadClasses))
	}
	return r
}

func (r *recorder) bin(at float64, class int) *classBin {
	i := min(max(int(at/r.binWidth), 0), len(r.bins)-1)
	return &r.bins[i][class]
}

// phaseAt returns the phase at t seconds and how far into it t is.
func phaseAt(phases []phaseSpec, t float64) (int, float64) {
	start := 0.0
	for i, p := range phases {
		if t < start+p.Seconds || i == len(phases)-1 {
			return i, t - start
		}
		start += p.Seconds
	}
	return 0, t
}

func (r *recorder) offered(at float64, class int) {
	atomic.AddInt64(&r.bin(at, class).Offered, 1)
}

// outcome records an arrival's answer: status 0 means none.
func (r *recorder) outcome(at float64, class, status int, latency time.Duration) {
	b := r.bin(at, class)
	switch status {
	case 200:
		atomic.AddInt64(&b.OK, 1)
		if latency <= r.slo {
			atomic.AddInt64(&b.Good, 1)
		}
		if p, into := phaseAt(r.phases, at); into >= judgeAfter.Seconds() {
			r.mu.Lock()
			r.lat[p][class] = append(r.lat[p][class], float64(latency)/1e6)
			r.mu.Unlock()
		}
	case 503:
		atomic.AddInt64(&b.Shed, 1)
	default:
		atomic.AddInt64(&b.Failed, 1)
	}
}

func (r *recorder) capHit(at float64, class int) {
	b := r.bin(at, class)
	atomic.AddInt64(&b.Failed, 1)
	atomic.AddInt64(&b.CapHit, 1)
}

// latencyQuantiles are p50 and p99 of successes per phase and class, ms.
func (r *recorder) latencyQuantiles() (p50, p99 [][]float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, byClass := range r.lat {
		var a, b []float64
		for _, v := range byClass {
			if len(v) == 0 {
				a, b = append(a, 0), append(b, 0)
				continue
			}
			a, b = append(a, quantile(v, .5)), append(b, quantile(v, .99))
		}
		p50, p99 = append(p50, a), append(p99, b)
	}
	return p50, p99
}

// loadGen sends one run's arrivals to one service.
type loadGen struct {
	host string    // host:port
	reqs [][]byte  // the rendered request of each class
	cap  int       // most connections (requests in flight)
	rec  *recorder // where outcomes go
	idle chan *genConn
	wg   sync.WaitGroup // requests in flight
}

func newLoadGen(host string, capacity int, rec *recorder) *loadGen {
	g := &loadGen{host: host, cap: capacity, rec: rec, idle: make(chan *genConn, capacity)}
	for _, c := range overloadClasses {
		g.reqs = append(g.reqs, fmt.Appendf(nil, "GET /work HTTP/1.1\r\nHost: %s\r\nX-Priority: %d\r\n%s: ", host, c.Priority, sentHeader))
	}
	return g
}

// genConn is one keep-alive connection and the goroutine that owns it.
type genConn struct {
	g    *loadGen
	jobs chan genJob
	conn net.Conn
	br   *bufio.Reader
	buf  []byte // the request being sent
}

type genJob struct {
	at    float64 // scheduled, seconds from the start
	class int
}

// run sends every arrival at its time (seconds after start) and returns
// once every request sent has been answered or has failed. The schedule
// is kept however the answers come: an arrival that is late is sent at
// once.
func (g *loadGen) run(a *arrivals, start time.Time) {
	var conns []*genConn
	for {
		at, class, ok := a.next()
		if !ok {
			break
		}
		if d := time.Until(start.Add(time.Duration(at * float64(time.Second)))); d > 0 {
			time.Sleep(d)
		}
		g.rec.offered(at, class)
		j := genJob{at: at, class: class}
		select {
		case c := <-g.idle:
			g.wg.Add(1)
			c.jobs <- j
		default:
			if len(conns) >= g.cap {
				g.rec.capHit(at, class)
				continue
			}
			c := &genConn{g: g, jobs: make(chan genJob, 1)}
			conns = append(conns, c)
			g.wg.Add(1)
			c.jobs <- j
			go c.loop()
		}
	}
	g.wg.Wait()
	for _, c := range conns {
		close(c.jobs)
	}
}

func (c *genConn) loop() {
	defer func() {
		if c.conn != nil {
			c.conn.Close()
		}
	}()
	for j := range c.jobs {
		t0 := time.Now()
		status := c.do(j.class)
		c.g.rec.outcome(j.at, j.class, status, time.Since(t0))
		c.g.wg.Done()
		c.g.idle <- c
	}
}

// do sends one request and returns the answer's status, 0 if none came.
// A reused connection the server closed meanwhile is redialled once.
func (c *genConn) do(class int) int {
	for attempt := 0; attempt < 2; attempt++ {
		reused := c.conn != nil
		if !reused {
			conn, err := net.DialTimeout("tcp", c.g.host, 5*time.Second)
			if err != nil {
				return 0
			}
			c.conn, c.br = conn, bufio.NewReaderSize(conn, 4096)
		}
		status, keep, err := c.exchange(c.g.reqs[class])
		if !keep || err != nil {
			c.conn.Close()
			c.conn = nil
		}
		if err == nil {
			return status
		}
		if !reused || !errors.Is(err, errNothingRead) {
			return 0
		}
	}
	return 0
}

// errNothingRead is a connection that ended before any byte of the
// answer: on a reused connection, the server closed it while idle.
var errNothingRead = errors.New("connection ended before the answer")

// exchange writes the request (head: up to the sent header's value) and
// reads the answer's status; keep says the connection may be reused. The
// answer must have a Content-Length (every server here sets it).
func (c *genConn) exchange(head []byte) (status int, keep bool, err error) {
	now := time.Now()
	_ = c.conn.SetDeadline(now.Add(30 * time.Second))
	c.buf = append(append(c.buf[:0], head...), strconv.FormatInt(now.UnixNano(), 10)...)
	c.buf = append(c.buf, "\r\n\r\n"...)
	if _, err := c.conn.Write(c.buf); err != nil {
		return 0, false, errNothingRead
	}
	return readAnswer(c.br)
}

// readAnswer reads one HTTP/1.1 answer: its status, whether the
// connection stays open, and skips its body.
func readAnswer(br *bufio.Reader) (status int, keep bool, err error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		if len(line) == 0 && (errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed)) {
			return 0, false, errNothingRead
		}
		return 0, false, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, false, fmt.Errorf("bad status line %q", line)
	}
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, false, fmt.Errorf("bad status line %q", line)
	}
	length, keep := -1, true
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return 0, false, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil || length < 0 {
				return 0, false, fmt.Errorf("bad Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Connection")) && bytes.EqualFold(value, []byte("close")):
			keep = false
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return 0, false, fmt.Errorf("unsupported Transfer-Encoding %q", value)
		}
	}
	if length < 0 {
		return 0, false, errors.New("answer without Content-Length")
	}
	if _, err := br.Discard(length); err != nil {
		return 0, false, err
	}
	return status, keep, nil
}

// sumBins adds bins [from, to) of one class (class < 0: all classes).
func sumBins(bins [][]classBin, from, to, class int) classBin {
	var s classBin
	for _, b := range bins[max(from, 0):min(to, len(bins))] {
		for c := range b {
			if class >= 0 && c != class {
				continue
			}
			s.Offered += b[c].Offered
			s.OK += b[c].OK
			s.Good += b[c].Good
			s.Shed += b[c].Shed
			s.Failed += b[c].Failed
			s.CapHit += b[c].CapHit
		}
	}
	return s
}

// cloneBins copies the bins once the run is over (no counter moves).
func cloneBins(bins [][]classBin) [][]classBin {
	out := make([][]classBin, len(bins))
	for i := range bins {
		out[i] = slices.Clone(bins[i])
	}
	return out
}
