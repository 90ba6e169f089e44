package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The processes of one overload run: the service (`degbench
// overload-service`, its own process, as a real service is), pinned to a
// core with taskset in the CPU-bound variant and put in a cgroup of its own
// so that a cgroup CPU signal measures it alone.

// serviceProcess is a running `degbench overload-service`.
type serviceProcess struct {
	child
	url string
	// burnRounds is the spin rounds a request burns (CPU mode), 0 in
	// sleep mode.
	burnRounds int
}

// startService runs self overload-service with args, under `taskset -c
// cpus` when cpus is not empty, and returns once it serves. cgroupDir, if
// not empty, is the cgroup v2 directory the service is moved into before
// it serves any request (it starts calibrating, not serving).
func startService(self string, args []string, cpus, cgroupDir string) (*serviceProcess, error) {
	argv := append([]string{self, "overload-service"}, args...)
	if cpus != "" {
		argv = append([]string{"taskset", "-c", cpus}, argv...)
	}
	c, err := startChild(exec.Command(argv[0], argv[1:]...))
	if err != nil {
		return nil, fmt.Errorf("start the service: %w", err)
	}
	p := &serviceProcess{child: c}
	if cgroupDir != "" {
		if err := os.WriteFile(filepath.Join(cgroupDir, "cgroup.procs"), []byte(strconv.Itoa(p.cmd.Process.Pid)), 0o644); err != nil {
			p.stop()
			return nil, fmt.Errorf("move the service into %s: %w", cgroupDir, err)
		}
	}
	lines := make(chan string, 1)
	go func() {
		for {
			line, err := p.out.ReadString('\n')
			if v, ok := strings.CutPrefix(line, burnRoundsLine); ok && err == nil {
				p.burnRounds, _ = strconv.Atoi(strings.TrimSpace(v))
				continue
			}
			lines <- strings.TrimSpace(line)
			_, _ = io.Copy(io.Discard, p.out)
			return
		}
	}()
	select {
	case line := <-lines:
		u, ok := strings.CutPrefix(line, "overload service listening on ")
		if !ok {
			p.stop()
			return nil, fmt.Errorf("the service did not start (%q)", line)
		}
		p.url = u
		return p, nil
	case <-time.After(30 * time.Second):
		p.stop()
		return nil, errors.New("the service did not start within 30s")
	}
}

// cgroupV2Root is where the cgroup v2 hierarchy is mounted: /sys/fs/cgroup
// on a unified host, /sys/fs/cgroup/unified on a hybrid one; "" if neither.
func cgroupV2Root() string {
	for _, d := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		if _, err := os.Stat(filepath.Join(d, "cgroup.procs")); err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "cpu.stat")); err == nil {
			return d
		}
	}
	return ""
}

// newServiceCgroup creates an empty cgroup v2 directory for the service;
// the caller removes it (os.Remove) once the service has ended.
func newServiceCgroup() (string, error) {
	root := cgroupV2Root()
	if root == "" {
		return "", errors.New("no cgroup v2 hierarchy")
	}
	dir := filepath.Join(root, fmt.Sprintf("degbench-overload-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(dir, "cpu.stat")); err != nil {
		os.Remove(dir)
		return "", fmt.Errorf("%s has no cpu.stat: %w", dir, err)
	}
	return dir, nil
}

// pinSelf sets this process's CPU affinity, every thread of it, with
// `taskset -a -p -c cpus`, and checks that every thread has it (a thread
// the runtime started during the call is caught on the next pass).
// Threads started later inherit it, as do child processes: the daemon
// started after this runs on cpus.
func pinSelf(cpus string) error {
	pid := strconv.Itoa(os.Getpid())
	for range 5 {
		if out, err := exec.Command("taskset", "-a", "-p", "-c", cpus, pid).CombinedOutput(); err != nil {
			return fmt.Errorf("taskset -a -p -c %s %s: %v: %s", cpus, pid, err, out)
		}
		ok, err := threadsPinned(cpus)
		if err != nil || ok {
			return err
		}
	}
	return fmt.Errorf("some threads are not on CPUs %s after 5 tries", cpus)
}

// threadsPinned says whether every thread's Cpus_allowed_list is cpus.
func threadsPinned(cpus string) (bool, error) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return false, err
	}
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", t.Name(), "status"))
		if err != nil {
			continue // the thread ended
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok && strings.TrimSpace(v) != cpus {
				return false, nil
			}
		}
	}
	return true, nil
}
