package levels

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// LineConfig is the machine's config as start and reload lines record it:
// the level table and the rules, enough to rebuild the [Config].
type LineConfig struct {
	Levels []LineLevel `json:"levels"`
	Rules  LineRules   `json:"rules"`
	// Measured holds the config keys that decide what is measured rather
	// than how it is judged (health_check_interval, the error window, the
	// signal sources), as text: replay cannot apply a candidate's, and
	// warns where they differ. It is not part of the digest.
	Measured map[string]string `json:"measured,omitempty"`
}

// LineLevel is one level of the table (Normal included): its priority
// threshold, its thresholds by signal name, and the features it disables.
type LineLevel struct {
	Name              string             `json:"name"`
	PriorityThreshold int                `json:"priority_threshold"`
	Thresholds        map[Signal]float64 `json:"thresholds"`
	Disable           []string           `json:"disable"`
}

// LineRules are the machine's tunables in a line; durations are Go
// duration strings.
type LineRules struct {
	MinimumLevelDuration string        `json:"minimum_level_duration"`
	EscalationDelay      string        `json:"escalation_delay"`
	EscalateAfter        int           `json:"escalate_after"`
	Hysteresis           float64       `json:"hysteresis"`
	BlindHold            string        `json:"blind_hold"`
	ManualOnly           bool          `json:"manual_only"`
	RecoveryJitter       float64       `json:"recovery_jitter"`
	MaxOverrideTTL       string        `json:"max_override_ttl"`
	MinThroughput        int64         `json:"min_throughput"`
	Shadow               bool          `json:"shadow"`
	Admission            AdmissionMode `json:"admission"`
	LatencyQuantile      float64       `json:"latency_quantile"`
	Custom               []Signal      `json:"custom"`
}

// Line returns c as lines record it.
func (c Config) Line() LineConfig {
	t := c.Table
	lc := LineConfig{Levels: make([]LineLevel, 0, t.Len())}
	for _, l := range t.Levels() {
		ths := make(map[Signal]float64, len(l.Thresholds))
		for sig, v := range l.Thresholds {
			ths[sig] = v
		}
		lc.Levels = append(lc.Levels, LineLevel{Name: l.Name, PriorityThreshold: l.PriorityThreshold, Thresholds: ths,
			Disable: append([]string{}, l.Disable...)})
	}
	r := c.Rules
	var custom []Signal
	for _, sig := range t.Signals() {
		if !sig.Builtin() {
			custom = append(custom, sig)
		}
	}
	lc.Rules = LineRules{MinimumLevelDuration: r.MinimumLevelDuration.String(), EscalationDelay: r.EscalationDelay.String(),
		EscalateAfter: max(r.EscalateAfter, 1), Hysteresis: r.Hysteresis, BlindHold: r.BlindHold.String(), ManualOnly: r.ManualOnly,
		RecoveryJitter: c.Rules.RecoveryJitter, MaxOverrideTTL: c.Rules.MaxOverrideTTL.String(), MinThroughput: c.Rules.MinThroughput,
		Shadow: c.Rules.Shadow, Admission: c.admission(), LatencyQuantile: t.LatencyQuantile(), Custom: custom}
	return lc
}

// Digest identifies the config: the same table and rules give the same
// digest, so replay can tell the recorded config from a candidate.
func (c Config) Digest() string {
	b, err := json.Marshal(c.Line())
	if err != nil {
		panic("levels: a config does not encode: " + err.Error()) // every field is a plain value
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// Config rebuilds the config a line recorded.
func (lc LineConfig) Config() (Config, error) {
	if len(lc.Levels) < 2 || lc.Levels[0].Name != NormalName {
		return Config{}, fmt.Errorf("recorded config: need Normal and at least one level, got %d levels", len(lc.Levels))
	}
	ls := make([]Level, 0, len(lc.Levels)-1)
	for _, l := range lc.Levels[1:] {
		ls = append(ls, Level{Name: l.Name, PriorityThreshold: l.PriorityThreshold, Thresholds: Thresholds(l.Thresholds), Disable: l.Disable})
	}
	r := lc.Rules
	t, err := NewTableWith(ls, TableOptions{Custom: r.Custom, LatencyQuantile: r.LatencyQuantile})
	if err != nil {
		return Config{}, fmt.Errorf("recorded config: %w", err)
	}
	var errs []error
	dur := func(name, s string) time.Duration {
		d, err := time.ParseDuration(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("recorded config: %s: %w", name, err))
		}
		return d
	}
	c := Config{Table: t, Rules: Rules{MinimumLevelDuration: dur("minimum_level_duration", r.MinimumLevelDuration),
		EscalationDelay: dur("escalation_delay", r.EscalationDelay), EscalateAfter: r.EscalateAfter, Hysteresis: r.Hysteresis,
		BlindHold: dur("blind_hold", r.BlindHold), ManualOnly: r.ManualOnly,
		RecoveryJitter: r.RecoveryJitter, MaxOverrideTTL: dur("max_override_ttl", r.MaxOverrideTTL), MinThroughput: r.MinThroughput,
		Shadow: r.Shadow, Admission: r.Admission}}
	if len(errs) > 0 {
		return Config{}, errs[0]
	}
	return c, nil
}
