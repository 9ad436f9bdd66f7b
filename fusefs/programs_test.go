//go:build linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)

package fusefs_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
	"github.com/ext4go/ext4go/internal/testutil/ext4meta"
)

// run runs a program (its output kept for the failure message) in dir
// with env added to the test's own.
//
// The program starts from sh, which changes to dir and execs it: this
// process serves the mount, and Go starts a program with vfork, whose
// parent thread stops until the child has exec'd; a garbage collection
// stopping the world then waits for that thread, while a child that
// touches the mount (a chdir into it, an executable on it) waits for this
// process to answer (it deadlocked CI once). sh's chdir and exec happen
// in a process that is not this one.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	if dir == "" {
		dir = "."
	}
	cmd := exec.Command("sh", append([]string{"-c", `cd "$1" && shift && exec "$@"`, "sh", dir, name}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, lastLines(out, 40))
	}
	return string(out)
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"..."}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

func requirePrograms(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			t.Skipf("no %s on this machine (%v)", n, err)
		}
	}
}

// TestRealPrograms: the programs people run on a disk, on an ext4go
// mount: tar x of the Go tree and diff -r against it; git init, add,
// commit and fsck; go build of a small module (its build cache on the
// mount too) and a run of what it built; fio writing four jobs of random
// 4k blocks with crc32c verification. Then the unmount, e2fsck -fn
// clean, and the kernel's mount of the image: diff -r again, git fsck
// again, the binary runs, fio verifies every block it wrote, and
// ext4go's read of the image equals the kernel's.
func TestRealPrograms(t *testing.T) {
	requireFUSE(t)
	testutil.RequireMount(t)
	requirePrograms(t, "tar", "diff", "git", "go", "fio")
	goroot := run(t, "", nil, "go", "env", "GOROOT")
	goroot = strings.TrimSpace(goroot)
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 2<<30, "-t", "ext4")
	dir, fsys, srv := mount(t, image)

	// tar x of the Go tree.
	src := filepath.Dir(goroot)
	tarCmd := "tar -C " + src + " -cf - " + filepath.Base(goroot) + " | tar -C " + dir + " -xpf -"
	run(t, "", nil, "sh", "-c", tarCmd)
	untarred := filepath.Join(dir, filepath.Base(goroot))
	run(t, "", nil, "diff", "-r", "--no-dereference", goroot, untarred)

	// git.
	repo := filepath.Join(dir, "repo")
	if err := os.Mkdir(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) string {
		return run(t, repo, []string{"GIT_CONFIG_NOSYSTEM=1", "HOME=" + repo}, "git",
			append([]string{"-c", "user.name=ext4go", "-c", "user.email=ext4go@example.com", "-c", "safe.directory=*"}, args...)...)
	}
	git("init", "-q")
	run(t, "", nil, "cp", "-a", filepath.Join(goroot, "src", "net", "http"), filepath.Join(repo, "http"))
	git("add", ".")
	git("commit", "-q", "-m", "first")
	if err := os.WriteFile(filepath.Join(repo, "http", "NEW"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(repo, "http", "doc.go")); err != nil {
		t.Fatal(err)
	}
	git("add", "-A")
	git("commit", "-q", "-m", "second")
	git("gc", "-q")
	git("fsck", "--full", "--strict")
	if st := git("status", "--porcelain"); st != "" {
		t.Errorf("git status after commit: %q", st)
	}

	// go build, its cache on the mount.
	mod := filepath.Join(dir, "mod")
	if err := os.Mkdir(mod, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"go.mod":  "module example.com/hello\n\ngo 1.22\n",
		"main.go": "package main\n\nimport (\n\t\"crypto/sha256\"\n\t\"fmt\"\n\t\"os\"\n)\n\nfunc main() {\n\tfmt.Printf(\"%x\\n\", sha256.Sum256([]byte(os.Args[1])))\n}\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(mod, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goEnv := []string{"GOCACHE=" + filepath.Join(dir, "gocache"), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOTOOLCHAIN=local"}
	run(t, mod, goEnv, "go", "build", "-o", "hello", ".")
	const wantHello = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824\n"
	if got := run(t, mod, nil, "./hello", "hello"); got != wantHello {
		t.Errorf("the built program printed %q", got)
	}

	// fio with verification.
	fioDir := filepath.Join(dir, "fio")
	if err := os.Mkdir(fioDir, 0o755); err != nil {
		t.Fatal(err)
	}
	fioArgs := func(dir string) []string {
		return []string{"--name=verify", "--directory=" + dir, "--rw=randwrite", "--bs=4k", "--size=16m",
			"--numjobs=4", "--ioengine=psync", "--verify=crc32c", "--verify_fatal=1", "--group_reporting"}
	}
	// fio leaves its verify state files in its working directory.
	fioState := t.TempDir()
	run(t, fioState, nil, "fio", append(fioArgs(fioDir), "--fsync_on_close=1")...)

	unmount(t, srv, fsys)
	testutil.RequireFsckClean(t, image)

	// The kernel reads what the programs wrote.
	kmp := testutil.Mount(t, image, true)
	run(t, "", nil, "diff", "-r", "--no-dereference", goroot, filepath.Join(kmp, filepath.Base(goroot)))
	run(t, filepath.Join(kmp, "repo"), []string{"GIT_CONFIG_NOSYSTEM=1", "HOME=" + t.TempDir()}, "git",
		"-c", "safe.directory=*", "fsck", "--full", "--strict")
	if got := run(t, "", nil, filepath.Join(kmp, "mod", "hello"), "hello"); got != wantHello {
		t.Errorf("the built program, run from the kernel's mount, printed %q", got)
	}
	ours, err := ext4go.Open(image, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := testutil.MountCompareOptions()
	opts.Meta = ext4meta.Meta
	opts.Checks |= testutil.CheckNlink | testutil.CheckOwner | testutil.CheckSpecialBits
	testutil.CompareFS(t, ours, kmp, opts)
	ours.Close()
	testutil.Unmount(t, kmp)
	// fio opens its files to write even to verify them only.
	kmp = testutil.Mount(t, image, false)
	run(t, fioState, nil, "fio", append(fioArgs(filepath.Join(kmp, "fio")), "--verify_only")...)
	testutil.Unmount(t, kmp)
	testutil.RequireFsckClean(t, image)
}
