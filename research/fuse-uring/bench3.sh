#!/bin/bash
# Builds the servers and the C helpers, then runs 3 alternating rounds:
# go-fuse, the raw server's classic /dev/fuse loop, the raw server over
# io_uring (enable_uring is set for it and always set back to N), and a
# pipe ping-pong between two processes for reference. As root.
set -e
cd "$(dirname "$0")"
go build -o bin/rawsrv ./rawsrv
go build -o bin/gofusesrv ./gofusesrv
for c in client pingpong sysc; do gcc -O2 -o $c $c.c; done
trap 'echo N > /sys/module/fuse/parameters/enable_uring' EXIT
SPECS=("x 20000" "s 20000")
for round in 1 2 3; do
  echo "=== round $round load=$(cut -d' ' -f1 /proc/loadavg)"
  echo "--- go-fuse v2.12.1 (fs API)"; ./run.sh bin/gofusesrv -- "${SPECS[@]}" | grep "us "; sleep 1
  echo "--- raw classic /dev/fuse"; ./run.sh bin/rawsrv -- "${SPECS[@]}" | grep "us "; sleep 1
  echo 1 > /sys/module/fuse/parameters/enable_uring
  echo "--- raw io_uring"; ./run.sh bin/rawsrv -uring -- "${SPECS[@]}" | grep "us \|served"; sleep 1
  echo N > /sys/module/fuse/parameters/enable_uring
  ./pingpong 20000
done
