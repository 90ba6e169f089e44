package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// replayRSSLimit bounds the peak RSS of `degraded replay` (the race
// detector's build) over inputs of any size: before the caps, a 1 GiB line
// took 2.1 GB and 1,024 lines of 1 MiB 3.3-3.8 GB.
const replayRSSLimit = 160 << 20

// timelineLine is a valid tick line at second sec of 2026-12-01 10:00,
// padded to size bytes (0: unpadded).
func timelineLine(sec, size int) string {
	head := fmt.Sprintf(`{"v":1,"at":"2026-12-01T10:%02d:%02dZ","trigger":"tick","published":"Normal","recommended":"Normal","source":"auto"`, sec/60, sec%60)
	if size == 0 {
		return head + "}"
	}
	head += `,"pad":"`
	return head + strings.Repeat("x", size-len(head)-2) + `"}`
}

// fifo makes a named pipe in dir and feeds it from write in the
// background; the returned channel gets write's error once it is done.
func fifo(t *testing.T, dir string, write func(io.Writer) error) (string, <-chan error) {
	t.Helper()
	path := filepath.Join(dir, fmt.Sprintf("fifo-%d.jsonl", time.Now().UnixNano()))
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0) // blocks until the replay opens it
		if err != nil {
			done <- err
			return
		}
		err = write(f)
		done <- errors.Join(err, f.Close())
	}()
	return path, done
}

// runReplayProcess runs `degraded replay --format json` on files and
// returns its exit code, output and peak RSS; signal, if set, is sent
// after delay.
func runReplayProcess(t *testing.T, sig os.Signal, delay time.Duration, files ...string) (code int, out replayOutput, stderr string, rss int64, took time.Duration) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"replay", "--format", "json"}, files...)...)
	var stdout, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &errb
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if sig != nil {
		timer := time.AfterFunc(delay, func() { _ = cmd.Process.Signal(sig) })
		defer timer.Stop()
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("replay did not end within 2m\n%s", errb.String())
	}
	took = time.Since(start)
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code == 0 {
		if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
			t.Fatalf("replay output %q: %v", stdout.String(), err)
		}
	}
	rss = cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10 // KiB on Linux
	return code, out, errb.String(), rss, took - delay
}

// TestReplayInputIsBounded: whatever `degraded replay` reads (a 1 GiB
// line, 128 lines of 1 MiB, /dev/zero, a FIFO whose writer never ends),
// its memory stays flat, long lines are counted as corrupt, and SIGINT or
// SIGTERM end it at once (exit 1).
func TestReplayInputIsBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()

	t.Run("a 1 GiB line", func(t *testing.T) {
		path, wrote := fifo(t, dir, func(w io.Writer) error {
			fmt.Fprintln(w, timelineLine(0, 0))
			chunk := bytes.Repeat([]byte("y"), 1<<20)
			for range 1 << 10 {
				if _, err := w.Write(chunk); err != nil {
					return err
				}
			}
			fmt.Fprintln(w)
			_, err := fmt.Fprintln(w, timelineLine(1, 0))
			return err
		})
		code, out, stderr, rss, _ := runReplayProcess(t, nil, 0, path)
		if err := <-wrote; err != nil {
			t.Fatal(err)
		}
		if code != 0 || out.Corrupt != 1 || rss > replayRSSLimit {
			t.Errorf("exit %d, %d corrupt, peak RSS %d MiB; want exit 0, the long line corrupt, at most %d MiB\n%s", code, out.Corrupt, rss>>20, replayRSSLimit>>20, stderr)
		}
		t.Logf("peak RSS %d MiB", rss>>20)
	})

	t.Run("128 lines of 1 MiB", func(t *testing.T) {
		// 128, not the finding's 1,024: the race detector's build parses
		// 1 GiB of JSON in a minute. 128 MiB in one batch (batches were
		// 512 lines) is still far over the limit.
		path, wrote := fifo(t, dir, func(w io.Writer) error {
			for i := range 128 {
				if _, err := io.WriteString(w, timelineLine(i, 1<<20)+"\n"); err != nil {
					return err
				}
			}
			return nil
		})
		code, out, stderr, rss, _ := runReplayProcess(t, nil, 0, path)
		if err := <-wrote; err != nil {
			t.Fatal(err)
		}
		if code != 0 || out.Corrupt != 0 || rss > replayRSSLimit {
			t.Errorf("exit %d, %d corrupt, peak RSS %d MiB; want exit 0, none corrupt, at most %d MiB\n%s", code, out.Corrupt, rss>>20, replayRSSLimit>>20, stderr)
		}
		t.Logf("peak RSS %d MiB", rss>>20)
	})

	t.Run("/dev/zero, then SIGINT", func(t *testing.T) {
		code, _, stderr, rss, took := runReplayProcess(t, os.Interrupt, 2*time.Second, "/dev/zero")
		if code != 1 || !strings.Contains(stderr, "interrupted") || took > 2*time.Second || rss > replayRSSLimit {
			t.Errorf("exit %d %v after SIGINT, peak RSS %d MiB, stderr %q; want exit 1 at once, saying interrupted, at most %d MiB", code, took, rss>>20, stderr, replayRSSLimit>>20)
		}
		t.Logf("peak RSS %d MiB, ended %v after SIGINT", rss>>20, took)
	})

	t.Run("a FIFO that never ends, then SIGTERM", func(t *testing.T) {
		stop := make(chan struct{})
		path, wrote := fifo(t, dir, func(w io.Writer) error {
			fmt.Fprintln(w, timelineLine(0, 0))
			<-stop // the writer holds the FIFO open and writes nothing more
			return nil
		})
		code, _, stderr, _, took := runReplayProcess(t, syscall.SIGTERM, time.Second, path)
		close(stop)
		<-wrote
		if code != 1 || !strings.Contains(stderr, "interrupted") || took > 2*time.Second {
			t.Errorf("exit %d %v after SIGTERM, stderr %q; want exit 1 at once, saying interrupted", code, took, stderr)
		}
	})

	t.Run("a line dated 2099", func(t *testing.T) {
		path := filepath.Join(dir, "future.jsonl")
		body := timelineLine(0, 0) + "\n" + timelineLine(60, 0) + "\n" + strings.Replace(timelineLine(0, 0), "2026-12-01", "2099-12-01", 1) + "\n"
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, stderr, _, _ := runReplayProcess(t, nil, 0, path)
		if code != 0 || out.Corrupt != 1 || out.TimeAtLevel["Normal"] != "1m0s" {
			t.Errorf("exit %d, %d corrupt, Normal for %s; want the 2099 line corrupt and Normal for 1m0s\n%s", code, out.Corrupt, out.TimeAtLevel["Normal"], stderr)
		}
	})
}
