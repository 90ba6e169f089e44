#!/usr/bin/env bash
# govulncheck for degraded, without vuln.go.dev.
#
# This network reaches the Go module proxy but not vuln.go.dev, so the
# vulnerability database is taken from the golang.org/x/vulndb module (its
# data/osv/*.json is the source vuln.go.dev is generated from) and indexed
# into a local v1 database (index/db.json, index/modules.json,
# index/vulns.json, ID/<GO-ID>.json, each with a .gz twin) by vulndb's own
# cmd/indexdb. govulncheck then reads it with -db file://...
#
# Everything is pinned and fetched through the proxy with `go install
# pkg@version` from a scratch directory, so the daemon's go.mod/go.sum are
# never touched and no tool enters its dependencies.
#
# Exit status is govulncheck's: 0 when no vulnerable symbol is reachable from
# the code, 3 when one is (module- or package-level matches that the code
# does not call are printed but do not fail), anything else on error. Any
# failure to fetch, build or sanity-check the database exits non-zero.
#
# Time (2 cores): warm ~20 s (DB build ~3 s, scan ~10-15 s). Cold, with
# empty module and build caches, ~3 min: ~2.5 min of it fetching (~930 MB
# unpacked module cache) and compiling cmd/indexdb's dependency graph, once
# per Go version. Each step has its own timeout, so a hang cannot stall CI.
#
# Usage: .ci/govulncheck.sh [module-dir]   (default: the repository root)
# Positive control: a scratch module requiring golang.org/x/text v0.3.5 and
# calling language.Parse must exit 3 reporting GO-2021-0113.
#
# Knobs (environment): VULNDB_VERSION, GOVULNCHECK_VERSION to bump the pins
# (VULNDB_VERSION=latest takes the newest vulndb commit the proxy knows);
# GOVULNCHECK_CACHE for where tools go; GOVULNCHECK_ARGS for extra flags
# (e.g. "-show verbose"); GOVULNCHECK_MIN_ENTRIES for the sanity floor.
set -euo pipefail

VULNDB_VERSION="${VULNDB_VERSION:-v0.0.0-20261105234957-e22db6528018}"
GOVULNCHECK_VERSION="${GOVULNCHECK_VERSION:-v1.9.0}"
# The pinned vulndb has ~4,800 entries; far fewer means a broken build.
MIN_ENTRIES="${GOVULNCHECK_MIN_ENTRIES:-1000}"

# Scans the repository root, or the module directory given as $1.
ROOT="$(cd "${1:-$(dirname "$0")/..}" && pwd)"
export PATH="/usr/local/go/bin:$PATH"
export GOWORK=off

die() { echo "govulncheck.sh: FAIL: $*" >&2; exit 1; }
now() { date +%s; }
T0="$(now)"
step() { printf '\n--- %s (t=%ss)\n' "$*" "$(( $(now) - T0 ))"; }

CACHE="${GOVULNCHECK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/degraded-govulncheck}"
SCRATCH="$(mktemp -d "${TMPDIR:-/tmp}/govulncheck.XXXXXX")"
trap 'rm -rf "$SCRATCH"' EXIT
DB="$SCRATCH/db"

# Tool installs run outside any module, with the caller's GOFLAGS cleared
# (e.g. -mod=... would be rejected there).
gotool() { (cd "$SCRATCH" && GOFLAGS= GOBIN="${BIN:-}" timeout "$1" go "${@:2}"); }

step "fetch golang.org/x/vulndb@$VULNDB_VERSION via the module proxy"
dl="$(gotool 300 mod download -json "golang.org/x/vulndb@$VULNDB_VERSION")" \
  || die "could not download golang.org/x/vulndb@$VULNDB_VERSION: $dl"
jsonfield() { printf '%s\n' "$dl" | sed -n "s/^[[:space:]]*\"$1\": \"\\(.*\\)\",\\{0,1\\}\$/\\1/p"; }
VULNDB_DIR="$(jsonfield Dir)"
VULNDB_VERSION="$(jsonfield Version)"   # resolves "latest" if that was asked for
[ -n "$VULNDB_VERSION" ] || die "could not read the vulndb version from: $dl"
OSV_DIR="$VULNDB_DIR/data/osv"
[ -d "$OSV_DIR" ] || die "no data/osv in the vulndb module (Dir='$VULNDB_DIR')"
echo "vulndb module: $VULNDB_DIR"
GOVER="$(cd "$SCRATCH" && go env GOVERSION)"   # the Go that builds the tools
BIN="$CACHE/bin/$GOVER/govulncheck-$GOVULNCHECK_VERSION+vulndb-$VULNDB_VERSION"
mkdir -p "$BIN"

step "install cmd/indexdb@$VULNDB_VERSION and govulncheck@$GOVULNCHECK_VERSION into $BIN"
# Binaries are kept per (Go, govulncheck, vulndb) version: a warm run reuses
# them; a cold one downloads and compiles indexdb's large dependency graph.
if [ -x "$BIN/indexdb" ] && [ -x "$BIN/govulncheck" ]; then
  echo "reusing the binaries built earlier"
else
  gotool 900 install "golang.org/x/vulndb/cmd/indexdb@$VULNDB_VERSION" \
    || die "could not build golang.org/x/vulndb/cmd/indexdb@$VULNDB_VERSION"
  gotool 300 install "golang.org/x/vuln/cmd/govulncheck@$GOVULNCHECK_VERSION" \
    || die "could not build golang.org/x/vuln/cmd/govulncheck@$GOVULNCHECK_VERSION"
fi

step "build the v1 database from data/osv into $DB"
# indexdb parses every OSV entry (failing on any it cannot read) and writes
# the indexes and ID/ files, plain and gzipped, as vuln.go.dev serves them.
timeout 120 "$BIN/indexdb" -vulns "$OSV_DIR" -out "$DB" \
  || die "indexdb could not build the database from $OSV_DIR"

# Sanity checks, so an empty or half-written DB can never pass quietly.
for f in index/db.json index/modules.json index/vulns.json; do
  [ -s "$DB/$f" ] || die "database is missing $f"
done
count() { { "$@" || true; } | wc -l; }
osv_files="$(count find "$OSV_DIR" -maxdepth 1 -name 'GO-*.json')"
entries="$(count grep -o '"id":"GO-[0-9]*-[0-9]*"' "$DB/index/vulns.json")"
id_files="$(count find "$DB/ID" -maxdepth 1 -name 'GO-*.json')"
modules="$(count grep -o '"path":' "$DB/index/modules.json")"
# The OSV files in the module carry modified=0001-01-01 (vuln.go.dev stamps
# real times from git history when it deploys), so govulncheck will print
# "DB updated: 0001-01-01"; the snapshot's date is in the pseudo-version.
snapshot="$(printf '%s\n' "$VULNDB_VERSION" | sed -n 's/^v0\.0\.0-\([0-9]\{4\}\)\([0-9]\{2\}\)\([0-9]\{2\}\)\([0-9]\{2\}\)\([0-9]\{2\}\)\([0-9]\{2\}\)-.*/\1-\2-\3 \4:\5:\6 UTC/p')"
[ "$entries" -ge "$MIN_ENTRIES" ] || die "only $entries entries in index/vulns.json (< $MIN_ENTRIES)"
[ "$entries" -eq "$osv_files" ] || die "index/vulns.json has $entries entries but data/osv has $osv_files files"
[ "$entries" -eq "$id_files" ] || die "index/vulns.json has $entries entries but ID/ has $id_files files"
echo "vulndb:      golang.org/x/vulndb@$VULNDB_VERSION"
echo "entries:     $entries (GO-IDs), covering $modules modules"
echo "snapshot:    ${snapshot:-unknown} (commit time of that vulndb version)"
echo "scanner:     golang.org/x/vuln/cmd/govulncheck@$GOVULNCHECK_VERSION (built with $GOVER)"
echo "stdlib:      $(cd "$ROOT" && go env GOVERSION) (the Go toolchain selected in $ROOT)"

step "govulncheck -db file://$DB ./... (in $ROOT)"
rc=0
# shellcheck disable=SC2086  # GOVULNCHECK_ARGS is a list of flags
(cd "$ROOT" && timeout 600 "$BIN/govulncheck" -db "file://$DB" -show version \
  ${GOVULNCHECK_ARGS:-} ./...) || rc=$?
case "$rc" in
  0) echo "govulncheck: no reachable vulnerabilities ($(( $(now) - T0 ))s)" ;;
  3) echo "govulncheck: FAIL: vulnerable code is reachable, see above ($(( $(now) - T0 ))s)" >&2 ;;
  124) echo "govulncheck: FAIL: timed out" >&2 ;;
  *) echo "govulncheck: FAIL: exited $rc ($(( $(now) - T0 ))s)" >&2 ;;
esac
exit "$rc"
