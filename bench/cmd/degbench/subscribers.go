package main

import (
	"bufio"
	"flag"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The fan-out subscribers run in child processes (`degbench subscribers`),
// one per system or per step, each holding at most its share of the
// connections (a process's file limit here is 20,000): raw non-blocking
// sockets read by one epoll loop per core (epoll.go), so that the measuring
// side stays cheap. The parent drives them over stdin/stdout:
//
//	parent -> child   "expect KEY\n"                  before making change KEY
//	child -> parent   "KEY FIRST MEDIAN LAST MISSED\n" once every subscriber
//	                   holds KEY (or after 30s): Unix-nanosecond arrival times
//
// For SSE the key is the event id (the state sequence); for Redis it is
// the number before the first newline of the message.

// round is one change being delivered: every subscriber that holds the
// event with key stores its arrival time and calls Done.
type round struct {
	key   uint64
	times []int64
	wg    sync.WaitGroup
}

func newRound(key uint64, n int) *round {
	r := &round{key: key, times: make([]int64, n)}
	r.wg.Add(n)
	return r
}

// arrived records subscriber i holding the event at time at.
func (r *round) arrived(i int, at int64) {
	r.times[i] = at
	r.wg.Done()
}

// summary waits up to timeout for every subscriber and returns the
// first, median and last arrival time and how many never arrived.
func (r *round) summary(timeout time.Duration) string {
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
	}
	var got []int64
	for i := range r.times {
		if at := atomic.LoadInt64(&r.times[i]); at != 0 {
			got = append(got, at)
		}
	}
	missed := len(r.times) - len(got)
	if len(got) == 0 {
		return fmt.Sprintf("%d 0 0 0 %d", r.key, missed)
	}
	slices.Sort(got)
	return fmt.Sprintf("%d %d %d %d %d", r.key, got[0], got[(len(got)-1)/2], got[len(got)-1], missed)
}

func subscribersCmd(args []string) error {
	fs := flag.NewFlagSet("subscribers", flag.ExitOnError)
	kind := fs.String("kind", "sse", "sse or redis")
	target := fs.String("target", "", "SSE stream URL, or Redis host:port")
	channel := fs.String("channel", "degraded-level", "Redis channel")
	n := fs.Int("n", 10000, "subscribers")
	_ = fs.Parse(args)

	var addr netip.AddrPort
	var hello []byte
	var err error
	switch *kind {
	case "sse":
		u, perr := url.Parse(*target)
		if perr != nil {
			return perr
		}
		addr, err = netip.ParseAddrPort(u.Host)
		hello = fmt.Appendf(nil, "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", u.RequestURI(), u.Host)
	case "redis":
		addr, err = netip.ParseAddrPort(*target)
		hello = fmt.Appendf(nil, "SUBSCRIBE %s\r\n", *channel)
	default:
		return fmt.Errorf("unknown kind %q", *kind)
	}
	if err != nil {
		return err
	}
	var cur atomic.Pointer[round]
	failed := make(chan error, 1)
	e, err := newEpollSubs(*kind,
		func(i int, key uint64, at int64) {
			if r := cur.Load(); r != nil && r.key == key {
				r.arrived(i, at)
			}
		},
		func(i int, err error) {
			select {
			case failed <- fmt.Errorf("subscriber %d: %w", i, err):
			default:
			}
		})
	if err != nil {
		return err
	}
	defer e.close()
	for i := range *n {
		s, err := e.dial(i, addr, hello)
		if err != nil {
			return fmt.Errorf("subscriber %d: %w", i, err)
		}
		e.subs = append(e.subs, s)
	}
	e.start()
	fmt.Println("ready")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		select {
		case err := <-failed:
			return err
		default:
		}
		keyText, ok := strings.CutPrefix(sc.Text(), "expect ")
		if !ok {
			return fmt.Errorf("unknown command %q", sc.Text())
		}
		key, err := strconv.ParseUint(keyText, 10, 64)
		if err != nil {
			return err
		}
		r := newRound(key, *n)
		cur.Store(r)
		fmt.Println("armed")
		fmt.Println(r.summary(10 * time.Second))
	}
	return sc.Err()
}

// subscriberProcess is the parent's handle on a `degbench subscribers`.
type subscriberProcess struct{ child }

func startSubscribers(kind, target string, n int) (*subscriberProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	c, err := startChild(exec.Command(self, "subscribers", "-kind", kind, "-target", target, "-n", strconv.Itoa(n)))
	if err != nil {
		return nil, err
	}
	p := &subscriberProcess{c}
	if line, err := p.line(); err != nil || line != "ready" {
		p.stop()
		return nil, fmt.Errorf("%s subscribers did not connect (%q, %v)", kind, line, err)
	}
	return p, nil
}

func (p *subscriberProcess) line() (string, error) {
	s, err := p.out.ReadString('\n')
	return strings.TrimSpace(s), err
}

// expect arms the subscribers for key; it returns once they are armed.
func (p *subscriberProcess) expect(key uint64) error {
	if _, err := fmt.Fprintf(p.in, "expect %d\n", key); err != nil {
		return err
	}
	if line, err := p.line(); err != nil || line != "armed" {
		return fmt.Errorf("subscribers not armed (%q, %v)", line, err)
	}
	return nil
}

// result reads the summary of the armed change, relative to t0.
func (p *subscriberProcess) result(key uint64, t0 int64) (changeStats, error) {
	line, err := p.line()
	if err != nil {
		return changeStats{}, err
	}
	var k uint64
	var first, med, last int64
	var missed int
	if _, err := fmt.Sscan(line, &k, &first, &med, &last, &missed); err != nil || k != key {
		return changeStats{}, fmt.Errorf("bad summary %q for key %d (%v)", line, key, err)
	}
	if missed > 0 {
		return changeStats{}, fmt.Errorf("%d subscribers never held change %d", missed, key)
	}
	ms := func(at int64) float64 { return float64(at-t0) / 1e6 }
	return changeStats{FirstMs: ms(first), MedianMs: ms(med), LastMs: ms(last)}, nil
}
