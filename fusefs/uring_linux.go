//go:build amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le

package fusefs

// FUSE over io_uring (Linux 6.14+, module parameter fuse.enable_uring):
// requests reach the server through ring entries instead of read(2) and
// write(2) on /dev/fuse. The kernel has one queue per possible CPU and
// hands a request to an entry of the queue of the CPU its caller runs on;
// the entry's thread is woken by task work on that CPU, answers in the
// entry's buffers and commits the answer and fetches the next request in
// one io_uring_enter. A call costs about 14 µs here against 22-24 µs for
// the classic loop (research/fuse-uring).
//
// Each entry has a thread of its own, locked to its goroutine and pinned
// to its queue's CPU, with a ring of its own: a request that waits (an
// fsync waiting for a commit) holds its entry only, and the queue's other
// entries serve the other callers on that CPU (up to 8 entries for each
// online CPU, 1 for CPUs possible but offline: the kernel wants an entry
// in every queue). With Options.UringIdle, while a CPU is idle, the
// threads wait and serve light requests under SCHED_IDLE, so that the
// caller a thread wakes stays on its CPU (uring_sched_linux.go). go-fuse's
// Server still mounts, negotiates INIT, and serves what the kernel sends
// the classic way (FORGET, INTERRUPT); the ring entries' requests go
// through a go-fuse ProtocolServer over the same RawFileSystem. Replies to
// notifications come through the rings too, where that ProtocolServer
// knows no retrieve request: the server must not use InodeRetrieveCache
// (it does not).
//
// Invariants: an entry's buffers are written by the kernel only between
// the submission of its REGISTER or COMMIT_AND_FETCH and the completion
// that hands over a request, and read or written by its thread only
// between that completion and its next submission. A thread exits only
// after the kernel has failed its command (the connection is gone) or
// after it could not set up; the transport's WaitGroup counts threads, and
// the server closes its Files only after every thread has exited (Wait),
// so no request runs on a closed File. A thread that cannot go on (an
// io_uring_enter failing for good) aborts the connection, so that no
// caller waits for an answer that will never come. An INTERRUPT for a
// ring request is dropped: go-fuse's Server does not know the request,
// and the kernel does not find its answer among /dev/fuse's requests
// (rawFS ignores cancellation anyway).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/ext4go/ext4go/internal/mountinfo"
	"github.com/ext4go/ext4go/internal/pad"
)

const (
	uringThreadsPerCPU = 8 // entries (threads) of an online CPU's queue, at most

	ioringSetupSQE128  = 1 << 10
	ioringSetupCQSize  = 1 << 3
	ioringOffSQRing    = 0
	ioringOffCQRing    = 0x8000000
	ioringOffSQEs      = 0x10000000
	ioringEnterGetev   = 1
	ioringOpUringCmd   = 46
	ioringFeatSingleMM = 1

	// kernel: enum fuse_uring_cmd
	fuseUringRegister       = 1
	fuseUringCommitAndFetch = 2

	// kernel: struct fuse_uring_req_header: in_out[128] (fuse_in_header,
	// then fuse_out_header), op_in[128] (the request's first argument),
	// ring_ent_in_out (flags, commit_id, payload_sz).
	uringHeaderSize = 288
	uringOpIn       = 128
	uringEntInOut   = 256
	inHeaderSize    = 40
	outHeaderSize   = 16
	opIoctl         = 39
)

// uringParam is the module parameter that lets the kernel offer the
// transport.
const uringParam = "/sys/module/fuse/parameters/enable_uring"

// uringAvailable says whether the kernel offers the transport.
func uringAvailable() error {
	b, err := os.ReadFile(uringParam)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return ErrNoUring
		}
		return fmt.Errorf("fusefs: %w", err)
	}
	if strings.TrimSpace(string(b)) != "Y" {
		return ErrNoUring
	}
	if b, err := os.ReadFile("/proc/sys/kernel/io_uring_disabled"); err == nil && strings.TrimSpace(string(b)) != "0" {
		return fmt.Errorf("fusefs: io_uring is disabled (kernel.io_uring_disabled = %s)", strings.TrimSpace(string(b)))
	}
	return nil
}

// uringSetupFault, when set (by tests), fails the setup of the entry
// threads for which it returns an error.
var uringSetupFault func(thread int) error

// uringServeHook, when set (by tests), is called on an entry's thread
// before each request is handled, with the request's opcode and payload
// size.
var uringServeHook func(op uint32, payload int)

// uringTransport serves the ring entries of one mount.
type uringTransport struct {
	ps      *fuse.ProtocolServer
	devFd   int         // our own dup of the server's /dev/fuse
	dir     string      // the mount point, to find the connection to abort
	payload int         // bytes of each entry's payload buffer
	idle    bool        // threads may wait and serve light requests under SCHED_IDLE (uring_sched_linux.go)
	idleNow atomic.Bool // and should now: some CPU has been idle
	log     *log.Logger
	threads sync.WaitGroup // the entry threads and the idle watcher: Wait waits for them
	serving sync.WaitGroup // the entry threads
	// served counts the requests each thread answered, each count on a
	// line of its own: threads on different CPUs never share one.
	served []servedCount
}

type servedCount struct {
	n atomic.Int64
	_ [pad.Line - 8]byte
}

// startUring sets the rings of srv's connection up: called once INIT has
// been answered (the kernel refuses entries before), before any other
// request is served. Requests wait in the kernel until every queue has
// an entry.
func startUring(srv *fuse.Server, raw fuse.RawFileSystem, mo *fuse.MountOptions, dir string, idle bool) (*uringTransport, error) {
	ks := srv.KernelSettings()
	if ks.Flags64()&fuse.CAP_OVER_IO_URING == 0 {
		return nil, ErrNoUring
	}
	fd, err := serverDevFd(srv)
	if err != nil {
		return nil, err
	}
	t := &uringTransport{ps: fuse.NewProtocolServer(raw, mo), devFd: fd, dir: dir, log: mo.Logger, idle: idle && idleReversible()}
	t.idleNow.Store(t.idle)
	if t.log == nil {
		t.log = log.Default()
	}
	// kernel: fuse_uring_create: the payload holds the largest write
	// or read, at least FUSE_MIN_READ_BUFFER.
	t.payload = max(8192, ((mo.MaxWrite-1)/os.Getpagesize()+1)*os.Getpagesize())
	if err := t.init(ks); err != nil {
		unix.Close(fd)
		return nil, err
	}
	queues, err := cpuList("possible")
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	online, err := cpuList("online")
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	// Enough entries that a few waiting requests do not hold a CPU's
	// callers up, without thousands of threads on a large machine.
	perCPU := max(2, min(uringThreadsPerCPU, 64/max(1, len(online))))
	t.served = make([]servedCount, len(queues)*perCPU)
	ready := make(chan error)
	n := 0
	// kernel: the rings have num_possible_cpus() queues, and a caller
	// goes to the queue of the CPU it runs on.
	for q := range len(queues) {
		threads := 1
		if slices.Contains(online, q) {
			threads = perCPU
		}
		for range threads {
			t.threads.Add(1)
			t.serving.Add(1)
			go t.serve(q, n, ready)
			n++
		}
	}
	var first error
	for range n {
		if err := <-ready; err != nil && first == nil {
			first = err
		}
	}
	// The watcher ends once the entry threads have, and Wait waits for
	// it too: nothing of the transport runs after Wait.
	done := make(chan struct{})
	if t.idle && first == nil {
		t.threads.Add(1)
		go func() { defer t.threads.Done(); t.watchIdle(len(online), done) }()
	}
	go func() { t.serving.Wait(); close(done); t.threads.Wait(); unix.Close(fd) }()
	return t, first
}

// init gives the ProtocolServer the INIT the kernel sent, so that it
// parses requests for the protocol version and flags agreed.
func (t *uringTransport) init(ks *fuse.InitIn) error {
	in := make([]byte, unsafe.Sizeof(*ks))
	copy(in, unsafe.Slice((*byte)(unsafe.Pointer(ks)), len(in)))
	binary.LittleEndian.PutUint32(in[0:], uint32(len(in)))
	binary.LittleEndian.PutUint32(in[4:], 26) // FUSE_INIT
	binary.LittleEndian.PutUint64(in[8:], 1)  // unique
	binary.LittleEndian.PutUint64(in[16:], 0) // node
	out := make([]byte, 4096)
	n, st := t.ps.HandleRequest([][]byte{in}, [][]byte{out})
	if !st.Ok() || n < outHeaderSize || binary.LittleEndian.Uint32(out[4:]) != 0 {
		return fmt.Errorf("fusefs: io_uring transport: INIT: %v, error %d", st, int32(binary.LittleEndian.Uint32(out[4:])))
	}
	return nil
}

// serverDevFd returns a dup of go-fuse's /dev/fuse descriptor: go-fuse
// v2.12 exports no accessor (every Uring test fails if that field moves).
func serverDevFd(srv *fuse.Server) (int, error) {
	v := reflect.ValueOf(srv).Elem().FieldByName("fuseFD")
	if !v.IsValid() || v.Kind() != reflect.Pointer || v.IsNil() {
		return -1, errors.New("fusefs: io_uring transport: go-fuse's Server has no fuseFD")
	}
	f := v.Elem().FieldByName("file")
	if !f.IsValid() || f.Type() != reflect.TypeOf((*os.File)(nil)) {
		return -1, errors.New("fusefs: io_uring transport: go-fuse's fuseFD has no file")
	}
	file := *(**os.File)(unsafe.Pointer(f.UnsafeAddr()))
	rc, err := file.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd, dupErr := -1, error(nil)
	if err := rc.Control(func(raw uintptr) { fd, dupErr = unix.FcntlInt(raw, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return -1, err
	}
	if dupErr != nil {
		return -1, fmt.Errorf("fusefs: io_uring transport: dup /dev/fuse: %w", dupErr)
	}
	return fd, nil
}

// cpuList returns the CPUs of /sys/devices/system/cpu/<which> ("0-3,6").
func cpuList(which string) ([]int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/" + which)
	if err != nil {
		return nil, fmt.Errorf("fusefs: io_uring transport: %w", err)
	}
	var cpus []int
	for _, r := range strings.Split(strings.TrimSpace(string(b)), ",") {
		lo, hi, found := strings.Cut(r, "-")
		a, err1 := strconv.Atoi(lo)
		z := a
		var err2 error
		if found {
			z, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || a < 0 || z < a || z >= 1<<16 {
			return nil, fmt.Errorf("fusefs: io_uring transport: %s CPUs %q", which, b)
		}
		for c := a; c <= z; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// abortConnection aborts the FUSE connection mounted on dir (through the
// fusectl filesystem, without touching the mount itself): every request
// waiting for an answer fails, and so does every ring command. For a
// connection that can no longer be served.
func abortConnection(dir string) error {
	mounts, err := mountinfo.Read()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if m.Point == dir && strings.HasPrefix(m.FSType, "fuse") {
			path := fmt.Sprintf("/sys/fs/fuse/connections/%d/abort", unix.Minor(m.Dev))
			return os.WriteFile(path, []byte("1"), 0)
		}
	}
	return fmt.Errorf("no FUSE mount on %s", dir)
}

// fail ends a thread that cannot serve its entry any more: the
// connection is aborted rather than leave callers waiting.
func (t *uringTransport) fail(qid int, err error) {
	t.log.Printf("fusefs: io_uring queue %d: %v; aborting the connection", qid, err)
	if err := abortConnection(t.dir); err != nil {
		t.log.Printf("fusefs: io_uring: abort: %v", err)
	}
}

// ring is one io_uring instance with SQE128 entries, used by one thread.
type ring struct {
	fd                     int
	sqHead, sqTail, sqMask *uint32
	sqArray                unsafe.Pointer
	sqes                   []byte
	cqHead, cqTail, cqMask *uint32
	cqes                   unsafe.Pointer
	maps                   [][]byte
	pending                uint32
}

type ioUringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  struct {
		head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
		userAddr                                                        uint64
	}
	cqOff struct {
		head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
		userAddr                                                        uint64
	}
}

func newRing(entries uint32) (*ring, error) {
	p := ioUringParams{flags: ioringSetupSQE128 | ioringSetupCQSize, cqEntries: 2 * entries}
	fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if e != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", e)
	}
	r := &ring{fd: int(fd)}
	sqSize := int(p.sqOff.array + p.sqEntries*4)
	cqSize := int(p.cqOff.cqes + p.cqEntries*16)
	if p.features&ioringFeatSingleMM != 0 {
		sqSize = max(sqSize, cqSize)
	}
	mmap := func(off int64, n int) ([]byte, error) {
		b, err := unix.Mmap(r.fd, off, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err == nil {
			r.maps = append(r.maps, b)
		}
		return b, err
	}
	sq, err := mmap(ioringOffSQRing, sqSize)
	if err != nil {
		r.close()
		return nil, fmt.Errorf("io_uring mmap: %w", err)
	}
	cq := sq
	if p.features&ioringFeatSingleMM == 0 {
		if cq, err = mmap(ioringOffCQRing, cqSize); err != nil {
			r.close()
			return nil, fmt.Errorf("io_uring mmap: %w", err)
		}
	}
	if r.sqes, err = mmap(ioringOffSQEs, int(p.sqEntries)*128); err != nil {
		r.close()
		return nil, fmt.Errorf("io_uring mmap: %w", err)
	}
	sb, cb := unsafe.Pointer(&sq[0]), unsafe.Pointer(&cq[0])
	r.sqHead = (*uint32)(unsafe.Add(sb, p.sqOff.head))
	r.sqTail = (*uint32)(unsafe.Add(sb, p.sqOff.tail))
	r.sqMask = (*uint32)(unsafe.Add(sb, p.sqOff.ringMask))
	r.sqArray = unsafe.Add(sb, p.sqOff.array)
	r.cqHead = (*uint32)(unsafe.Add(cb, p.cqOff.head))
	r.cqTail = (*uint32)(unsafe.Add(cb, p.cqOff.tail))
	r.cqMask = (*uint32)(unsafe.Add(cb, p.cqOff.ringMask))
	r.cqes = unsafe.Add(cb, p.cqOff.cqes)
	return r, nil
}

func (r *ring) close() {
	for _, m := range r.maps {
		unix.Munmap(m)
	}
	unix.Close(r.fd)
}

// sqe returns the next submission slot, zeroed.
func (r *ring) sqe() []byte {
	tail := atomic.LoadUint32(r.sqTail)
	idx := tail & *r.sqMask
	s := r.sqes[idx*128 : idx*128+128]
	clear(s)
	*(*uint32)(unsafe.Add(r.sqArray, idx*4)) = idx
	atomic.StoreUint32(r.sqTail, tail+1)
	r.pending++
	return s
}

// enter submits what is pending and waits for wait completions. Errors
// that pass (no memory for now, a signal) are retried.
func (r *ring) enter(wait uint32) error {
	backoff := time.Millisecond
	for {
		n, _, e := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(r.pending), uintptr(wait), ioringEnterGetev, 0, 0)
		if e == 0 {
			r.pending -= min(r.pending, uint32(n))
			if r.pending == 0 {
				return nil
			}
			continue // partly submitted: submit the rest
		}
		switch e {
		case unix.EINTR:
			// Nothing was submitted (else the count is returned).
		case unix.EAGAIN, unix.ENOMEM, unix.EBUSY:
			time.Sleep(backoff)
			backoff = min(2*backoff, 100*time.Millisecond)
		default:
			return e
		}
	}
}

// cqe takes the next completion, if any.
func (r *ring) cqe() (userData uint64, res int32, ok bool) {
	head := atomic.LoadUint32(r.cqHead)
	if head == atomic.LoadUint32(r.cqTail) {
		return 0, 0, false
	}
	c := unsafe.Add(r.cqes, (head&*r.cqMask)*16)
	userData, res = *(*uint64)(c), *(*int32)(unsafe.Add(c, 8))
	atomic.StoreUint32(r.cqHead, head+1)
	return userData, res, true
}

// peek returns the result of the next completion without taking it.
func (r *ring) peek() (res int32, ok bool) {
	head := atomic.LoadUint32(r.cqHead)
	if head == atomic.LoadUint32(r.cqTail) {
		return 0, false
	}
	return *(*int32)(unsafe.Add(r.cqes, (head&*r.cqMask)*16+8)), true
}

// entry is one ring entry's memory, outside the Go heap: the kernel
// writes it while no Go code looks.
type entry struct {
	mem     []byte
	header  []byte // uringHeaderSize
	payload []byte
	iov     []byte // two struct iovec: header, payload
}

func newEntry(payload int) (*entry, error) {
	page := os.Getpagesize()
	mem, err := unix.Mmap(-1, 0, 2*page+payload, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("mmap: %w", err)
	}
	e := &entry{mem: mem, header: mem[:uringHeaderSize], iov: mem[page : page+32], payload: mem[2*page:]}
	le := binary.LittleEndian
	le.PutUint64(e.iov[0:], uint64(uintptr(unsafe.Pointer(&e.header[0]))))
	le.PutUint64(e.iov[8:], uringHeaderSize)
	le.PutUint64(e.iov[16:], uint64(uintptr(unsafe.Pointer(&e.payload[0]))))
	le.PutUint64(e.iov[24:], uint64(len(e.payload)))
	return e, nil
}

// command fills an SQE with the FUSE uring command op for entry e of
// queue qid.
func (t *uringTransport) command(sqe []byte, op uint32, e *entry, qid int, commitID uint64) {
	le := binary.LittleEndian
	sqe[0] = ioringOpUringCmd
	le.PutUint32(sqe[4:], uint32(t.devFd))
	le.PutUint32(sqe[8:], op) // cmd_op
	le.PutUint64(sqe[16:], uint64(uintptr(unsafe.Pointer(&e.iov[0]))))
	le.PutUint32(sqe[24:], 2) // iovecs
	// kernel: struct fuse_uring_cmd_req, in the SQE's command area.
	le.PutUint64(sqe[48:], 0)
	le.PutUint64(sqe[56:], commitID)
	le.PutUint16(sqe[64:], uint16(qid))
}

// serve is one entry's thread on queue qid: register, then answer and
// fetch until the connection ends.
func (t *uringTransport) serve(qid, thread int, ready chan<- error) {
	defer t.threads.Done()
	defer t.serving.Done()
	// Completions run as task work on the thread that submitted: keep
	// this goroutine on this thread (it ends with the goroutine).
	runtime.LockOSThread()
	var cpus unix.CPUSet
	cpus.Set(qid)
	unix.SchedSetaffinity(0, &cpus) // on the queue's CPU: a wake-up on the caller's own CPU; failure only costs speed
	var policy ringPolicy
	if t.idle {
		policy.start(t.idleNow.Load())
	}
	r, err := newRing(4)
	if err != nil {
		ready <- fmt.Errorf("fusefs: io_uring transport: %w", err)
		return
	}
	e, err := newEntry(t.payload)
	if err == nil && uringSetupFault != nil {
		if err = uringSetupFault(thread); err != nil {
			unix.Munmap(e.mem)
		}
	}
	if err != nil {
		r.close()
		ready <- fmt.Errorf("fusefs: io_uring transport: %w", err)
		return
	}
	// The entry's memory goes back only once the kernel has let go of
	// it: after a completion that failed the command, or if it never
	// had it. Otherwise (the ring closed with a command pending) it
	// stays mapped, a leak rather than a write into reused memory.
	released := true
	defer func() {
		r.close()
		if released {
			unix.Munmap(e.mem)
		}
	}()
	t.command(r.sqe(), fuseUringRegister, e, qid, 0)
	released = false
	err = r.enter(0)
	if err == nil {
		// A REGISTER the kernel refuses completes at once.
		if res, ok := r.peek(); ok && res < 0 {
			r.cqe()
			err = fmt.Errorf("fusefs: io_uring transport: registering queue %d: %w", qid, unix.Errno(-res))
		}
	}
	if err != nil {
		released = true // a refused REGISTER has completed; an unsubmitted one never reached the kernel
	}
	ready <- err
	if err != nil {
		return
	}
	le := binary.LittleEndian
	in := make([][]byte, 3)
	out := make([][]byte, 2)
	var ioctlIn []byte
	for {
		_, res, ok := r.cqe()
		if !ok {
			if err := r.enter(1); err != nil {
				t.fail(qid, err)
				return
			}
			continue
		}
		if res < 0 {
			// The kernel has failed the command and let go of the
			// entry: the connection is gone (unmount, abort) or
			// the command was wrong.
			released = true
			if res != -int32(unix.ENOTCONN) && res != -int32(unix.ECONNABORTED) && res != -int32(unix.ENODEV) && res != -int32(unix.ECANCELED) {
				t.fail(qid, unix.Errno(-res))
			}
			return
		}
		h := e.header
		commitID := le.Uint64(h[uringEntInOut+8:])
		size := int(le.Uint32(h[uringEntInOut+16:]))
		total := int(le.Uint32(h[0:]))
		unique := le.Uint64(h[8:])
		// The first argument went to op_in, the rest to the payload;
		// the in header's length counts all of it.
		arg0 := total - inHeaderSize - size
		n, st := 0, fuse.EIO
		if arg0 >= 0 && arg0 <= uringEntInOut-uringOpIn && size <= len(e.payload) {
			in[0], in[1], in[2] = h[:inHeaderSize], h[uringOpIn:uringOpIn+arg0], e.payload[:size]
			if le.Uint32(h[4:]) == opIoctl {
				// Its input and output share the payload buffer.
				ioctlIn = append(ioctlIn[:0], in[2]...)
				in[2] = ioctlIn
			}
			out[0], out[1] = h[:outHeaderSize], e.payload
			if policy.isIdle && !lightRequest(h, size) {
				policy.set(false)
			}
			if uringServeHook != nil {
				uringServeHook(le.Uint32(h[4:]), size)
			}
			n, st = t.ps.HandleRequest(in, out)
			policy.set(t.idleNow.Load())
		} else {
			t.log.Printf("fusefs: io_uring queue %d: request of %d bytes with %d of payload", qid, total, size)
		}
		if !st.Ok() || n < outHeaderSize {
			// Never leave the caller waiting: answer the error.
			if st.Ok() {
				st = fuse.EIO
			}
			le.PutUint32(h[0:], outHeaderSize)
			le.PutUint32(h[4:], uint32(-int32(st)))
			le.PutUint64(h[8:], unique)
			n = outHeaderSize
		}
		le.PutUint32(h[uringEntInOut+16:], uint32(n-outHeaderSize))
		t.served[thread].n.Add(1)
		t.command(r.sqe(), fuseUringCommitAndFetch, e, qid, commitID)
	}
}

// requests is the number of requests answered through the rings.
func (t *uringTransport) requests() int64 {
	var n int64
	for i := range t.served {
		n += t.served[i].n.Load()
	}
	return n
}

// waitIfStarted waits for the threads of t, if any.
func (t *uringTransport) waitIfStarted() {
	if t != nil {
		t.threads.Wait()
	}
}
