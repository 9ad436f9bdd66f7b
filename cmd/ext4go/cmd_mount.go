//go:build (linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)) || darwin || freebsd

package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/fusefs"
)

// mountConfig is a parsed -o list.
type mountConfig struct {
	fs     ext4go.Options
	fuse   fusefs.Options
	kernel []string // passed to the kernel's mount as they are
}

// parseMountOptions reads mount(8)-style options. Options mount(8) and
// fstab add that mean nothing to a FUSE server are accepted and dropped;
// an unknown one is an error naming it.
func parseMountOptions(list []string) (*mountConfig, error) {
	c := &mountConfig{fuse: fusefs.Options{UID: -1, GID: -1}}
	c.fs.Writable = true
	c.fs.Atime = ext4go.AtimeRelative // mount(8)'s default
	for _, o := range list {
		key, val, hasVal := strings.Cut(o, "=")
		num := func() (int, error) {
			n, err := strconv.Atoi(val)
			if !hasVal || err != nil || n < 0 {
				return 0, usagef("mount option %s wants a number, not %q", key, val)
			}
			return n, nil
		}
		switch key {
		case "":
		case "ro":
			c.fs.Writable, c.fuse.ReadOnly = false, true
		case "rw":
			c.fs.Writable, c.fuse.ReadOnly = true, false
		case "allow_other":
			c.fuse.AllowOther = true
		case "default_permissions":
			c.fuse.DefaultPermissions = true
		case "uid", "gid":
			n, err := num()
			if err != nil {
				return nil, err
			}
			if key == "uid" {
				c.fuse.UID = n
			} else {
				c.fuse.GID = n
			}
		case "commit":
			n, err := num()
			if err != nil {
				return nil, err
			}
			c.fs.CommitInterval = time.Duration(n) * time.Second
			if n == 0 {
				c.fs.CommitInterval = 0 // the default, as the kernel's commit=0
			}
		case "noatime":
			c.fs.Atime = ext4go.AtimeNever
		case "relatime":
			c.fs.Atime = ext4go.AtimeRelative
		case "strictatime", "norelatime":
			c.fs.Atime = ext4go.AtimeStrict
		case "lazytime":
			// Time-only changes wait in memory (Options.Lazytime).
			c.fs.Lazytime = true
		case "nolazytime":
			c.fs.Lazytime = false
		case "delalloc":
			// Blocks are chosen when the data goes to disk (the default).
			c.fs.NoDelalloc = false
		case "nodelalloc":
			// Blocks are allocated at each write (Options.NoDelalloc).
			c.fs.NoDelalloc = true
		case "errors":
			// What a change that finds corruption does after recording
			// it in the superblock (Options.Errors; default s_errors).
			m, err := ext4go.ParseErrorsMode(val)
			if err != nil || !hasVal {
				return nil, usagef("mount option errors wants continue, remount-ro or panic, not %q", val)
			}
			c.fs.Errors = m
		case "nodiratime", "diratime":
			// Accepted: directories' access times follow the files'.
		case "fsname":
			c.fuse.FsName = val
		case "subtype":
			// libfuse's subtype=: the type is fuse.NAME; empty, plain
			// fuse. Only ext4go's own name or none.
			switch val {
			case "ext4go":
				c.fuse.NoSubtype = false
			case "":
				c.fuse.NoSubtype = true
			default:
				return nil, usagef("mount option subtype takes ext4go or nothing (the type is then fuse), not %q", val)
			}
		case "debug":
			c.fuse.Debug = true
		case "writeback_cache":
			c.fuse.WritebackCache = true
		case "no_writeback_cache":
			c.fuse.WritebackCache = false
		case "max_readahead":
			n, err := num()
			if err != nil {
				return nil, err
			}
			if n == 0 {
				return nil, usagef("mount option max_readahead wants a number of bytes above 0")
			}
			c.fuse.MaxReadahead = n
		case "cached_write_only":
			c.fuse.CachedWriteOnly = true
		case "uring":
			c.fuse.Uring = true
		case "no_uring":
			c.fuse.Uring = false
		case "uring_idle":
			c.fuse.UringIdle = true
		case "no_uring_idle":
			c.fuse.UringIdle = false
		case "readdirplus":
			c.fuse.NoReaddirPlus = false
		case "no_readdirplus":
			c.fuse.NoReaddirPlus = true
		case "suid", "nosuid", "dev", "nodev", "exec", "noexec", "sync", "async", "dirsync":
			c.kernel = append(c.kernel, key)
		case "defaults", "auto", "noauto", "nofail", "_netdev", "user", "users", "nouser", "owner", "group":
		default:
			switch key {
			case "context", "fscontext", "defcontext", "rootcontext", "source", "subtype":
				continue // SELinux labels, and what mount(8) says of the source and type
			}
			if strings.HasPrefix(key, "x-") {
				continue
			}
			return nil, usagef("unknown mount option %q", o)
		}
	}
	return c, nil
}

// The daemon tells the command that started it that the mount is live
// (a line "ok") or why it is not, through the pipe named here.
const mountReadyEnv = "EXT4GO_MOUNT_READY_FD"

// The mount daemon's soft heap limit (unless GOMEMLIMIT is set) and its
// metadata cache.
const (
	mountMemoryLimit   = 224 << 20
	mountMetadataCache = 16 << 20
)

// mount serves the image on dir: runMount parsed the command line (args,
// which a daemon gets again), fg and olist.
func mount(e *env, args []string, image, dir string, fg bool, olist []string) error {
	cfg, err := parseMountOptions(olist)
	if err != nil {
		return err
	}
	if cfg.fuse.FsName == "" {
		// The image's absolute path, which "ext4go umount" finds in
		// /proc/self/mountinfo to wait for the daemon to close it.
		cfg.fuse.FsName = image
		if abs, err := filepath.Abs(image); err == nil {
			cfg.fuse.FsName = abs
		}
	}
	cfg.fuse.ExtraOptions = cfg.kernel
	if fi, err := os.Stat(dir); err != nil {
		return err
	} else if !fi.IsDir() {
		return fmt.Errorf("%s: not a directory", dir)
	}
	if !fg {
		return startMountDaemon(e, args)
	}
	var ready *os.File
	if fd := os.Getenv(mountReadyEnv); fd != "" {
		n, _ := strconv.Atoi(fd)
		ready = os.NewFile(uintptr(n), "ready")
		os.Unsetenv(mountReadyEnv)
	}
	quiet := func() {
		if devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0); err == nil {
			unix.Dup2(int(devnull.Fd()), 1)
			unix.Dup2(int(devnull.Fd()), 2)
			devnull.Close()
		}
	}
	fail := func(err error) error {
		if ready != nil {
			// The starting command reports it; said once is enough.
			fmt.Fprintln(ready, err)
			ready.Close()
			quiet()
		}
		return err
	}
	// Signals are taken from before the mount: one that lands while it
	// comes up unmounts it as soon as it is live.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	if os.Getenv("GOGC") == "" {
		// The server's live heap is small (caches are bounded) while it
		// allocates a little per request: the default target collects
		// every few thousand requests, 10-20% of its CPU on an untar.
		// Four times the live heap halves that at a few MiB more memory.
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		// A soft limit on the heap: the collector runs sooner as it
		// nears it and gives freed pages back to the system, so memory
		// the kernel's FORGETs (drop_caches, memory pressure) release is
		// returned, and GOGC's headroom does not multiply a large live
		// heap (a listing of a directory of 200,000 files). GOMEMLIMIT
		// sets another.
		debug.SetMemoryLimit(mountMemoryLimit)
	}
	// Memory the kernel's FORGETs free goes back to the system.
	cfg.fuse.ReleaseMemory = true
	if cfg.fs.MetadataCache == 0 {
		// The host caches the image's pages already.
		cfg.fs.MetadataCache = mountMetadataCache
	}
	// Errors a change finds are logged as the kernel logs them, on
	// stderr in the foreground and to syslog once detached (kernel:
	// __ext4_error_inode's printk).
	logErr := newMountLog(e.stderr)
	device := cfg.fuse.FsName
	cfg.fs.OnError = func(fe *ext4go.FSError) {
		logErr.print(fe.KernelStyle(device, "ext4go"))
		if fe.ReadOnly {
			// kernel: ext4_handle_error
			logErr.print(fmt.Sprintf("EXT4-fs (%s): Remounting filesystem read-only", device))
		}
	}
	fsys, err := ext4go.Open(image, &cfg.fs)
	if err != nil {
		return fail(err)
	}
	if in := fsys.Info(); strings.Contains(in.State, "with errors") {
		// kernel: ext4_setup_super's warning
		logErr.print(fmt.Sprintf("EXT4-fs (%s): warning: mounting fs with errors, running e2fsck is recommended", device))
	}
	stopProfile := startMountProfile()
	srv, err := fusefs.Mount(fsys, dir, &cfg.fuse)
	if err != nil {
		stopProfile()
		fsys.Close()
		return fail(err)
	}
	if ready != nil {
		fmt.Fprintln(ready, "ok")
		ready.Close()
		// Detached now: the starting command has exited, and with it
		// the terminal its stderr was for.
		quiet()
		logErr.detach()
	}
	go func() {
		for range sig {
			// An unmount that fails (the mount busy) is tried again at
			// the next signal; fusermount -u works too.
			if err := srv.Unmount(); err != nil {
				fmt.Fprintf(e.stderr, "ext4go mount: unmount: %v\n", err)
			}
		}
	}()
	srv.Wait()
	stopProfile()
	signal.Stop(sig)
	if err := fsys.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", image, err)
	}
	return nil
}

// startMountDaemon runs the mount again in the foreground as a detached
// process, and returns once it reports the mount live (or fails with its
// error).
func startMountDaemon(e *env, args []string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	cmd := exec.Command(exe, append([]string{"mount", "-f"}, args...)...)
	cmd.Env = append(os.Environ(), mountReadyEnv+"=3")
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0); err == nil {
		// stderr stays ours until the mount is live, so that what
		// fusermount says on the way reaches the user.
		cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, devnull, e.stderr
		defer devnull.Close()
	}
	if err := cmd.Start(); err != nil {
		w.Close()
		return err
	}
	w.Close()
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	line = strings.TrimSpace(line)
	if line == "ok" {
		cmd.Process.Release()
		return nil
	}
	cmd.Wait()
	if line == "" {
		line = "the mount daemon exited before the mount was live"
	}
	return errors.New(line)
}
