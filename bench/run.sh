#!/usr/bin/env bash
# bench/run.sh: every performance measurement of degraded, side by side with
# its peers, then docs/performance.md rewritten from the results.
#
#   bench/run.sh            full run (about 35 minutes on 2 cores)
#   QUICK=1 bench/run.sh    one-iteration smoke (about 3 minutes): writes
#                           bench/results/quick/performance-quick.md, not the docs
#
# Installs what it needs (Debian's redis-server and wrk; the fleet step uses
# Debian's etcd-server if it is there and is skipped otherwise), runs everything on
# 127.0.0.1 only, bounds every step with a timeout, and leaves nothing running.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$here"
export PATH="/usr/local/go/bin:$PATH"
# Build with go.mod's toolchain, as .ci/run does: a machine's own Go may be
# older (go1.26.8 here, with standard-library vulnerabilities), and the
# daemon then warns at every start that it was built with it.
GOTOOLCHAIN="$(awk '$1 == "toolchain" { print $2 }' "$root/go.mod")"
export GOTOOLCHAIN

QUICK="${QUICK:-0}"
results="${RESULTS:-$here/results}"
[ "$QUICK" = 1 ] && results="${RESULTS:-$here/results/quick}"
if [ "$QUICK" = 1 ]; then
  count=1 benchtime=1x subscribers=200 changes=3 wrk_runs=1 wrk_duration=1s
  reaction_trials=5 reaction_subscribers=200 idle_duration=3s idle_warmup=1s scale_sizes=100,300 scale_changes=3
  fleet_daemons=5 fleet_overrides=3 fleet_measure=3s
  fleet_scale_sizes=50,100 fleet_scale_measure=3s fleet_scale_overrides=2
  out="$results/performance-quick.md"
else
  count=5 benchtime=300ms subscribers=10000 changes=40 wrk_runs=5 wrk_duration=10s
  reaction_trials=200 reaction_subscribers=10000 idle_duration=60s idle_warmup=5s scale_sizes=1000,10000,top scale_changes=20
  fleet_daemons=50 fleet_overrides=20 fleet_measure=10s
  fleet_scale_sizes=100,300,1000 fleet_scale_measure=10s fleet_scale_overrides=10
  out="$root/docs/performance.md"
fi

step() { printf '\n=== %s\n' "$*" >&2; }

step "tools"
need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v wrk >/dev/null || need+=(wrk)
command -v taskset >/dev/null || need+=(util-linux)
if [ "${#need[@]}" -gt 0 ]; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
go version >&2
redis-server --version >&2
wrk -v 2>&1 | head -1 >&2 || true

# Each process holding subscribers needs one descriptor per connection: the
# daemon, redis-server and each subscriber process hold $subscribers each.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt $((subscribers + 1000)) ]; then
  echo "run.sh: open-file limit $(ulimit -n) is below $((subscribers + 1000)); raise the hard limit (ulimit -Hn)" >&2
  exit 1
fi

# The scale step goes as near the daemon's file limit as it can: the
# daemon caps streams at the limit - 96 (max_connections - 32), and keeps a
# few descriptors for itself and the measurement's requests.
if [ "$(ulimit -n)" = unlimited ]; then top=19800; else top=$(($(ulimit -n) - 200)); fi
scale_sizes="${scale_sizes/top/$top}"

rm -rf "$results"
mkdir -p "$results/bin"
bin="$results/bin"
step "build"
(cd "$root" && go build -o "$bin/degraded" ./cmd/degraded)
go build -o "$bin/degbench" ./cmd/degbench

step "machine"
{
  echo "date (UTC)=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  hv="$(lscpu | sed -n 's/^Hypervisor vendor: *//p' | head -1)"
  # A guest whose hypervisor does not name itself (Firecracker) still sets
  # the CPU's hypervisor flag.
  if [ -n "$hv" ]; then hv="$hv guest"
  elif grep -qw hypervisor /proc/cpuinfo; then hv="virtual machine (its hypervisor unnamed)"
  else hv="bare metal"; fi
  echo "CPU=$(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores, $hv"
  echo "memory=$(free -g | awk '/^Mem:/{print $2}') GiB"
  echo "kernel=$(uname -sr)"
  echo "Go=$(go version | cut -d' ' -f3-)"
  echo "GOMAXPROCS=default ($(nproc))"
  echo "redis-server=$(redis-server --version | cut -d' ' -f3 | tr -d 'v=')"
  echo "wrk=$(wrk -v 2>&1 | head -1 | cut -d' ' -f2)"
  echo "degraded=$(cd "$root" && git describe --always --dirty 2>/dev/null || echo unknown)"
  go list -m -f '{{.Path}}={{.Version}}' github.com/go-kratos/aegis github.com/failsafe-go/failsafe-go \
    github.com/sony/gobreaker/v2 github.com/redis/go-redis/v9 github.com/prometheus/client_golang
} >"$results/machine.txt"
cat "$results/machine.txt" >&2

cmds=(
  "go test -run '^\$' -bench . -benchmem -count $count -benchtime $benchtime ./micro"
  "degbench fanout -binary degraded -subscribers $subscribers -changes $changes"
  "degbench http -binary degraded -runs $wrk_runs -duration $wrk_duration -threads 2 -connections 64"
  "degbench reaction -binary degraded -trials $reaction_trials -subscribers $reaction_subscribers"
  "degbench idle -binary degraded -subscribers 100 -duration $idle_duration"
  "degbench scale -binary degraded -sizes $scale_sizes -changes $scale_changes"
)
if command -v etcd >/dev/null; then
  cmds+=("degbench fleet -binary degraded -daemons $fleet_daemons -overrides $fleet_overrides -measure $fleet_measure")
  cmds+=("degbench fleet-scale -sizes $fleet_scale_sizes -measure $fleet_scale_measure -overrides $fleet_scale_overrides")
fi
# The overload step (degbench overload): a fixed-capacity service behind
# each system under 3x, 10x, a 12x spike of the lowest class, a square
# wave and a CPU-bound 3x (the service pinned to core 0 with taskset, the
# generator and the daemon to core 1). About 17 minutes; a few seconds per
# phase with QUICK=1.
overload_args=()
[ "$QUICK" = 1 ] && overload_args+=(-quick)
cmds+=("degbench overload -binary degraded${overload_args[*]:+ ${overload_args[*]}}")
printf '%s\n' "(cd bench && ${cmds[0]})" "${cmds[@]:1}" >"$results/commands.txt"

step "micro-benchmarks: admission and recording"
timeout 600 go test -run '^$' -bench . -benchmem -count "$count" -benchtime "$benchtime" ./micro | tee "$results/micro.txt" >&2

step "fan-out: $subscribers SSE subscribers vs Redis pub/sub"
timeout 600 "$bin/degbench" fanout -binary "$bin/degraded" -subscribers "$subscribers" -changes "$changes" \
  -out "$results/fanout.json"

step "HTTP: wrk on the daemon vs a bare net/http server"
timeout 600 "$bin/degbench" http -binary "$bin/degraded" -runs "$wrk_runs" -duration "$wrk_duration" \
  -threads 2 -connections 64 -out "$results/http.json"

step "reaction time: 1 SSE subscriber, then $((reaction_subscribers + 1))"
timeout 600 "$bin/degbench" reaction -binary "$bin/degraded" -trials "$reaction_trials" -subscribers "$reaction_subscribers" \
  -out "$results/reaction.json"

step "idle cost"
timeout 600 "$bin/degbench" idle -binary "$bin/degraded" -subscribers 100 -duration "$idle_duration" \
  -warmup "$idle_warmup" -out "$results/idle.json"

step "scale: SSE subscribers $scale_sizes"
timeout 900 "$bin/degbench" scale -binary "$bin/degraded" -sizes "$scale_sizes" -changes "$scale_changes" \
  -out "$results/scale.json"

step "fleet: one override through etcd to $fleet_daemons daemons"
if command -v etcd >/dev/null; then
  timeout 600 "$bin/degbench" fleet -binary "$bin/degraded" -daemons "$fleet_daemons" -overrides "$fleet_overrides" \
    -measure "$fleet_measure" -out "$results/fleet.json"
else
  echo "run.sh: no etcd on PATH (Debian: apt-get install etcd-server): the fleet step is skipped" >&2
fi

step "fleet at scale: members of the fleet package at $fleet_scale_sizes on one etcd"
if command -v etcd >/dev/null; then
  timeout 900 "$bin/degbench" fleet-scale -sizes "$fleet_scale_sizes" -measure "$fleet_scale_measure" \
    -overrides "$fleet_scale_overrides" -out "$results/fleet-scale.json"
else
  echo "run.sh: no etcd on PATH (Debian: apt-get install etcd-server): the fleet-scale step is skipped" >&2
fi

step "overload: a fixed-capacity service under overload, each system in front"
timeout 1800 "$bin/degbench" overload -binary "$bin/degraded" "${overload_args[@]}" -out "$results/overload.json"

step "report"
"$bin/degbench" report -results "$results" -findings "$here/findings.md" -out "$out"
echo "wrote $out" >&2
