package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// smallDisk mounts a tmpfs of size bytes (root only; the test is skipped
// otherwise) and unmounts it at the end of the test.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	return tmpfs(t, "size="+size)
}

// dirBytes is the total size of the files in dir.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, e := range entries {
		if info, err := e.Info(); err == nil {
			total += info.Size()
		}
	}
	return total
}

// metric reads one sample of /metrics, 0 if it is absent.
func (d *process) metric(t *testing.T, series string) float64 {
	t.Helper()
	_, body := d.request(t, "GET", "/metrics", "", "")
	return sampleOf(body, series)
}

// sampleOf reads one sample of a /metrics body, 0 if it is absent.
func sampleOf(body, series string) float64 {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// busyConfig ticks every 10ms with many pushed signals, so that the
// timeline grows by tens of KB a second: fmt it with the data_dir and the
// record section.
func busyConfig(dataDir, record string) string {
	var custom []string
	for i := range 16 {
		custom = append(custom, fmt.Sprintf("{name: queue_%02d, ttl: 1h}", i))
	}
	return fmt.Sprintf(`
listen: 127.0.0.1:0
data_dir: %q
health_check_interval: 10ms
signals: {cpu: {source: off}, memory: {source: off}, custom: [%s]}
auth: {token: "admin-secret"}
record: %s
levels:
  - {name: Minor, priority_threshold: 10, custom: {queue_00: 100}}
  - {name: Major, priority_threshold: 50, custom: {queue_00: 500}}
`, dataDir, strings.Join(custom, ", "), record)
}

// TestTimelineOnASmallDisk: on a small tmpfs, the timeline never takes the
// room state.json needs. With max_bytes 1MiB the files, today's
// included, stay within it (lines dropped as "budget"); with the default
// 256MiB the disk runs short first, and recording stops at the reserve
// (lines dropped as "disk_full") and resumes once there is room again.
// Either way an override PUT answers 200 and SIGTERM's final save
// succeeds (exit 0). Before, today's file reached 2.09 MB on this disk,
// the PUT answered 500 and SIGTERM exited 1 with "state not saved".
func TestTimelineOnASmallDisk(t *testing.T) {
	t.Parallel()
	t.Run("max_bytes counts today's file", func(t *testing.T) {
		t.Parallel()
		// 3 MiB: room for the 1 MiB budget and the 1 MiB reserve beside it.
		disk := smallDisk(t, "3m")
		data := filepath.Join(disk, "data")
		tl := filepath.Join(data, "timeline")
		if err := os.MkdirAll(tl, 0o750); err != nil {
			t.Fatal(err)
		}
		// Yesterday's file, and today's nearly at the budget already.
		now := time.Now().UTC()
		yesterday := filepath.Join(tl, now.Add(-24*time.Hour).Format(time.DateOnly)+".jsonl")
		today := filepath.Join(tl, now.Format(time.DateOnly)+".jsonl")
		if err := os.WriteFile(yesterday, bytes.Repeat([]byte("{}\n"), 100<<10/3), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(today, bytes.Repeat([]byte("{}\n"), (1<<20-100<<10)/3), 0o600); err != nil {
			t.Fatal(err)
		}
		d := start(t, "serve", "--config", writeConfig(t, t.TempDir(), busyConfig(data, "{max_bytes: 1MiB}")))
		until(t, 60*time.Second, "lines dropped for the budget", func() bool {
			return d.metric(t, `degraded_timeline_dropped_total{reason="budget"}`) > 0
		})
		if got := dirBytes(t, tl); got > 1<<20 {
			t.Errorf("the timeline holds %d bytes, over max_bytes 1MiB", got)
		}
		if _, err := os.Stat(yesterday); !os.IsNotExist(err) {
			t.Errorf("yesterday's file: %v, want it deleted before today's reached the budget", err)
		}
		if !strings.Contains(d.logs.String(), "max_bytes reached") {
			t.Errorf("the budget was not logged:\n%s", d.logs)
		}
		overrideAndStop(t, d, data)
	})

	t.Run("a short disk stops recording first", func(t *testing.T) {
		t.Parallel()
		disk := smallDisk(t, "2m")
		data := filepath.Join(disk, "data")
		tl := filepath.Join(data, "timeline")
		if err := os.MkdirAll(tl, 0o750); err != nil {
			t.Fatal(err)
		}
		// Yesterday's recording already fills most of the disk.
		yesterday := filepath.Join(tl, time.Now().UTC().Add(-24*time.Hour).Format(time.DateOnly)+".jsonl")
		if err := os.WriteFile(yesterday, bytes.Repeat([]byte("{}\n"), 900<<10/3), 0o600); err != nil {
			t.Fatal(err)
		}
		d := start(t, "serve", "--config", writeConfig(t, t.TempDir(), busyConfig(data, "{enabled: true}")))
		until(t, 60*time.Second, "lines dropped for the short disk", func() bool {
			return d.metric(t, `degraded_timeline_dropped_total{reason="disk_full"}`) > 0
		})
		if !strings.Contains(d.logs.String(), "short of space") {
			t.Errorf("the short disk was not logged:\n%s", d.logs)
		}
		saveOverride(t, d, data)
		// Room returns: recording resumes.
		today := dirBytes(t, tl) - 900<<10
		if err := os.Remove(yesterday); err != nil {
			t.Fatal(err)
		}
		until(t, 30*time.Second, "recording resumed", func() bool { return dirBytes(t, tl) > today })
		waitLog(t, d, "timeline: writing again")
		if code := d.stop(t); code != 0 {
			t.Fatalf("SIGTERM with recording resumed: exit %d, want 0\n%s", code, d.logs)
		}
	})
}

// saveOverride sets an override, which must be saved (200),
// and checks state.json holds it.
func saveOverride(t *testing.T, d *process, data string) {
	t.Helper()
	resp, body := d.request(t, "PUT", "/v1/override", "admin-secret", `{"level":"Major","mode":"pin","ttl":"1h","reason":"INC-disk"}`)
	if resp.StatusCode != 200 {
		t.Fatalf("override PUT with the timeline at its limit: %d %s, want 200\n%s", resp.StatusCode, body, d.logs)
	}
	state, err := os.ReadFile(filepath.Join(data, "state.json"))
	if err != nil || !bytes.Contains(state, []byte("INC-disk")) {
		t.Fatalf("state.json after the PUT: %v, want it to hold the override", err)
	}
}

// overrideAndStop sets an override, then SIGTERMs: both must save.
func overrideAndStop(t *testing.T, d *process, data string) {
	t.Helper()
	saveOverride(t, d, data)
	if code := d.stop(t); code != 0 {
		t.Fatalf("SIGTERM with the timeline at its limit: exit %d, want 0 (state saved)\n%s", code, d.logs)
	}
	state, err := os.ReadFile(filepath.Join(data, "state.json"))
	if err != nil || !bytes.Contains(state, []byte(`"clean_shutdown": true`)) && !bytes.Contains(state, []byte(`"clean_shutdown":true`)) {
		t.Errorf("state.json after SIGTERM: %v, want the final save with the clean-shutdown marker", err)
	}
}
