package main

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// daemon is a real degraded binary started for one measurement, on a free
// loopback port, with its state in a temporary directory.
type daemon struct {
	cmd    *exec.Cmd
	url    string
	dir    string
	binary string
	cfg    string // the config file
}

var listening = regexp.MustCompile(`degraded listening on (\S+)`)

// startDaemon writes config (YAML; listen and data_dir may be left to the
// defaults chosen here) and runs `binary serve --config`.
func startDaemon(binary, config string) (*daemon, error) {
	dir, err := os.MkdirTemp("", "degbench-daemon")
	if err != nil {
		return nil, err
	}
	if !strings.Contains(config, "listen:") {
		config += "\nlisten: 127.0.0.1:0\n"
	}
	if !strings.Contains(config, "data_dir:") {
		config += fmt.Sprintf("\ndata_dir: %q\n", filepath.Join(dir, "data"))
	}
	cfg := filepath.Join(dir, "degraded.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		return nil, err
	}
	d := &daemon{dir: dir, binary: binary, cfg: cfg}
	if err := d.launch(); err != nil {
		return nil, err
	}
	return d, nil
}

// launch starts the binary on the config file and waits until it is
// ready; on failure the process is stopped.
func (d *daemon) launch() error {
	d.cmd = exec.Command(d.binary, "serve", "--config", d.cfg)
	d.cmd.Stderr = os.Stderr
	out, err := d.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := d.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", d.binary, err)
	}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				urls <- m[1]
			}
		}
	}()
	select {
	case d.url = <-urls:
	case <-time.After(20 * time.Second):
		d.stop()
		return errors.New("daemon did not print its address within 20s")
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if resp, err := http.Get(d.url + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			d.stop()
			return errors.New("daemon not ready within 10s")
		}
	}
}

// crash SIGKILLs the daemon and starts it again on the same address,
// config and data_dir, as a supervisor restarts a crashed daemon. It
// returns when the new process is ready.
func (d *daemon) crash() error {
	if err := d.cmd.Process.Kill(); err != nil {
		return err
	}
	_ = d.cmd.Wait()
	b, err := os.ReadFile(d.cfg)
	if err != nil {
		return err
	}
	addr := strings.TrimPrefix(d.url, "http://")
	fixed := strings.Replace(string(b), "listen: 127.0.0.1:0", "listen: "+addr, 1)
	if err := os.WriteFile(d.cfg, []byte(fixed), 0o600); err != nil {
		return err
	}
	return d.launch()
}

// stop ends the daemon with SIGTERM (SIGKILL after 10s) and removes its
// files, or moves them into $DEGBENCH_KEEP when it is set.
func (d *daemon) stop() {
	_ = d.cmd.Process.Signal(os.Interrupt)
	exited := make(chan struct{})
	go func() { _ = d.cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = d.cmd.Process.Kill()
		<-exited
	}
	if keep := os.Getenv("DEGBENCH_KEEP"); keep != "" {
		// For looking at a run afterwards: the daemon's state and timeline.
		dst := filepath.Join(keep, filepath.Base(d.dir))
		if err := os.Rename(d.dir, dst); err == nil {
			fmt.Fprintf(os.Stderr, "degbench: kept the daemon's files in %s\n", dst)
			return
		}
	}
	os.RemoveAll(d.dir)
}

func (d *daemon) pid() int { return d.cmd.Process.Pid }

// metric reads one unlabelled sample from /metrics.
func (d *daemon) metric(name string) (float64, error) {
	resp, err := http.Get(d.url + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("no metric %s", name)
}

// memStats are the daemon's Go memory figures, for the fan-out table.
type memStats struct {
	RSS, HeapInuse, StackInuse, Goroutines float64
}

func (d *daemon) memStats() (memStats, error) {
	var m memStats
	var err error
	if m.RSS, err = procRSS(d.pid()); err != nil {
		return m, err
	}
	for name, p := range map[string]*float64{
		"go_memstats_heap_inuse_bytes":  &m.HeapInuse,
		"go_memstats_stack_inuse_bytes": &m.StackInuse,
		"go_goroutines":                 &m.Goroutines,
	} {
		if *p, err = d.metric(name); err != nil {
			return m, err
		}
	}
	return m, nil
}

// settledMemStats takes n memStats a quarter second apart and returns
// the one with the median RSS: one reading can catch the heap just before
// a collection, or pages not yet returned after one, and differences of
// such readings are what the scale step's per-subscriber costs are.
func (d *daemon) settledMemStats(n int) (memStats, error) {
	var ms []memStats
	for i := range n {
		if i > 0 {
			time.Sleep(250 * time.Millisecond)
		}
		m, err := d.memStats()
		if err != nil {
			return m, err
		}
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b memStats) int { return cmp.Compare(a.RSS, b.RSS) })
	return ms[len(ms)/2], nil
}

// put sends a JSON body with PUT and returns the answer's body.
func (d *daemon) put(c *http.Client, path, body string) ([]byte, error) {
	req, err := http.NewRequest(http.MethodPut, d.url+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return do(c, req)
}

func (d *daemon) post(c *http.Client, path, body string) ([]byte, error) {
	req, err := http.NewRequest(http.MethodPost, d.url+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return do(c, req)
}

func do(c *http.Client, req *http.Request) ([]byte, error) {
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s %s: %s: %s", req.Method, req.URL.Path, resp.Status, bytes.TrimSpace(b))
	}
	return b, nil
}

// procRSS reads VmRSS of pid in bytes.
func procRSS(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			kb, err := strconv.ParseFloat(f[0], 64)
			return kb * 1024, err
		}
	}
	return 0, errors.New("no VmRSS")
}

// statFields splits a /proc/PID/stat or task/TID/stat line after the
// command name, which is in parentheses and may hold spaces and ')':
// field 3 (the state) is f[0].
func statFields(b []byte) []string {
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat;
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// procCPU returns the user+system CPU time pid has used.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	f := statFields(b)
	if len(f) < 13 {
		return 0, errors.New("short /proc/PID/stat")
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}
