#!/usr/bin/env bash
# Runs every Fuzz target of the module for a short time each: a smoke run
# for CI (10 s per target by default), or a longer hunt by hand.
#
#   scripts/fuzz-smoke.sh                 # every target, 10s each
#   scripts/fuzz-smoke.sh 5m              # every target, 5 minutes each
#   scripts/fuzz-smoke.sh 1m ./internal/dir ./internal/extent
#
# The first argument is a -fuzztime value (a duration, or "Nx" for N
# inputs); the rest are package patterns (default ./...). A target that
# finds a failure leaves the input in its package's testdata/fuzz/<Target>/
# (go test prints the path; commit it as a regression seed once fixed); the
# script runs all targets and exits 1 if any failed.
#
# Go's fuzzing coordinator can end a duration-bounded run with a bare
# "context deadline exceeded" when a worker is mid-call as -fuzztime expires
# (golang/go#51484, #75804): no input is at fault and none is written. Such
# a run is retried once; a real finding always writes a failing input (or
# fails on the seed corpus) and fails the script at once.
set -euo pipefail
cd "$(dirname "$0")/.."

fuzztime=${1:-10s}
[ $# -gt 0 ] && shift
pkgs=("$@")
[ ${#pkgs[@]} -eq 0 ] && pkgs=(./...)

# go test -list prints a package's matching names, then "ok <pkg> <time>"
# ("? <pkg> [no test files]" for packages without tests).
listing=$(go test -list '^Fuzz' "${pkgs[@]}")
targets=()
names=()
while IFS= read -r line; do
  case "$line" in
    Fuzz*) names+=("$line") ;;
    ok[[:space:]]*)
      pkg=$(awk '{print $2}' <<<"$line")
      for n in ${names[@]+"${names[@]}"}; do targets+=("$pkg $n"); done
      names=()
      ;;
    *) names=() ;;
  esac
done <<<"$listing"

if [ ${#targets[@]} -eq 0 ]; then
  echo "fuzz-smoke: no Fuzz targets in ${pkgs[*]}" >&2
  exit 1
fi

echo "fuzz-smoke: ${#targets[@]} targets, $fuzztime each"
# is_deadline_race LOG: the run failed with only the coordinator's deadline
# error: no failing input written, no panic, no failing seed input (a
# "--- FAIL: FuzzX/..." line). Log lines of the target itself (t.Logf of
# the set-up) may appear and do not count.
is_deadline_race() {
  grep -q 'context deadline exceeded' "$1" &&
    ! grep -qE 'Failing input written|panic:|--- FAIL: Fuzz[A-Za-z0-9_]+/' "$1"
}

failed=()
flaked=()
for t in "${targets[@]}"; do
  pkg=${t% *}
  name=${t#* }
  echo "=== $pkg $name"
  for attempt in 1 2; do
    log=$(mktemp)
    if go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg" 2>&1 | tee "$log"; then
      rm -f "$log"
      break
    fi
    if is_deadline_race "$log"; then
      rm -f "$log"
      if [ $attempt -eq 1 ]; then
        echo "fuzz-smoke: $name ended with Go's fuzztime deadline race (no failing input); running it again"
        continue
      fi
      echo "fuzz-smoke: $name hit Go's fuzztime deadline race twice (no failing input); not a finding" >&2
      flaked+=("$pkg $name")
      break
    fi
    rm -f "$log"
    failed+=("$pkg $name")
    break
  done
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz-smoke: ${#failed[@]} of ${#targets[@]} targets failed:" >&2
  printf '  %s\n' "${failed[@]}" >&2
  exit 1
fi
if [ ${#flaked[@]} -gt 0 ]; then
  echo "fuzz-smoke: ${#flaked[@]} targets stopped by the deadline race twice:" >&2
  printf '  %s\n' "${flaked[@]}" >&2
fi
echo "fuzz-smoke: all ${#targets[@]} targets passed"
