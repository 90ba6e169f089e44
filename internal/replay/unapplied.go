package replay

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/degraded/degraded/config"
)

// unapplied warns about the candidate's keys that change what is
// measured rather than how it is judged: the recording measured with the
// recording daemon's settings, so replay cannot apply them. Only keys
// that differ from the defaults are named.
func unapplied(c *config.Config) []string {
	def := config.Default()
	keys := []struct {
		key       string
		got, want any
	}{
		{"health_check_interval", c.HealthCheckInterval, def.HealthCheckInterval},
		{"error_rate_window", c.ErrorRateWindow, def.ErrorRateWindow},
		{"error_rate_window_buckets", c.ErrorRateWindowBuckets, def.ErrorRateWindowBuckets},
		{"signals.cpu", c.Signals.CPU, def.Signals.CPU},
		{"signals.memory", c.Signals.Memory, def.Signals.Memory},
		{"signals.pressure", c.Signals.Pressure, def.Signals.Pressure},
		{"signals.cgroup_path", c.Signals.CgroupPath, def.Signals.CgroupPath},
		{"signals.custom", c.Signals.Custom, def.Signals.Custom},
		{"signals.prometheus", c.Signals.Prometheus, def.Signals.Prometheus},
	}
	var differ []string
	for _, k := range keys {
		if !reflect.DeepEqual(k.got, k.want) {
			differ = append(differ, k.key)
		}
	}
	if len(differ) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("not replayed, the recording measured with its own: %s", strings.Join(differ, ", "))}
}
