#!/usr/bin/env bash
# Benchmarks the FUSE mount side by side with the kernel's ext4 (loop
# mount) and fuse2fs on the same kind of image, in one run (as root):
#   untar of a tree (default /usr/local/go), then unmount (data on disk);
#   create, stat, ls -l (a listing with every entry's attributes) and
#   unlink of N small files (default 50000);
#   null requests: fstatfs in a loop, the round trip through the kernel
#   that every FUSE request pays (for the kernel's ext4, the system call);
#   fallocate2 with 1, 2 and 4 workers (ext4go bench fallocate2 -dir);
#   fio (if installed): 4k random writes, 1 MiB sequential writes and
#   reads, with 1, 2 and 4 jobs (BENCH_FIO_SECONDS each, default 5).
# ext4go runs twice: as mounted by default, and with -o writeback_cache
# (ext4go-wb); where the kernel has FUSE over io_uring (the fuse module's
# enable_uring, which the script sets to Y for the run and puts back after)
# also with -o uring (ext4go-uring). BENCH_IMPLS="kernel ext4go ext4go-nordp"
# picks others (ext4go-nordp: -o no_readdirplus; ext4go-uring-wb: -o
# uring,writeback_cache; ext4go-uring-idle: -o uring,uring_idle).
#
#   scripts/bench-mount.sh [TREE] [N]
#
# It needs ext4go on PATH with /sbin/mount.fuse.ext4go (scripts/run-suites.sh
# installs both), fuse2fs (Debian package fuse2fs) with the helper from
# ../shared/suites/helpers, python3, and prints one line per workload and
# implementation: seconds and the ratio to the kernel's.
set -euo pipefail
TREE=${1:-/usr/local/go}
N=${2:-50000}
[ "$(id -u)" = 0 ] || { echo "bench-mount: must run as root" >&2; exit 2; }
work=$(mktemp -d -t ext4go-bench.XXXXXX)
uring_param=/sys/module/fuse/parameters/enable_uring
uring_old=$(cat "$uring_param" 2>/dev/null || true)
trap 'umount "$work/mnt" 2>/dev/null || true; rm -rf "$work"; [ -z "$uring_old" ] || echo "$uring_old" > "$uring_param"' EXIT
tar cf "$work/tree.tar" -C "$(dirname "$TREE")" "$(basename "$TREE")"
mkdir "$work/mnt"
impls=(kernel ext4go ext4go-wb)
[ -n "$uring_old" ] && impls+=(ext4go-uring)
command -v fuse2fs >/dev/null && [ -x /sbin/mount.fuse.fuse2fs ] && impls+=(fuse2fs)
[ -n "${BENCH_IMPLS:-}" ] && read -ra impls <<<"$BENCH_IMPLS"
FIO_SECONDS=${BENCH_FIO_SECONDS:-5}
case " ${impls[*]} " in *" ext4go-uring"*) echo Y > "$uring_param" ;; esac

mountit() { # IMPL
  case "$1" in
  kernel) mount -o loop "$work/img" "$work/mnt" ;;
  ext4go-wb) mount -t fuse.ext4go "$work/img" "$work/mnt" -o allow_other,default_permissions,writeback_cache ;;
  ext4go-uring) mount -t fuse.ext4go "$work/img" "$work/mnt" -o allow_other,default_permissions,uring ;;
  ext4go-uring-wb) mount -t fuse.ext4go "$work/img" "$work/mnt" -o allow_other,default_permissions,uring,writeback_cache ;;
  ext4go-uring-idle) mount -t fuse.ext4go "$work/img" "$work/mnt" -o allow_other,default_permissions,uring,uring_idle ;;
  ext4go-nordp) mount -t fuse.ext4go "$work/img" "$work/mnt" -o allow_other,default_permissions,no_readdirplus ;;
  *) mount -t "fuse.$1" "$work/img" "$work/mnt" -o allow_other,default_permissions ;;
  esac
}
umountit() {
  umount "$work/mnt"
  # A FUSE daemon finishes writing after umount returns: wait for it.
  flock -x -w 300 "$work/img" true
}
fresh() { rm -f "$work/img"; mke2fs -q -t ext4 -F "$work/img" 4G; }
now() { date +%s.%N; }
declare -A base
report() { # WORKLOAD IMPL SECONDS
  local r=""
  if [ "$2" = kernel ]; then base[$1]=$3; else r=$(python3 -c "print(f'{$3/${base[$1]}:.2f}x the kernel time')"); fi
  printf '%-28s %-15s %8.2f s  %s\n' "$1" "$2" "$3" "$r"
}
for impl in "${impls[@]}"; do
  fresh; mountit "$impl"
  t0=$(now); tar xf "$work/tree.tar" -C "$work/mnt"; umountit; t1=$(now)
  report "untar+umount" "$impl" "$(python3 -c "print($t1-$t0)")"
  mountit "$impl"
  out=$(python3 - "$work/mnt" "$N" <<'PY'
import os, sys, time
d, n = sys.argv[1], int(sys.argv[2])
os.mkdir(os.path.join(d, "many"))
p = [os.path.join(d, "many", "f%06d" % i) for i in range(n)]
t = time.time()
for x in p:
    os.close(os.open(x, os.O_CREAT | os.O_WRONLY, 0o644))
c = time.time()
for x in p:
    os.stat(x)
s = time.time()
time.sleep(1.5)  # past the mount's attribute timeout: the listing asks again
l0 = time.time()
for e in os.scandir(os.path.join(d, "many")):  # ls -l
    e.stat(follow_symlinks=False)
l = time.time()
for x in p:
    os.unlink(x)
u = time.time()
print(c - t, s - c, l - l0, u - l)
PY
)
  read -r c s l u <<<"$out"
  report "create $N" "$impl" "$c"; report "stat $N" "$impl" "$s"; report "ls -l $N" "$impl" "$l"; report "unlink $N" "$impl" "$u"
  # The transport's floor: fstatfs reaches a FUSE server every time (the
  # kernel caches no answer) and costs the server next to nothing, so its
  # rate bounds any workload that needs one request per operation.
  rt=$(python3 - "$work/mnt" <<'PY'
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
n, t = 0, time.time()
while time.time() - t < 2:
    for _ in range(100):
        os.fstatvfs(fd)
    n += 100
el = time.time() - t
print("%d %.1f" % (n / el, el / n * 1e6))
PY
)
  read -r rtops rtus <<<"$rt"
  printf '%-28s %-15s %8s ops/s  (%s us a request)\n' "null request (fstatfs)" "$impl" "$rtops" "$rtus"
  for p in 1 2 4; do
    ops=$(ext4go bench fallocate2 --dir "$work/mnt" -p "$p" --json 2>/dev/null | python3 -c 'import json,sys; print(int(json.loads(sys.stdin.read().splitlines()[-1])["ops_per_sec"]))' || echo "?")
    printf '%-28s %-15s %8s ops/s\n' "fallocate2 P=$p" "$impl" "${ops:-?}"
  done
  if command -v fio >/dev/null; then
    for job in "randwrite 4k" "write 1m" "read 1m"; do
      read -r rw bs <<<"$job"
      for p in 1 2 4; do
        mb=$(fio --name=bench --directory="$work/mnt" --rw="$rw" --bs="$bs" --size=256m --numjobs="$p" \
          --ioengine=psync --invalidate=1 --runtime="$FIO_SECONDS" --time_based --group_reporting \
          --output-format=json 2>/dev/null | python3 -c '
import json, sys
j = json.load(sys.stdin)["jobs"][0]
side = j["read"] if j["read"]["bw_bytes"] else j["write"]
print("%.1f" % (side["bw_bytes"] / 2**20))' || echo "?")
        printf '%-28s %-15s %8s MiB/s\n' "fio $rw $bs P=$p" "$impl" "$mb"
        # Each run starts from fresh files (fio lays them out again).
        rm -f "$work"/mnt/bench.*
      done
    done
  fi
  umountit
done
