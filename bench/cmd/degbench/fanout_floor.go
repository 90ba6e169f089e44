package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The fan-out step's bare floor (`degbench floor`, its own process): no
// daemon, no hub, no state: it holds the subscribers' connections (each
// answered with an SSE response head) and, on POST /publish?id=N, writes
// the request's body as one SSE event (id N, event level) to every one of
// them in a loop, one write(2) per socket, then answers. That is the least
// any server must do to deliver one event to every subscriber, measured
// as the daemon is: from just before the request is sent to the last
// subscriber holding the event.

// floorServer is the floor's state: the subscribers' sockets.
type floorServer struct {
	mu    sync.Mutex
	conns []syscall.RawConn
	keep  []net.Conn // the hijacked connections, kept open
}

var sseHead = []byte("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\r\nretry: 2000\n\n")

func (f *floorServer) stream(w http.ResponseWriter, r *http.Request) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if _, err := conn.Write(sseHead); err != nil {
		conn.Close()
		return
	}
	raw, err := conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		conn.Close()
		return
	}
	f.mu.Lock()
	f.conns, f.keep = append(f.conns, raw), append(f.keep, conn)
	f.mu.Unlock()
}

// floorEvent frames payload as the SSE event with id.
func floorEvent(id uint64, payload []byte) []byte {
	ev := fmt.Appendf(nil, "id: %d\nevent: level\ndata: ", id)
	ev = append(ev, payload...)
	return append(ev, "\n\n"...)
}

func (f *floorServer) publish(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseUint(r.URL.Query().Get("id"), 10, 64)
	payload, rerr := io.ReadAll(r.Body)
	if err != nil || rerr != nil {
		http.Error(w, "publish needs ?id=N and a body", http.StatusBadRequest)
		return
	}
	ev := floorEvent(id, payload)
	f.mu.Lock()
	conns := f.conns
	f.mu.Unlock()
	written := 0
	for _, raw := range conns {
		if writeAll(raw, ev) == nil {
			written++
		}
	}
	fmt.Fprintf(w, "%d\n", written)
}

// writeAll writes b to the socket: one write(2) when the socket buffer
// has room (it always has here: the subscribers read as they go), waiting
// for room otherwise.
func writeAll(raw syscall.RawConn, b []byte) error {
	var werr error
	err := raw.Write(func(fd uintptr) bool {
		for len(b) > 0 {
			n, err := unix.Write(int(fd), b)
			if errors.Is(err, unix.EAGAIN) {
				return false // wait for room
			}
			if err != nil {
				werr = err
				return true
			}
			b = b[n:]
		}
		return true
	})
	return errors.Join(err, werr)
}

// floorCmd is `degbench floor`: it prints "floor listening on URL" and
// serves until its stdin closes.
func floorCmd(args []string) error {
	fs := flag.NewFlagSet("floor", flag.ExitOnError)
	_ = fs.Parse(args)
	f := &floorServer{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/level/stream", f.stream)
	mux.HandleFunc("POST /publish", f.publish)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		_ = srv.Close()
	}()
	fmt.Printf("floor listening on http://%s\n", ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// floorProcess is the parent's handle on a `degbench floor`.
type floorProcess struct {
	child
	url string
}

func startFloor() (*floorProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	c, err := startChild(exec.Command(self, "floor"))
	if err != nil {
		return nil, err
	}
	p := &floorProcess{child: c}
	line, err := p.out.ReadString('\n')
	u, ok := strings.CutPrefix(strings.TrimSpace(line), "floor listening on ")
	if err != nil || !ok {
		p.stop()
		return nil, fmt.Errorf("the floor did not start (%q, %v)", line, err)
	}
	p.url = u
	return p, nil
}

// publish asks the floor to write event id with payload to every
// subscriber; it returns how many it wrote to.
func (p *floorProcess) publish(c *http.Client, id uint64, payload []byte) (int, error) {
	req, err := http.NewRequest(http.MethodPost, p.url+"/publish?id="+strconv.FormatUint(id, 10), strings.NewReader(string(payload)))
	if err != nil {
		return 0, err
	}
	b, err := do(c, req)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}
