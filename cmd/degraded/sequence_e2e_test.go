package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/degraded/degraded/controller"
)

// TestSequenceNeverOutrunsTheDisk: with the disk full, overrides are
// refused (503, nothing applied) and automatic changes are published only
// up to the sequence ceiling the last successful save reserved; the state
// is then held. After SIGKILL, a restart on the still full disk serves
// the state its file saved and holds the rest (it exited 1, into the
// supervisor's restart loop); once the disk is freed, no sequence a reader
// saw names a different state: the daemon resumes above all of them. (As
// it stood, 1,100 override flips answered 500 but were published, and the
// restart republished 1001 as another state.)
func TestSequenceNeverOutrunsTheDisk(t *testing.T) {
	t.Parallel()
	disk := smallDisk(t, "1m")
	data := filepath.Join(disk, "data")
	cfg := writeConfig(t, t.TempDir(), `
listen: 127.0.0.1:0
data_dir: `+data+`
health_check_interval: 10ms
minimum_level_duration: 0s
error_rate_window: 20ms
error_rate_window_buckets: 2
min_throughput: 0
recovery_jitter: 0
blind_hold: 0s
admission: {mode: levels}
record: {enabled: false}
signals: {cpu: {source: off}, memory: {source: off}}
levels:
  - {name: L1, priority_threshold: 10, error_rate_percent: 1}
  - {name: L2, priority_threshold: 20, error_rate_percent: 2}
  - {name: L3, priority_threshold: 30, error_rate_percent: 3}
  - {name: L4, priority_threshold: 40, error_rate_percent: 4}
  - {name: L5, priority_threshold: 50, error_rate_percent: 5}
`)
	d := start(t, "serve", "--config", cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := map[uint64]string{} // sequence -> level, as a reader saw it
	events := d.events(t, ctx)
	record := func() {
		for {
			select {
			case e, ok := <-events:
				if !ok {
					return
				}
				level, seq, _ := strings.Cut(e, ":")
				var n uint64
				fmt.Sscan(seq, &n)
				seen[n] = level
			default:
				return
			}
		}
	}
	fill(t, disk)

	// An override cannot be saved: refused and not applied.
	before := d.level(t, "")
	if resp, body := d.request(t, "PUT", "/v1/override", "", `{"level":"L3","ttl":"1h","reason":"disk full"}`); resp.StatusCode != 503 {
		t.Fatalf("override with the disk full: %d %s, want 503", resp.StatusCode, body)
	}
	if after := d.level(t, ""); after.Override != nil || after.Sequence != before.Sequence {
		t.Fatalf("a refused override changed the state: %+v, was %+v", after, before)
	}

	// Automatic changes: failures take the level to L5 at once, and once
	// the 20ms window forgets them each 10ms tick steps down one level,
	// until the state is held at the ceiling the start reserved (a block
	// of controller.SequenceBlock). A round can also change nothing on a
	// loaded machine (its report waits for an evaluation armed while the
	// level was still up, and the 20ms window has forgotten it by then),
	// so only rounds near the ceiling count as held, and the rounds are
	// bounded by time, not by count (CI saw 20 quiet rounds at 948).
	var last uint64
	held := 0
	deadline := time.Now().Add(3 * time.Minute)
	for held < 20 {
		if time.Now().After(deadline) {
			t.Fatalf("the sequence kept moving (now %d, held for %d rounds) with every save failing: it must stop at the reserved ceiling, about %d", last, held, controller.SequenceBlock)
		}
		d.request(t, "POST", "/v1/outcomes", "", `{"success":0,"failure":100}`)
		time.Sleep(70 * time.Millisecond)
		record()
		switch s := d.level(t, "").Sequence; {
		case s != last:
			held, last = 0, s
		case s > controller.SequenceBlock-10: // a round steps the sequence by 6 at most
			held++
		}
	}
	if v := d.metric(t, "degraded_state_save_failed"); v != 1 {
		t.Errorf("degraded_state_save_failed %v, want 1 while saves fail", v)
	}
	if n := strings.Count(d.logs.String(), "cannot save state"); n > 3 {
		t.Errorf("the failing save was logged %d times: once, and again after a minute, is enough", n)
	}
	if !strings.Contains(d.logs.String(), "state not published") {
		t.Errorf("holding at the ceiling (sequence %d) was not logged:\n%s", last, d.logs)
	}
	record()
	var highest uint64
	for s := range seen {
		highest = max(highest, s)
	}
	if highest > 1001 {
		t.Errorf("a reader saw sequence %d: past the ceiling the start reserved (about 1000)", highest)
	}

	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-d.done

	// Restarted with the disk still full, it serves the state its file
	// saved, under that file's sequence, and publishes nothing past the
	// ceiling (it exited 1 instead, into the supervisor's restart loop).
	again := start(t, "serve", "--config", cfg)
	saved := again.level(t, "")
	if saved.Sequence > 1001 {
		t.Errorf("restarted on a full disk: sequence %d, past the ceiling its file reserved", saved.Sequence)
	}
	waitReady(t, again, "restarted on a full disk")
	if !strings.Contains(again.logs.String(), "cannot reserve sequence numbers at start") {
		t.Errorf("the held start was not logged:\n%s", again.logs)
	}
	os.Remove(filepath.Join(disk, "filler"))
	// The next health check saves, and publishes above every sequence a
	// reader saw, with the restart entry.
	var doc levelDoc
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if doc = again.level(t, ""); doc.Sequence > highest || time.Now().After(deadline) {
			break
		}
	}
	if doc.Sequence <= highest {
		t.Errorf("after SIGKILL and a restart, the disk freed: sequence %d, but a reader saw %d: a seen sequence could name another state", doc.Sequence, highest)
	}
	if !strings.Contains(again.history(t), `"source":"restart"`) {
		t.Errorf("no restart entry in the history after the unclean shutdown: %s", again.history(t))
	}
}

// fill takes every free byte of the file system at dir.
func fill(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	for {
		if _, err := f.Write(chunk[:1]); err != nil {
			return
		}
	}
}

// tmpfs mounts a tmpfs with options at a new directory, skipping the test
// without root, and unmounts it at the end.
func tmpfs(t *testing.T, options string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", options, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// remount remounts the tmpfs at dir with options (ro, rw).
func remount(t *testing.T, dir, options string) {
	t.Helper()
	if out, err := exec.Command("mount", "-o", "remount,"+options, dir).CombinedOutput(); err != nil {
		t.Fatalf("remount %s %s: %v %s", dir, options, err, out)
	}
}

// killedWithAnOverride starts the daemon on cfg, pins Major, SIGKILLs it,
// and returns the state it published last.
func killedWithAnOverride(t *testing.T, cfg string) levelDoc {
	t.Helper()
	d := start(t, "serve", "--config", cfg)
	if resp, body := d.request(t, "PUT", "/v1/override", "", `{"level":"Major","ttl":"1h","reason":"INC-9"}`); resp.StatusCode != 200 {
		t.Fatalf("override: %d %s", resp.StatusCode, body)
	}
	saved := d.level(t, "")
	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-d.done
	return saved
}

// heldThenFreed checks a daemon restarted on a disk that cannot save: it
// serves the saved state, ready; once free() gives the disk back, it
// publishes above the saved ceiling with the restart entry.
func heldThenFreed(t *testing.T, again *process, saved levelDoc, what string, free func()) {
	t.Helper()
	doc := again.level(t, "")
	if doc.Sequence != saved.Sequence || doc.Level != "Major" || doc.Override == nil {
		t.Fatalf("%s: %+v; want the saved state, %+v", what, doc, saved)
	}
	waitReady(t, again, what)
	// GET /v1/level and status say the state file cannot be saved, and
	// that what they show is held.
	if _, body := again.request(t, "GET", "/v1/level", "", ""); !strings.Contains(body, `"state_file":{"error":"`) || !strings.Contains(body, `"held":true}`) {
		t.Errorf("%s: GET /v1/level %s; want a state_file saying the state is held", what, body)
	}
	if code, out, errOut := runCLI(t, nil, "status", "--addr", again.url); code != 0 || !strings.Contains(out, "NOT SAVED since") || !strings.Contains(out, "HELD: nothing in this document can change") {
		t.Errorf("%s: status exit %d %s%s; want it to say the state file is not saved and the state held", what, code, out, errOut)
	}
	// A reload applies, and says the state is held.
	if resp, body := again.request(t, "POST", "/-/reload", "", ""); resp.StatusCode != 200 || !strings.Contains(body, `"held":"the state file cannot be saved`) {
		t.Errorf("%s: reload %d %s; want 200 saying the state is held", what, resp.StatusCode, body)
	}
	free()
	ceiling := saved.Sequence + controller.SequenceBlock
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if doc = again.level(t, ""); doc.Sequence > ceiling || time.Now().After(deadline) {
			break
		}
	}
	if doc.Sequence <= ceiling || doc.Level != "Major" {
		t.Errorf("%s, then the disk given back: %+v; want Major above the ceiling %d", what, doc, ceiling)
	}
	if !strings.Contains(again.history(t), `"source":"restart"`) {
		t.Errorf("%s: no restart entry after the unclean shutdown: %s", what, again.history(t))
	}
	if resp, body := again.request(t, "POST", "/-/reload", "", ""); resp.StatusCode != 200 || strings.Contains(body, "held") {
		t.Errorf("%s, then the disk given back: reload %d %s; want 200, nothing held", what, resp.StatusCode, body)
	}
	if _, body := again.request(t, "GET", "/v1/level", "", ""); !strings.Contains(body, `"state_file":null`) {
		t.Errorf("%s, then the disk given back: GET /v1/level %s; want state_file null", what, body)
	}
	if _, out, _ := runCLI(t, nil, "status", "--addr", again.url); strings.Contains(out, "State file") {
		t.Errorf("%s, then the disk given back: status still says %s", what, out)
	}
}

// TestRestartOnADiskRemountedReadOnly: the kernel remounts a disk
// read-only after I/O errors. Killed with an override in force, the
// daemon restarts on it held, as on a full disk: the lock taken on a
// descriptor opened for reading, the probe of data_dir let through since
// a state file is there. (It exited 1: "open .../lock: read-only file
// system".) A fresh data dir on a read-only disk is still refused: that
// is the setup's fault.
func TestRestartOnADiskRemountedReadOnly(t *testing.T) {
	t.Parallel()
	disk := tmpfs(t, "size=4m")
	config := func(dir string) string {
		return writeConfig(t, t.TempDir(), `
listen: 127.0.0.1:0
data_dir: `+dir+`
health_check_interval: 50ms
record: {enabled: true}
signals: {cpu: {source: off}, memory: {source: off}}
`)
	}
	cfg := config(filepath.Join(disk, "data"))
	saved := killedWithAnOverride(t, cfg)
	remount(t, disk, "ro")
	heldThenFreed(t, start(t, "serve", "--config", cfg), saved, "restarted on a read-only disk", func() { remount(t, disk, "rw") })

	empty := tmpfs(t, "size=1m")
	remount(t, empty, "ro")
	cmd := exec.Command(binary, "serve", "--config", config(filepath.Join(empty, "data")))
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "read-only file system") {
		t.Errorf("a fresh data_dir on a read-only disk: %v %s; want exit 1 naming it", err, out)
	}
}

// TestRestartWithNoInodeLeft: killed with an override in force, the
// daemon restarts on a disk with no inode left (a disk full of small
// files: the probe of data_dir and the state's temp file both fail with
// ENOSPC). It starts held: the saved override and level under the saved
// sequence, ready, and once files are removed it publishes above the
// ceiling with the restart entry. (It exited 1, "data_dir ... is not
// writable", at every restart.)
func TestRestartWithNoInodeLeft(t *testing.T) {
	t.Parallel()
	disk := tmpfs(t, "size=8m,nr_inodes=64")
	cfg := writeConfig(t, t.TempDir(), `
listen: 127.0.0.1:0
data_dir: `+filepath.Join(disk, "data")+`
health_check_interval: 50ms
record: {enabled: false}
signals: {cpu: {source: off}, memory: {source: off}}
`)
	saved := killedWithAnOverride(t, cfg)
	var files []string
	for i := 0; ; i++ {
		f, err := os.Create(filepath.Join(disk, fmt.Sprintf("f%d", i)))
		if err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
		f.Close()
		files = append(files, f.Name())
	}
	heldThenFreed(t, start(t, "serve", "--config", cfg), saved, "restarted with no inode left", func() {
		for _, f := range files {
			os.Remove(f)
		}
	})
}

// waitReady waits up to 5 s for d's /readyz to answer 200 (its first
// health check has run), failing the test as what otherwise.
func waitReady(t *testing.T, d *process, what string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, body := d.request(t, "GET", "/readyz", "", "")
		if resp.StatusCode == 200 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: /readyz %d %s, want 200 once the first health check ran", what, resp.StatusCode, body)
		}
	}
}
