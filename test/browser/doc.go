// Package browser holds the dashboard's end-to-end test: the real API and
// controller on a loopback server, the page in headless Chromium driven
// over the DevTools protocol. It has no code of its own; see
// dashboard_test.go. The test skips when Debian's chromium is not
// installed (.ci/run installs it).
package browser
