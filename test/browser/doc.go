// Package browser holds the dashboard's end-to-end tests: the real API and
// controller on a loopback server, the page in headless Chromium driven
// over the DevTools protocol. It has no code of its own: dashboard_test.go
// is the operator's tour; connection_test.go the daemon lost and back and
// the first paint before the level table; override_test.go the form that
// renews an active floor, the partial admission and who did what; the
// others shadow mode, the signals and the fleet. gate_test.go is a proxy
// between the page and the daemon that can cut it, slow the table, and
// add what the controller does not publish yet. history_test.go and
// report_test.go draw a recorded incident (incident_test.go: the real
// daemon in fake time) in the History view and in the replay report;
// day_test.go measures the History view over a day of 1s ticks. The tests
// skip when Debian's chromium is not installed (.ci/run installs it).
// DEGRADED_SCREENSHOT_DIR keeps their screenshots; UPDATE_SCREENSHOT=1
// writes docs/dashboard.png, docs/history.png and docs/replay-report.png.
package browser
