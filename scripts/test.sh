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
for m in "${modules[@]}"; do
  printf '\n=== module %s: go test %s ./...\n' "$(cd "$m" && go list -m)" "$*"
  if ! (cd "$m" && go test "$@" ./...); then
    failed+=("$m")
  fi
done

echo
if [ "${#failed[@]}" -gt 0 ]; then
  echo "FAIL: tests failed in ${failed[*]}"
  exit 1
fi
echo "ok: all ${#modules[@]} modules"
