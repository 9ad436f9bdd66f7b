#!/usr/bin/env bash
# bench-untar-frag.sh: how fragmented files come out when trees are untarred
# through the ext4go FUSE mount, side by side with the kernel's ext4 on a loop
# mount and fuse2fs (when installed; otherwise skipped with the reason
# printed). For each tree and block size every contender gets a fresh image
# made by the same mke2fs command, so only the writer differs:
#   tar -C TREE -cf - . | tar -C MNT -xf -
# then unmount (for a FUSE daemon: wait until it has closed the image) and
#   e2fsck -fnv IMG    exit status (must be 0), non-contiguous files (% and count)
#   ext4go frag --json IMG   groups holding file (and directory) data
# and the untar's wall time (and the unmount's: a FUSE daemon and the kernel's
# page cache both write after tar returns). Prints a table per block size and
# the differences to the kernel in percentage points. Needs root.
#
# usage: scripts/bench-untar-frag.sh [--json] [TREE...]
#   EXT4GO=path          the ext4go binary to measure (default: ./cmd/ext4go built
#                        from this tree into the temporary directory)
#   BLOCK_SIZES="1024 4096"
#   TREES="..."          the trees (or as arguments; default /usr/local/go,
#                        /usr/include and /usr/lib/python3.N when present)
#   SIZE=2G              image size
#   CONTENDERS="kernel ext4go fuse2fs"
#   REPEAT=1             runs of each (ext4go's layout varies from run to run;
#                        with more than one the table adds the means)
#   MKFS_OPTS=           more mke2fs options (not -E: see MKFS_EXTENDED)
#   MKFS_EXTENDED="lazy_itable_init=0,lazy_journal_init=0"  mke2fs -E options
#                        (the kernel then starts no background inode-table init)
#   SEED=1               run N of every contender gets the same UUID and
#                        directory hash seed (N in both), so that they place
#                        top-level directories alike (Orlov starts from a
#                        hash of the name with the filesystem's seed); 0
#                        leaves both random
#   EXT4GO_MOUNT_OPTS=   -o options for ext4go mount (e.g. writeback_cache)
#   QUICK=1              smoke test: /usr/local/go/src/io, 1024-byte blocks, 256M
#   JSON=1 or --json     one JSON object a row on stdout (the table goes to stderr)
# Exits 1 if any e2fsck fails (or a run does), 2 on bad usage.
# e.g.  scripts/bench-untar-frag.sh
#       QUICK=1 scripts/bench-untar-frag.sh
#       EXT4GO=/tmp/other/ext4go BLOCK_SIZES=1024 scripts/bench-untar-frag.sh /usr/local/go
set -euo pipefail

JSON=${JSON:-0}
trees=()
for a in "$@"; do
	case $a in
	--json) JSON=1 ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	-*) echo "$0: unknown option $a" >&2; exit 2 ;;
	*) trees+=("$a") ;;
	esac
done
[ "$(id -u)" = 0 ] || { echo "$0: must run as root (loop and FUSE mounts)" >&2; exit 2; }

if [ "${QUICK:-0}" = 1 ]; then
	: "${BLOCK_SIZES:=1024}" "${SIZE:=256M}" "${TREES:=/usr/local/go/src/io}"
fi
BLOCK_SIZES=${BLOCK_SIZES:-1024 4096}
SIZE=${SIZE:-2G}
CONTENDERS=${CONTENDERS:-kernel ext4go fuse2fs}
REPEAT=${REPEAT:-1}
MKFS_OPTS=${MKFS_OPTS:-}
MKFS_EXTENDED=${MKFS_EXTENDED-lazy_itable_init=0,lazy_journal_init=0}
SEED=${SEED:-1}
EXT4GO_MOUNT_OPTS=${EXT4GO_MOUNT_OPTS:-}
if [ ${#trees[@]} = 0 ]; then
	if [ -n "${TREES:-}" ]; then
		read -ra trees <<<"$TREES"
	else
		trees=(/usr/local/go /usr/include)
		for p in /usr/lib/python3.[0-9]*; do
			[ -d "$p" ] && { trees+=("$p"); break; }
		done
	fi
fi

# In --json mode stdout carries only the rows.
if [ "$JSON" = 1 ]; then exec 3>&1 1>&2; else exec 3>/dev/null; fi
say() { echo "bench-untar-frag: $*" >&2; }

work=$(mktemp -d -t bench-untar-frag.XXXXXX)
mnt=$work/mnt
img=$work/img
loop=
daemon= # pid of the FUSE server running now
cleanup() {
	set +e
	if mountpoint -q "$mnt" 2>/dev/null; then
		umount "$mnt" 2>/dev/null || fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt"
	fi
	if [ -n "$daemon" ] && kill -0 "$daemon" 2>/dev/null; then
		# Unmounted: it exits on its own; give it a moment, then stop it.
		for _ in $(seq 50); do kill -0 "$daemon" 2>/dev/null || break; sleep 0.1; done
		kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
	fi
	[ -n "$loop" ] && losetup -d "$loop"
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir "$mnt"

# Which contenders run; a missing one is skipped with the reason.
run=()
for c in $CONTENDERS; do
	case $c in
	kernel)
		grep -qw ext4 /proc/filesystems || modprobe ext4 2>/dev/null || { say "skipping kernel: no ext4 in this kernel"; continue; }
		[ -e /dev/loop-control ] || { say "skipping kernel: no /dev/loop-control"; continue; }
		;;
	ext4go | fuse2fs)
		[ -e /dev/fuse ] || { say "skipping $c: no /dev/fuse"; continue; }
		# go-fuse mounts through fusermount3 (or fusermount), also as root.
		if [ "$c" = ext4go ] && ! command -v fusermount3 >/dev/null && ! command -v fusermount >/dev/null &&
			[ ! -x /bin/fusermount3 ] && [ ! -x /bin/fusermount ]; then
			say "skipping ext4go: no fusermount3 (apt-get install fuse3)"
			continue
		fi
		if [ "$c" = fuse2fs ] && ! command -v fuse2fs >/dev/null; then
			say "skipping fuse2fs: not installed (apt-get install fuse2fs)"
			continue
		fi
		;;
	*) echo "$0: unknown contender $c (kernel, ext4go, fuse2fs)" >&2; exit 2 ;;
	esac
	run+=("$c")
done
[ ${#run[@]} -gt 0 ] || { echo "$0: no contender can run" >&2; exit 1; }

# The trees: present, and small enough for the image (du's blocks of the
# host filesystem stand in for what the tree takes; 70% of the image at most).
case $SIZE in
*[kK]) size_k=${SIZE%[kK]} ;;
*[mM]) size_k=$((${SIZE%[mM]} * 1024)) ;;
*[gG]) size_k=$((${SIZE%[gG]} * 1024 * 1024)) ;;
*[0-9]) size_k=$((SIZE / 1024)) ;;
*) echo "$0: SIZE=$SIZE: a number with K, M or G" >&2; exit 2 ;;
esac
use=()
for t in "${trees[@]}"; do
	[ -d "$t" ] || { say "skipping $t: not a directory"; continue; }
	k=$(du -sk "$t" | cut -f1)
	if [ "$k" -gt $((size_k * 7 / 10)) ]; then
		say "skipping $t: ${k} KiB does not fit a $SIZE image"
		continue
	fi
	use+=("$t")
done
[ ${#use[@]} -gt 0 ] || { echo "$0: no tree to untar" >&2; exit 1; }

if [ -z "${EXT4GO:-}" ]; then
	EXT4GO=$work/ext4go
	say "building ./cmd/ext4go"
	(cd "$(dirname "$0")/.." && go build -o "$EXT4GO" ./cmd/ext4go)
fi
[ -x "$EXT4GO" ] || { echo "$0: EXT4GO=$EXT4GO is not an executable" >&2; exit 2; }
ext4go_version=$("$EXT4GO" --version 2>/dev/null) || ext4go_version="?"
ext4go_version=${ext4go_version%%$'\n'*}

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

# waitmounted PID: until MNT is a FUSE mount, or the daemon is gone.
waitmounted() {
	for _ in $(seq 300); do
		case $(findmnt -n -o FSTYPE --mountpoint "$mnt" 2>/dev/null) in fuse*) return 0 ;; esac
		kill -0 "$1" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

mountit() { # CONTENDER
	case $1 in
	kernel)
		loop=$(losetup --find --show "$img")
		mount -t ext4 "$loop" "$mnt"
		;;
	ext4go)
		# In the foreground, in the background here: the script knows the
		# daemon's pid and so can wait for it (and stop it on failure).
		"$EXT4GO" mount -f ${EXT4GO_MOUNT_OPTS:+-o "$EXT4GO_MOUNT_OPTS"} "$img" "$mnt" >"$work/daemon.log" 2>&1 &
		daemon=$!
		waitmounted "$daemon" || { cat "$work/daemon.log" >&2; return 1; }
		;;
	fuse2fs)
		fuse2fs "$img" "$mnt" -f >"$work/daemon.log" 2>&1 &
		daemon=$!
		waitmounted "$daemon" || { cat "$work/daemon.log" >&2; return 1; }
		;;
	esac
}

umountit() { # CONTENDER
	case $1 in
	kernel)
		umount "$mnt"
		losetup -d "$loop"
		loop=
		;;
	ext4go)
		# ext4go umount returns once the daemon has closed the image.
		"$EXT4GO" umount -i "$img" "$mnt"
		wait "$daemon" || { say "ext4go mount exited with status $?"; cat "$work/daemon.log" >&2; }
		daemon=
		;;
	fuse2fs)
		umount "$mnt"
		wait "$daemon" || { say "fuse2fs exited with status $?"; cat "$work/daemon.log" >&2; }
		daemon=
		;;
	esac
}

abandon() { # after a failed mount: nothing left behind for the next run
	umount "$mnt" 2>/dev/null || true
	[ -z "$daemon" ] || { kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null; daemon=; } || true
	[ -z "$loop" ] || { losetup -d "$loop"; loop=; } || true
}

# onerun BS TREE CONTENDER N: a fresh image, the untar, the checks; one row.
onerun() {
	local bs=$1 t=$2 c=$3 n=$4 untar=- umnt=- pct= count= groups= ngroups= fsck=FAIL st=0 t0
	rm -f "$img"
	truncate -s "$SIZE" "$img"
	local ext=$MKFS_EXTENDED seeded=()
	if [ "$SEED" = 1 ]; then
		local id
		id=$(printf 'e4e4e4e4-0000-4000-8000-%012d' "$n")
		ext=${ext:+$ext,}hash_seed=$id
		seeded=(-U "$id")
	fi
	# shellcheck disable=SC2086 # MKFS_OPTS is a list of options
	mke2fs -q -F -t ext4 -b "$bs" ${ext:+-E "$ext"} "${seeded[@]}" $MKFS_OPTS "$img"
	if mountit "$c"; then
		t0=$(now)
		if tar -C "$t" -cf - . | tar -C "$mnt" -xf -; then
			untar=$(since "$t0")
		else
			say "untar into $c failed"
			failed=1
		fi
		t0=$(now)
		umountit "$c"
		umnt=$(since "$t0")
	else
		say "mounting with $c failed"
		failed=1
		abandon
	fi
	e2fsck -fnv "$img" >"$work/fsck.out" 2>&1 || st=$?
	if [ "$st" = 0 ]; then
		fsck=ok
	else
		fsck="FAIL($st)"
		failed=1
		say "e2fsck -fnv exited with $st after $c (bs $bs, $t, run $n):"
		head -40 "$work/fsck.out" >&2
	fi
	if [ "$untar" = - ]; then # nothing (or not all) written: no figures
		rowout
		return
	fi
	# "      12 non-contiguous files (0.1%)", "1 non-contiguous file (0.0%)"
	read -r count pct < <(sed -n 's/^ *\([0-9]*\) non-contiguous files\{0,1\} (\([0-9.]*\)%).*/\1 \2/p' "$work/fsck.out") || true
	# The summary's groups_with_data and groups (frag --json ends with it).
	if "$EXT4GO" frag --json "$img" >"$work/frag.json" 2>"$work/frag.err"; then
		read -r groups ngroups < <(sed 's/.*"summary":{//' "$work/frag.json" |
			tr ',' '\n' | sed -n 's/^"\(groups_with_data\|groups\)":\([0-9]*\).*/\1 \2/p' |
			awk '{ v[$1] = $2 } END { print v["groups_with_data"], v["groups"] }') || true
	else
		say "ext4go frag failed: $(head -3 "$work/frag.err")"
	fi
	rowout
}

rowout() { # onerun's row, to the table's file and as JSON
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$bs" "$c" "$n" "${pct:--}" "${count:--}" \
		"${groups:--}" "${ngroups:--}" "$fsck" "$untar" "$umnt" >>"$rows"
	printf '{"tree":"%s","block_size":%s,"contender":"%s","run":%s,"non_contiguous_percent":%s,"non_contiguous_files":%s,"groups_with_data":%s,"groups":%s,"e2fsck":"%s","untar_seconds":%s,"umount_seconds":%s}\n' \
		"$t" "$bs" "$c" "$n" "${pct:-null}" "${count:-null}" "${groups:-null}" "${ngroups:-null}" "$fsck" \
		"${untar/#-/null}" "${umnt/#-/null}" >&3
}

rows=$work/rows # tree bs contender run pct count groups ngroups fsck untar umount, tab-separated
: >"$rows"
failed=0
for t in "${use[@]}"; do
	# Warm the page cache so the first contender does not also pay for
	# reading the tree off the disk.
	tar -C "$t" -cf - . | cat >/dev/null
done
say "$ext4go_version ($EXT4GO); image $SIZE; mke2fs -t ext4 -E $MKFS_EXTENDED $MKFS_OPTS (seeded: $SEED); contenders: ${run[*]}; $REPEAT run(s) each"
for bs in $BLOCK_SIZES; do
	for t in "${use[@]}"; do
		for n in $(seq "$REPEAT"); do
			for c in "${run[@]}"; do
				say "bs $bs, $t, $c, run $n"
				onerun "$bs" "$t" "$c" "$n"
			done
		done
	done
done

echo
echo "ext4go: $ext4go_version${EXT4GO_MOUNT_OPTS:+, mounted -o $EXT4GO_MOUNT_OPTS}; mke2fs -t ext4 -b BS -E $MKFS_EXTENDED $MKFS_OPTS, UUID and hash seed $([ "$SEED" = 1 ] && echo "the same for every contender in a run" || echo random)"
for bs in $BLOCK_SIZES; do
	echo "== block size $bs, image $SIZE =="
	awk -F '\t' -v bs="$bs" -v repeat="$REPEAT" '
	$2 != bs { next }
	{
		if (!(($1) in seen)) { seen[$1] = 1; trees[++nt] = $1 }
		if (!(($3) in cseen)) { cseen[$3] = 1; cons[++nc] = $3 }
		if (!hdr++) printf "%-22s %-8s %3s %9s %6s %11s %-8s %8s %9s\n", "tree", "contender", "run", "noncontig", "files", "groups", "e2fsck", "untar_s", "umount_s"
		printf "%-22s %-8s %3s %8s%% %6s %11s %-8s %8s %9s\n", $1, $3, $4, $5, $6, $7 "/" $8, $9, $10, $11
		k = $1 SUBSEP $3
		if ($5 != "-") { sp[k] += $5; np[k]++ }
		if ($7 != "-") { sg[k] += $7; ng[k]++ }
		if ($10 != "-") { su[k] += $10; nu[k]++ }
	}
	END {
		if (repeat > 1) {
			print "  means:"
			for (i = 1; i <= nt; i++) for (j = 1; j <= nc; j++) {
				k = trees[i] SUBSEP cons[j]
				if (!np[k]) continue
				printf "  %-20s %-8s %8.2f%% non-contiguous, %6.1f groups with data, %7.2f s untar\n", trees[i], cons[j], sp[k] / np[k], ng[k] ? sg[k] / ng[k] : 0, nu[k] ? su[k] / nu[k] : 0
			}
		}
		# Differences to the kernel (means over the runs): percentage points, groups.
		for (i = 1; i <= nt; i++) {
			kk = trees[i] SUBSEP "kernel"
			if (!np[kk]) continue
			for (j = 1; j <= nc; j++) {
				k = trees[i] SUBSEP cons[j]
				if (cons[j] == "kernel" || !np[k]) continue
				gd = (ng[k] && ng[kk]) ? sprintf("%+g", sg[k] / ng[k] - sg[kk] / ng[kk]) : "?"
				printf "  %-20s %-8s - kernel: %+6.1f pp non-contiguous, %s groups with data\n", trees[i], cons[j], sp[k] / np[k] - sp[kk] / np[kk], gd
			}
		}
	}' "$rows"
done
if [ "$failed" != 0 ]; then
	echo "FAIL: an e2fsck or a run failed (see above)"
	exit 1
fi
