#!/usr/bin/env bash
# The test command: runs the tests of every module in this repository.
# `go test ./...` never enters a nested module, even in a workspace, so each
# module (the daemon at the root, client/, degradedgrpc/, test/, bench/)
# runs on its own, outside any workspace (GOWORK=off). Arguments go to
# every `go test`:
#
#   scripts/test.sh -race
#   scripts/test.sh -race -run TestFollowsTheLevel -v
#
# Every module runs even when one fails; the exit status is non-zero if any
# failed, and the last line names them.
set -uo pipefail
cd "$(dirname "$0")/.."
export GOWORK=off

modules=(. client degradedgrpc test bench)
failed=()
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
for m in "${modules[@]}"; do
  printf '\n=== module %s: go test %s ./...\n' "$(cd "$m" && go list -m)" "$*"
  if (cd "$m" && go test "$@" ./...) 2>&1 | tee "$out"; then
    continue
  fi
  # The race detector's runtime can abort on an internal check of its own
  # ("ThreadSanitizer: CHECK failed", golang/go#27660 and others): that is
  # not a race in this code, which the detector reports as "DATA RACE".
  # Such a run is said so and repeated once; a race, a failed test or a
  # second abort fails the module.
  if grep -q 'ThreadSanitizer: CHECK failed' "$out" && ! grep -q 'DATA RACE' "$out"; then
    echo "module $m: the race detector's runtime aborted (not a race in this code); running it again once"
    if (cd "$m" && go test "$@" ./...); then
      continue
    fi
  fi
  failed+=("$m")
done

echo
if [ "${#failed[@]}" -gt 0 ]; then
  echo "FAIL: tests failed in ${failed[*]}"
  exit 1
fi
echo "ok: all ${#modules[@]} modules"
