#!/usr/bin/env python3
"""The host tree of scripts/cross-test.sh's CLI round trip, and its manifest.

crosstree.py make DIR      make a tree with what mkfs -d and get must keep:
                           files around the block sizes, a sparse file, hard
                           links, symlinks, a FIFO, device nodes (numbers
                           past 16 bits), owners past 2^31, setuid and sticky
                           modes, user.* xattrs, times before 1970 and past
                           2038 and 2106, nanoseconds
crosstree.py manifest DIR  print one line per entry below DIR (lost+found
                           left out): path, type, mode, owner, size, mtime
                           in nanoseconds, hard-link group, target, device
                           number, SHA-256 of the data, xattrs; sorted
"""
import hashlib, os, stat, sys

def make(root):
    os.makedirs(root)
    def write(rel, data, mode=0o644):
        p = os.path.join(root, rel)
        with open(p, "wb") as f:
            f.write(data)
        os.chmod(p, mode)
        return p
    os.makedirs(os.path.join(root, "dir/sub/deep"))
    for n in (0, 1, 59, 60, 61, 1023, 1024, 1025, 4095, 4096, 4097, 65536, 1 << 20):
        write("dir/size-%d" % n, bytes((i * 7 + n) & 0xFF for i in range(n)))
    sparse = write("dir/sparse", b"head")
    with open(sparse, "r+b") as f:
        f.seek(3 << 20)
        f.write(b"middle")
        f.truncate(8 << 20)
    write("dir/sub/setuid", b"#!/bin/sh\n", 0o4755)
    os.chmod(os.path.join(root, "dir/sub"), 0o1777)
    write("dir/linked", b"one inode, three names")
    os.link(os.path.join(root, "dir/linked"), os.path.join(root, "dir/sub/linked2"))
    os.link(os.path.join(root, "dir/linked"), os.path.join(root, "linked3"))
    os.symlink("../size-1", os.path.join(root, "dir/sub/fast-link"))
    os.symlink("x" * 200 + "/target", os.path.join(root, "slow-link"))
    os.mkfifo(os.path.join(root, "fifo"), 0o600)
    os.mknod(os.path.join(root, "chr"), stat.S_IFCHR | 0o620, os.makedev(4095, 524287))
    os.mknod(os.path.join(root, "blk"), stat.S_IFBLK | 0o660, os.makedev(259, 70000))
    owned = write("owned", b"owners past 2^31", 0o640)
    os.chown(owned, 1 << 31, (1 << 32) - 2)
    os.chown(os.path.join(root, "dir/size-0"), 1000, 100)
    x = write("xattrs", b"with attributes")
    os.setxattr(x, "user.small", b"v")
    os.setxattr(x, "user.large", bytes(range(256)) * 8)
    os.setxattr(os.path.join(root, "dir"), "user.dir", b"on a directory")
    times = {"dir/size-1": -86400 * 365 * 10 * 10**9 + 123,  # 1960
             "dir/size-60": (1 << 31) * 10**9 + 5 * 10**8,  # 2038, past int32
             "dir/size-4096": (1 << 32) * 10**9 + 999999999,  # 2106, past uint32
             "xattrs": 1700000000 * 10**9 + 1}
    for rel, ns in times.items():
        os.utime(os.path.join(root, rel), ns=(ns, ns))
    # Directories last, deepest first: filling them moved their times.
    for dp, dns, _ in sorted(os.walk(root), key=lambda w: -w[0].count(os.sep)):
        if dp != root:
            os.utime(dp, ns=(1600000000 * 10**9, 1600000000 * 10**9))

def manifest(root):
    # Hard-link groups by the least of their paths: walks differ in order.
    groups = {}
    for dp, dns, fns in os.walk(root):
        for name in fns:
            p = os.path.join(dp, name)
            st = os.lstat(p)
            if st.st_nlink > 1:
                rel = os.path.relpath(p, root)
                key = (st.st_dev, st.st_ino)
                groups[key] = min(groups.get(key, rel), rel)
    lines = []
    for dp, dns, fns in os.walk(root):
        if dp == root and "lost+found" in dns:
            dns.remove("lost+found")
        for name in dns + fns:
            p = os.path.join(dp, name)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            kind = stat.S_IFMT(st.st_mode)
            extra = ""
            if stat.S_ISLNK(kind):
                extra = "-> " + os.readlink(p)
            elif stat.S_ISCHR(kind) or stat.S_ISBLK(kind):
                extra = "dev %d:%d" % (os.major(st.st_rdev), os.minor(st.st_rdev))
            elif stat.S_ISREG(kind):
                with open(p, "rb") as f:
                    extra = "sha256 " + hashlib.sha256(f.read()).hexdigest()
                if st.st_blocks * 512 < st.st_size:
                    extra += " sparse"
            link = ""
            if not stat.S_ISDIR(kind) and st.st_nlink > 1:
                link = "links %d group %s" % (st.st_nlink, groups[(st.st_dev, st.st_ino)])
            xattrs = ""
            if not stat.S_ISLNK(kind):
                xattrs = " ".join("%s=%s" % (n, hashlib.sha256(os.getxattr(p, n)).hexdigest()[:16])
                                  for n in sorted(os.listxattr(p)) if n.startswith("user."))
            size = "" if stat.S_ISDIR(kind) else "size %d" % st.st_size
            mtime = "" if stat.S_ISLNK(kind) else "mtime %d" % st.st_mtime_ns
            lines.append("%s %o uid %d gid %d %s %s %s %s %s" % (rel, st.st_mode, st.st_uid, st.st_gid,
                                                                size, mtime, link, extra, xattrs))
    print("\n".join(sorted(lines)))

if __name__ == "__main__":
    {"make": make, "manifest": manifest}[sys.argv[1]](sys.argv[2])
