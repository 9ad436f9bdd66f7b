#!/usr/bin/env bash
# Times a SEEK_DATA/SEEK_HOLE walk of a sparse file with N extents (every
# other 4 KiB block written; default 100000) through the kernel's ext4 on a
# loop mount and through "ext4go mount", side by side, with the daemon's
# peak RSS (VmHWM). Run as root from the repository:
#
#   scripts/bench-seek.sh [N]
#
# EXT4GO names the binary (default: built from this tree into the work
# directory).
set -euo pipefail
N=${1:-100000}
[ "$(id -u)" = 0 ] || { echo "bench-seek: must run as root" >&2; exit 2; }
work=$(mktemp -d -t ext4go-seek.XXXXXX)
pid=
cleanup() {
  if mountpoint -q "$work/mnt" 2>/dev/null; then umount "$work/mnt" || umount -l "$work/mnt" || true; fi
  [ -z "$pid" ] || wait "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
EXT4GO=${EXT4GO:-}
if [ -z "$EXT4GO" ]; then
  go build -o "$work/ext4go" ./cmd/ext4go
  EXT4GO=$work/ext4go
fi
mkdir "$work/mnt"
img=$work/img
size_mb=$(( N * 8 / 1024 + 256 ))
mke2fs -q -t ext4 -F "$img" "${size_mb}M"
mount -o loop "$img" "$work/mnt"
python3 - "$work/mnt/sparse" "$N" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
blk = b"x" * 4096
for i in range(int(sys.argv[2])):
    os.pwrite(fd, blk, i * 8192)
os.close(fd)
PY
umount "$work/mnt"
e2fsck -fn "$img" >/dev/null

cat > "$work/walk.py" <<'PY'
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
t = time.monotonic()
off, n = 0, 0
while True:
    try:
        off = os.lseek(fd, off, os.SEEK_DATA)
    except OSError:
        break
    off = os.lseek(fd, off, os.SEEK_HOLE)
    n += 1
print("%.3f %d" % (time.monotonic() - t, n))
PY

walk() { # prints "seconds ranges"
  sync; echo 3 > /proc/sys/vm/drop_caches
  python3 "$work/walk.py" "$work/mnt/sparse"
}

mount -o loop,ro "$img" "$work/mnt"
out=$(walk) # the walker has exited (and closed the file) before the umount
read -r kt kn <<<"$out"
umount "$work/mnt"

"$EXT4GO" mount -f -o ro "$img" "$work/mnt" &
pid=$!
for _ in $(seq 100); do mountpoint -q "$work/mnt" && break; sleep 0.1; done
out=$(walk)
read -r et en <<<"$out"
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
umount "$work/mnt"
wait "$pid" || true
pid=
e2fsck -fn "$img" >/dev/null

printf '%-8s %10s %8s %12s\n' impl seconds ranges "peak RSS MiB"
printf '%-8s %10s %8s %12s\n' kernel "$kt" "$kn" -
printf '%-8s %10s %8s %12s\n' ext4go "$et" "$en" "$((hwm / 1024))"
awk -v e="$et" -v k="$kt" 'BEGIN { if (k > 0) printf "ratio ext4go/kernel: %.1fx\n", e / k }'
