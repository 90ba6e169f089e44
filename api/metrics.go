package api

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/levels"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are the daemon's Prometheus series (prefix degraded_). Build them
// with NewMetrics; a nil *Metrics records nothing. Metrics implements
// controller.Observer and is safe for concurrent use.
type Metrics struct {
	level           prometheus.Gauge
	levelInfo       *prometheus.GaugeVec
	recommended     prometheus.Gauge
	threshold       prometheus.Gauge
	transitions     *prometheus.CounterVec
	levelChanges    *prometheus.CounterVec
	sseDrops        *prometheus.CounterVec
	authFailures    *prometheus.CounterVec
	blind           prometheus.Gauge
	signalState     *prometheus.GaugeVec
	signalGauges    map[levels.Signal]prometheus.Gauge // the first signals' own gauges, e.g. signal_cpu_percent
	signalValue     *prometheus.GaugeVec
	outcomesTotal   *prometheus.CounterVec
	successes       prometheus.Counter // outcomesTotal{result="success"}, looked up once
	failures        prometheus.Counter
	overrideActive  prometheus.Gauge
	overrideExpiry  prometheus.Gauge
	sseSubscribers  prometheus.Gauge
	checkDuration   prometheus.Histogram
	sampleErrors    *prometheus.CounterVec
	stateRecovered  prometheus.Gauge
	stateSaveErrors prometheus.Counter
	stateSaveFailed prometheus.Gauge
	reloadOK        prometheus.Gauge
	reloadTimestamp prometheus.Gauge
	wouldShed       *prometheus.CounterVec
	timelineDropped *prometheus.CounterVec

	mu         sync.Mutex // guards levelNames and shed
	levelNames []string
	shed       map[string]int64 // wouldShed's values, for GET /v1/level
	shedJSON   []byte           // shed encoded; nil when it changed
}

var _ controller.Observer = (*Metrics)(nil)

// NewMetrics builds the series and registers them, with the Go and process
// collectors, on reg. levelNames are the table's names, Normal first, so
// that every level_info series exists from the start.
func NewMetrics(reg prometheus.Registerer, levelNames []string) *Metrics {
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "degraded", Name: name, Help: help})
	}
	m := &Metrics{
		level:          g("level", "Index of the published degradation level (0 is Normal)."),
		levelInfo:      prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "degraded", Name: "level_info", Help: "1 for the published level, 0 for the others."}, []string{"level"}),
		recommended:    g("recommended_level", "Index of the level the signals recommend at the last health check."),
		threshold:      g("priority_threshold", "Lowest priority admitted at the published level."),
		transitions:    prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "degraded", Name: "level_transitions_total", Help: "Changes of the published level."}, []string{"from", "to", "source"}),
		levelChanges:   prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "degraded", Name: "level_changes_total", Help: "Changes of the published level, by the source that made them; exported at 0 from the start."}, []string{"source"}),
		sseDrops:       prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "degraded", Name: "sse_dropped_total", Help: "SSE subscribers dropped or refused: write_timeout, write_error, limit (refused at the cap), shutdown."}, []string{"reason"}),
		authFailures:   prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "degraded", Name: "auth_failures_total", Help: "Requests refused for a missing or wrong bearer token, by route."}, []string{"route"}),
		blind:          g("blind", "1 while no signal has a value and some are warming or failed: with blind_hold > 0 the daemon then cannot step down by itself."),
		signalState:    prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "degraded", Name: "signal_state", Help: "1 for each signal's state at the last health check: available, warming, failed, absent or off."}, []string{"signal", "state"}),
		signalValue:    prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "degraded", Name: "signal_value", Help: "Each signal's value at the last health check (NaN without a value)."}, []string{"signal"}),
		signalGauges:   make(map[levels.Signal]prometheus.Gauge, len(ownGauges)),
		outcomesTotal:  prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "degraded", Name: "outcomes_total", Help: "Outcomes reported by services."}, []string{"result"}),
		overrideActive: g("override_active", "1 while an operator override is active."),
		overrideExpiry: g("override_expiry_timestamp_seconds", "When the active override expires, Unix seconds; 0 without one."),
		sseSubscribers: g("sse_subscribers", "Open Server-Sent Events streams."),
		checkDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "degraded", Name: "health_check_duration_seconds", Help: "Time taken by each health check.",
			Buckets: []float64{.0001, .0005, .001, .005, .01, .05, .1, .5, 1}}),
		sampleErrors:    prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "degraded", Name: "sample_errors_total", Help: "Failed signal samples."}, []string{"signal"}),
		stateRecovered:  g("state_recovered", "1 if the daemon started from state.json.prev because state.json was damaged."),
		stateSaveErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "degraded", Name: "state_save_errors_total", Help: "Failed writes of the state file."}),
		stateSaveFailed: g("state_save_failed", "1 while the last write of the state file failed: changes that would pass the reserved sequence ceiling are held."),
		reloadOK:        g("config_last_reload_successful", "1 if the last configuration reload succeeded."),
		reloadTimestamp: g("config_last_reload_success_timestamp_seconds", "Time of the last successful configuration load, Unix seconds."),
		wouldShed:       prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "degraded", Name: "shadow_would_shed_total", Help: "Requests shadow mode admitted that enforcement would have shed, by level (unknown: a level name the table lacks)."}, []string{"level"}),
		levelNames:      append([]string(nil), levelNames...),
		timelineDropped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "degraded", Name: "timeline_dropped_total",
			Help: "Timeline lines not recorded: full (the writer was behind), budget (today's file reached record.max_bytes), disk_full (ENOSPC, or less free space than the state file's reserve), write_error (a read-only disk, an I/O error)."}, []string{"reason"}),
	}
	reg.MustRegister(m.level, m.levelInfo, m.recommended, m.threshold, m.transitions, m.levelChanges, m.sseDrops, m.authFailures, m.blind, m.signalState, m.signalValue,
		m.outcomesTotal, m.overrideActive, m.overrideExpiry, m.sseSubscribers, m.checkDuration, m.sampleErrors, m.stateRecovered, m.stateSaveErrors, m.stateSaveFailed, m.reloadOK, m.reloadTimestamp, m.wouldShed, m.timelineDropped,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.successes = m.outcomesTotal.WithLabelValues("success")
	m.failures = m.outcomesTotal.WithLabelValues("failure")
	for _, sig := range ownGauges {
		gauge := g("signal_"+sig.Key(), "The "+sig.String()+" signal at the last health check (NaN without a value).")
		reg.MustRegister(gauge)
		gauge.Set(math.NaN())
		m.signalGauges[sig] = gauge
	}
	for _, sig := range levels.AllSignals {
		m.signalValue.WithLabelValues(sig.String()).Set(math.NaN())
		if sig != levels.ErrorRate && sig != levels.Latency {
			m.sampleErrors.WithLabelValues(sig.String())
		}
		for _, st := range levels.SignalStates {
			m.signalState.WithLabelValues(sig.String(), st.String())
		}
	}
	for _, n := range levelNames {
		m.levelInfo.WithLabelValues(n).Set(0)
	}
	m.shedLabelsLocked()
	for _, src := range changeSources {
		m.levelChanges.WithLabelValues(src)
	}
	for _, r := range dropReasons {
		m.sseDrops.WithLabelValues(r)
	}
	for _, r := range authRoutes {
		m.authFailures.WithLabelValues(r)
	}
	for _, r := range timelineDropReasons {
		m.timelineDropped.WithLabelValues(r)
	}
	m.reloadOK.Set(1)
	m.reloadTimestamp.Set(float64(time.Now().Unix()))
	return m
}

// Published updates the level gauges from a published state.
func (m *Metrics) Published(s *controller.State) {
	if m == nil {
		return
	}
	m.level.Set(float64(s.Index))
	m.threshold.Set(float64(s.PriorityThreshold))
	m.mu.Lock()
	for i, n := range m.levelNames {
		if n == s.Recommended {
			m.recommended.Set(float64(i))
		}
		if n != s.Level {
			m.levelInfo.WithLabelValues(n).Set(0)
		}
	}
	m.mu.Unlock()
	m.levelInfo.WithLabelValues(s.Level).Set(1)
	if s.Override != nil {
		m.overrideActive.Set(1)
		m.overrideExpiry.Set(float64(s.Override.ExpiresAt.UnixMilli()) / 1e3)
	} else {
		m.overrideActive.Set(0)
		m.overrideExpiry.Set(0)
	}
	value := func(sig levels.Signal) float64 {
		if v, ok := s.Signals.Value(sig); ok {
			return v
		}
		return math.NaN()
	}
	for sig, gauge := range m.signalGauges {
		gauge.Set(value(sig))
	}
	m.blind.Set(boolValue(s.Blind))
	if s.Signals.SampledAt.IsZero() {
		return
	}
	// Every built-in signal, and every custom one the sample names.
	sigs := slices.Clone(levels.AllSignals)
	for sig := range s.Signals.States {
		if !sig.Builtin() {
			sigs = append(sigs, sig)
		}
	}
	for _, sig := range sigs {
		state := s.Signals.State(sig)
		m.signalValue.WithLabelValues(sig.String()).Set(value(sig))
		for _, st := range levels.SignalStates {
			m.signalState.WithLabelValues(sig.String(), st.String()).Set(boolValue(st == state))
		}
	}
}

// ownGauges are the signals with a gauge of their own beside signal_value
// (signal_cpu_percent...): the first three, kept for dashboards that use
// them. Every signal is in signal_value{signal}.
var ownGauges = []levels.Signal{levels.ErrorRate, levels.CPU, levels.Memory}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// changeSources are the sources of level_changes_total, exported at 0
// from the start so that increase() sees the first change after a start.
var changeSources = []string{"auto", "override", "fleet", "config", "restart"}

// Transition counts a change of the published level, in
// level_transitions_total{from,to,source} and level_changes_total{source}.
func (m *Metrics) Transition(from, to, source string) {
	if m == nil {
		return
	}
	m.transitions.WithLabelValues(from, to, source).Inc()
	m.levelChanges.WithLabelValues(source).Inc()
}

// HealthCheck records a health check's duration and failed samples.
func (m *Metrics) HealthCheck(d time.Duration, failed []string) {
	if m == nil {
		return
	}
	m.checkDuration.Observe(d.Seconds())
	for _, s := range failed {
		m.sampleErrors.WithLabelValues(s).Inc()
	}
}

// Reloaded records the outcome of a configuration reload.
func (m *Metrics) Reloaded(ok bool, at time.Time) {
	if m == nil {
		return
	}
	if ok {
		m.reloadOK.Set(1)
		m.reloadTimestamp.Set(float64(at.Unix()))
		return
	}
	m.reloadOK.Set(0)
}

// SetLevelNames replaces the level names after a reload changed the table.
func (m *Metrics) SetLevelNames(names []string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.levelInfo.Reset()
	for _, n := range names {
		m.levelInfo.WithLabelValues(n).Set(0)
	}
	m.levelNames = append([]string(nil), names...)
	m.shedLabelsLocked()
}

// StateRecovered records that the state was resumed from the previous copy.
func (m *Metrics) StateRecovered() {
	if m != nil {
		m.stateRecovered.Set(1)
	}
}

// SaveFailed records the outcome of a write of the state file: a failed
// one is counted, and state_save_failed says whether the last one failed.
func (m *Metrics) SaveFailed(failed bool) {
	if m == nil {
		return
	}
	if failed {
		m.stateSaveErrors.Inc()
		m.stateSaveFailed.Set(1)
	} else {
		m.stateSaveFailed.Set(0)
	}
}

func (m *Metrics) outcomes(success, failure int64) {
	if m == nil {
		return
	}
	m.successes.Add(float64(success))
	m.failures.Add(float64(failure))
}

func (m *Metrics) sseDropped(reason string) {
	if m != nil {
		m.sseDrops.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) authFailed(route string) {
	if m != nil {
		m.authFailures.WithLabelValues(route).Inc()
	}
}

func (m *Metrics) subscribed(delta float64) {
	if m != nil {
		m.sseSubscribers.Add(delta)
	}
}
