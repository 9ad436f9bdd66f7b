#!/bin/bash
# usage: run.sh SERVER-CMD... -- CLIENT-SPEC...
# Starts the server (it mounts /tmp/fuse-uring/mnt and prints READY), runs
# ./client once per spec ("mode n [cpu]": x = getxattr of user.x, which
# fails with ENODATA; s = stat with no attribute caching; cpu pins the
# client with taskset), then stops the server and always unmounts.
cd "$(dirname "$0")"
W=/tmp/fuse-uring MNT=/tmp/fuse-uring/mnt
mkdir -p "$MNT"
srv=(); while [ "$1" != "--" ]; do srv+=("$1"); shift; done; shift
"${srv[@]}" 2>$W/srv.log &
SP=$!
cleanup(){ kill -TERM $SP 2>/dev/null; wait $SP; grep served $W/srv.log; mountpoint -q $MNT && { umount $MNT 2>/dev/null || umount -l $MNT; }; }
trap cleanup EXIT
for i in $(seq 50); do grep -q READY $W/srv.log && break; grep -q FATAL $W/srv.log && break; sleep 0.1; done
cat $W/srv.log
mountpoint -q $MNT || { echo "not mounted"; exit 1; }
for spec in "$@"; do
  set -- $spec
  if [ -n "$3" ]; then echo -n "[taskset -c $3] "; timeout 60 taskset -c $3 ./client $MNT/file $1 $2; else timeout 60 ./client $MNT/file $1 $2; fi
done
