#!/usr/bin/env bash
# Bounded soak of the real daemon on loopback: 5,000 SSE subscribers,
# 20,000 outcomes/s and an override flip every 2s for DURATION (default 60s).
# CI runs DURATION=10s. Prints the figures and exits non-zero on a failed check.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="/usr/local/go/bin:$PATH"
DURATION="${DURATION:-60s}"
SUBSCRIBERS="${SUBSCRIBERS:-5000}"
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
bin="$(mktemp -d)"
trap 'rm -rf "$bin"' EXIT
# The soak command lives in the test module (test/go.mod).
GOWORK=off go build -o "$bin/degraded" ./cmd/degraded
(cd test && GOWORK=off go build -o "$bin/soak" ./soak)
timeout 300 "$bin/soak" -binary "$bin/degraded" -duration "$DURATION" -subscribers "$SUBSCRIBERS" "$@"
