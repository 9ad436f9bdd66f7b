#!/usr/bin/env bash
# Appenders side by side: P appenders, each writing its own file
# in 64 KiB appends (-w: another size), with the final sync, through ext4go on a fresh image,
# through the kernel's journalled ext4 on a fresh loop mount of an image of
# the same size, and straight into one image file with pwrite (the
# "ceiling": the bound of any filesystem kept in an image file, since the
# host serialises writes to one file and then has to write it back).
# Rounds alternate between them so that other load hits all alike; the
# figures are the median MiB/s of the rounds, with P/P1 for each, and P/P1
# round by round.
#   scripts/bench-appenders.sh [-r ROUNDS] [-p 1,2] [-S SIZE-EACH] [-s FS-SIZE] [-w WRITE] [-t IMAGE-DIR] [-d | -m]
# IMAGE-DIR (default /tmp) holds the images: /dev/shm puts them on tmpfs.
# -d puts both filesystems on loop devices over their images, made by
# mkfs.ext4 alike, and ext4go writes to its device (--device): writes to a
# block device take no lock of the host's on one file, which bounds the
# image-file rounds (the ceiling is then pwrite into the device).
# -m runs ext4go on an image in memory (--memory; the ceiling is then a
# copy into memory) and the kernel on an image in IMAGE-DIR, /dev/shm by
# default: ext4go without the host's storage, against the kernel's best.
# Needs root for the loop mount; the mount is always undone.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3 plist=1,2 each=256M size=2G write=64K tdir= devmode= memmode=
while getopts r:p:S:s:w:t:dm opt; do
  case $opt in
  r) rounds=$OPTARG ;;
  p) plist=$OPTARG ;;
  S) each=$OPTARG ;;
  s) size=$OPTARG ;;
  w) write=$OPTARG ;;
  t) tdir=$OPTARG ;;
  d) devmode=1 ;;
  m) memmode=1 ;;
  *) exit 2 ;;
  esac
done
if [ -z "$tdir" ]; then
  if [ -n "$memmode" ]; then tdir=/dev/shm; else tdir=/tmp; fi
fi
work=$(mktemp -d "$tdir/ext4go-bench-appenders.XXXX")
mnt=$work/mnt
mkdir -p "$mnt"
loop= eloop=
cleanup() {
  if mountpoint -q "$mnt"; then umount "$mnt" || umount -l "$mnt"; fi
  if [ -n "$loop" ]; then losetup -d "$loop" || true; fi
  if [ -n "$eloop" ]; then losetup -d "$eloop" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
go build -o "$work/ext4go" ./cmd/ext4go
echo "# appenders, P = $plist, $each each in $write appends with the final sync, $rounds rounds, $size images in $tdir${devmode:+ behind loop devices}${memmode:+, ext4go on an image in memory}, $(nproc) CPUs, $(uname -r)" >&2
for r in $(seq "$rounds"); do
  for p in ${plist//,/ }; do
    # Each side starts with no writeback of the other's image going on.
    sync
    if [ -n "$memmode" ]; then
      "$work/ext4go" bench appenders -p "$p" --size "$each" --write "$write" --fs-size "$size" --memory --ceiling --json
    elif [ -n "$devmode" ]; then
      rm -f "$work/e.img"
      truncate -s "$size" "$work/e.img"
      eloop=$(losetup --find --show "$work/e.img")
      mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$eloop"
      "$work/ext4go" bench appenders -p "$p" --size "$each" --write "$write" --device "$eloop" --ceiling --json
      losetup -d "$eloop"
      eloop=
      rm -f "$work/e.img"
    else
      TMPDIR=$work "$work/ext4go" bench appenders -p "$p" --size "$each" --write "$write" --fs-size "$size" --ceiling --json
    fi
    sync
    rm -f "$work/k.img"
    truncate -s "$size" "$work/k.img"
    mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$work/k.img"
    loop=$(losetup --find --show "$work/k.img")
    mount -t ext4 "$loop" "$mnt"
    "$work/ext4go" bench appenders -p "$p" --size "$each" --write "$write" --dir "$mnt" --json
    umount "$mnt"
    losetup -d "$loop"
    loop=
    e2fsck -fn "$work/k.img" >/dev/null 2>&1 || echo "$0: e2fsck found problems in the kernel's image" >&2
  done
done | python3 -c '
import json, sys, statistics
by = {}
for line in sys.stdin:
    row = json.loads(line)
    by.setdefault((row["config"], row["p"]), []).append(row["mib_per_sec"])
    if row.get("ceiling"):
        by.setdefault(("ceiling", row["p"]), []).append(row["ceiling"]["mib_per_sec"])
configs = [c for c in ("ceiling", "kernel", "ext4go") if any(k[0] == c for k in by)]
ps = sorted({k[1] for k in by})
med = {k: statistics.median(v) for k, v in by.items()}
head = "| P | " + " | ".join(f"{c} MiB/s" for c in configs) + " | ext4go/kernel | ext4go/ceiling | " + " | ".join(f"{c} P/P1" for c in configs) + " |"
print(head)
print("|" + "---|" * (head.count("|") - 1))
for p in ps:
    cells = [f"{med.get((c, p), 0):,.0f}" for c in configs]
    e = med.get(("ext4go", p), 0)
    cells += [f"{e / med[(c, p)]:.2f}" if med.get((c, p)) else "-" for c in ("kernel", "ceiling")]
    cells += [f"{med.get((c, p), 0) / med[(c, ps[0])]:.2f}" if med.get((c, ps[0])) else "-" for c in configs]
    print(f"| {p} | " + " | ".join(cells) + " |")
print()
for c in configs:
    for p in ps[1:]:
        r = sorted(a / b for a, b in zip(by[(c, p)], by[(c, ps[0])]))
        print(f"{c} P{p}/P{ps[0]} by round: median {statistics.median(r):.2f}, " + " ".join(f"{x:.2f}" for x in r))
'
