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
failed=()
for t in "${targets[@]}"; do
  pkg=${t% *}
  name=${t#* }
  echo "=== $pkg $name"
  if ! go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg"; then
    failed+=("$pkg $name")
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz-smoke: ${#failed[@]} of ${#targets[@]} targets failed:" >&2
  printf '  %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "fuzz-smoke: all ${#targets[@]} targets passed"
