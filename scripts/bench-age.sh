#!/bin/bash
# bench-age.sh: run one of ext4go's workload benchmarks (age, appenders)
# twice on fresh filesystems of the same size and geometry: through ext4go
# on an image it makes, and through the kernel's ext4 on a loop mount of an
# image mkfs.ext4 makes with ext4go's mkfs defaults (the features, block,
# inode and flex group sizes of e2fsprogs' mke2fs.conf for ext4, inode
# tables zeroed as ext4go writes them, so the kernel starts no lazy init).
# Needs root for the loop mount. The mount is always unmounted and the
# loop device detached, also when the bench fails or is interrupted.
#
# usage: scripts/bench-age.sh age|appenders [BENCH OPTIONS...]
#   SIZE=1G     image size (-size for age, -fs-size for appenders)
#   SIDES="ext4go kernel"   which runs to do
#   EXT4GO=path the ext4go binary (default: built from this tree)
# e.g.  scripts/bench-age.sh age -seed 7
#       scripts/bench-age.sh appenders -fsync-every 1M
set -euo pipefail

kind=${1:?usage: $0 age|appenders [BENCH OPTIONS...]}
shift
case $kind in
age) sizeflag=-size ;;
appenders) sizeflag=-fs-size ;;
*) echo "$0: unknown bench $kind (age or appenders)" >&2; exit 2 ;;
esac
SIZE=${SIZE:-1G}
SIDES=${SIDES:-ext4go kernel}

work=$(mktemp -d /tmp/bench-age.XXXXXX)
mnt=$work/mnt
loop=
cleanup() {
	if mountpoint -q "$mnt" 2>/dev/null; then
		umount "$mnt" || umount -l "$mnt"
	fi
	if [ -n "$loop" ]; then
		losetup -d "$loop" || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -z "${EXT4GO:-}" ]; then
	EXT4GO=$work/ext4go
	(cd "$(dirname "$0")/.." && go build -o "$EXT4GO" ./cmd/ext4go)
fi

for side in $SIDES; do
	case $side in
	ext4go)
		"$EXT4GO" bench "$kind" "$sizeflag" "$SIZE" "$@"
		;;
	kernel)
		img=$work/kernel.img
		truncate -s "$SIZE" "$img"
		mkfs.ext4 -q -F -t ext4 -E lazy_itable_init=0,lazy_journal_init=0 "$img"
		loop=$(losetup --find --show "$img")
		mkdir -p "$mnt"
		mount -t ext4 "$loop" "$mnt"
		"$EXT4GO" bench "$kind" -dir "$mnt" "$@"
		umount "$mnt"
		losetup -d "$loop"
		loop=
		e2fsck -fn "$img" >/dev/null 2>&1 || echo "$0: e2fsck found problems in the kernel's image" >&2
		rm -f "$img"
		;;
	*) echo "$0: unknown side $side (ext4go or kernel)" >&2; exit 2 ;;
	esac
done
