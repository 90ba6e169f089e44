package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestKillLoop SIGKILLs the daemon at random moments while an operator sets
// overrides and readers follow the level, 50 times: every restart must load
// the state, keep the last acknowledged override (or a later one), and
// publish a sequence above every one a reader saw, so that no sequence (and
// no ETag) ever names two different states.
func TestKillLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("kill loop skipped in -short mode")
	}
	dir := t.TempDir()
	cfg := writeConfig(t, dir, fmt.Sprintf(fastConfig, filepath.Join(dir, "data"), "100ms"))
	var acked atomic.Int64 // highest override number answered with 200
	var seen atomic.Uint64 // highest sequence a reader was shown
	var lastSeq uint64
	const kills = 50
	for i := range kills {
		d := start(t, "serve", "--config", cfg)
		doc := d.level(t, "")
		if doc.Sequence < lastSeq {
			t.Fatalf("restart %d: sequence %d went back from %d", i, doc.Sequence, lastSeq)
		}
		if s := seen.Load(); i > 0 && doc.Sequence <= s {
			t.Fatalf("restart %d after SIGKILL: sequence %d, but a reader had already seen %d naming another state", i, doc.Sequence, s)
		}
		if a := acked.Load(); a > 0 {
			if doc.Override == nil {
				t.Fatalf("restart %d: no override, but #%d was acknowledged", i, a)
			}
			n, _ := strconv.Atoi(strings.TrimPrefix((*doc.Override)["reason"].(string), "op-"))
			if int64(n) < a {
				t.Fatalf("restart %d: override op-%d in force, but op-%d was acknowledged", i, n, a)
			}
		}
		lastSeq = doc.Sequence

		stopOps := make(chan struct{})
		opsDone := make(chan struct{})
		go func() {
			defer close(opsDone)
			for n := acked.Load() + 1; ; n++ {
				select {
				case <-stopOps:
					return
				default:
				}
				body := fmt.Sprintf(`{"level":"Major","mode":"pin","ttl":"1h","reason":"op-%d"}`, n)
				resp, err := httpPut(d.url+"/v1/override", "admin-secret", body)
				if err != nil {
					return // killed mid-request: not acknowledged
				}
				if resp == 200 {
					acked.Store(n)
				}
				if s, err := readSequence(d.url); err == nil {
					seen.Store(max(seen.Load(), s))
				}
			}
		}()
		time.Sleep(time.Duration(rand.IntN(40)+5) * time.Millisecond)
		_ = d.cmd.Process.Kill()
		<-d.done
		close(stopOps)
		<-opsDone
	}
	t.Logf("%d kills survived; %d overrides acknowledged; final sequence %d", kills, acked.Load(), lastSeq)
	if acked.Load() == 0 {
		t.Fatal("no override was ever acknowledged: the loop tested nothing")
	}
}

// readSequence reads the published sequence as any reader would.
func readSequence(url string) (uint64, error) {
	resp, err := shortClient.Get(url + "/v1/level")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var doc levelDoc
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return 0, err
	}
	return doc.Sequence, nil
}

func httpPut(url, token, body string) (int, error) {
	req, err := newRequest("PUT", url, token, body)
	if err != nil {
		return 0, err
	}
	resp, err := shortClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func TestDamagedStateFile(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfg := writeConfig(t, dir, fmt.Sprintf(fastConfig, data, "100ms"))
	d := start(t, "serve", "--config", cfg)
	for _, reason := range []string{"first", "second"} {
		if resp, b := d.request(t, "PUT", "/v1/override", "admin-secret", `{"level":"Severe","ttl":"1h","reason":"`+reason+`"}`); resp.StatusCode != 200 {
			t.Fatalf("override: %d %s", resp.StatusCode, b)
		}
	}
	d.stop(t)
	state := filepath.Join(data, "state.json")

	// Damaged state.json: resume from state.json.prev, say so loudly.
	os.WriteFile(state, []byte(`{"version":1,"level":`), 0o600)
	d = start(t, "serve", "--config", cfg)
	doc := d.level(t, "")
	if doc.Level != "Severe" || doc.Override == nil || (*doc.Override)["reason"] != "second" {
		t.Fatalf("after damage: %+v, want the last good copy (override 'second')", doc)
	}
	if !strings.Contains(d.logs.String(), "level=ERROR") || !strings.Contains(d.logs.String(), "resumed from state.json.prev") {
		t.Errorf("the fallback must be logged at ERROR:\n%s", d.logs)
	}
	if _, m := d.request(t, "GET", "/metrics", "", ""); !strings.Contains(m, "degraded_state_recovered 1") {
		t.Error("degraded_state_recovered must be 1")
	}
	d.stop(t)

	// Both damaged: refuse to start, naming the file and the way out.
	os.WriteFile(state, []byte("{"), 0o600)
	os.WriteFile(state+".prev", []byte("{"), 0o600)
	out, err := exec.Command(binary, "serve", "--config", cfg).CombinedOutput()
	if code := exitOf(err); code != 1 || !strings.Contains(string(out), state) || !strings.Contains(string(out), "--reset-state") {
		t.Fatalf("exit %d: %s\nwant 1 naming %s and --reset-state", code, out, state)
	}
	d = start(t, "serve", "--config", cfg, "--reset-state")
	if doc := d.level(t, ""); doc.Level != "Normal" || doc.Override != nil {
		t.Errorf("after --reset-state: %+v, want Normal", doc)
	}
	if _, err := os.Stat(state + ".corrupt"); err != nil {
		t.Errorf("the damaged file must be kept aside: %v", err)
	}
	d.stop(t)
}

func TestUnwritableDataDir(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "not-a-dir")
	os.WriteFile(file, nil, 0o600)
	cfg := writeConfig(t, dir, fmt.Sprintf(fastConfig, filepath.Join(file, "data"), "100ms"))
	out, err := exec.Command(binary, "serve", "--config", cfg).CombinedOutput()
	if code := exitOf(err); code != 1 || !strings.Contains(string(out), "data_dir "+filepath.Join(file, "data")) {
		t.Fatalf("exit %d: %s\nwant 1 naming the data_dir", code, out)
	}
}

func exitOf(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}
