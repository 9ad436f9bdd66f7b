// rawsrv: minimal FUSE server speaking the raw protocol, either over the
// classic /dev/fuse read/write loop or over FUSE-over-io_uring.
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	opLookup      = 1
	opForget      = 2
	opGetattr     = 3
	opGetxattr    = 22
	opInit        = 26
	opBatchForget = 42
	opDestroy     = 38
	opStatfs      = 17

	fuseInitExt     = 1 << 30
	fuseMaxPages    = 1 << 22
	fuseOverIOUring = 1 << 41 // 64-bit flags; bit 9 of flags2

	inHdrSz  = 40
	outHdrSz = 16
	attrSz   = 88

	// io_uring
	ioringSetupSQE128  = 1 << 10
	ioringOffSQRing    = 0
	ioringOffCQRing    = 0x8000000
	ioringOffSQEs      = 0x10000000
	ioringEnterGetev   = 1
	ioringOpUringCmd   = 46
	ioringFeatSingleMM = 1

	cmdRegister       = 1
	cmdCommitAndFetch = 2

	hdrBufSz     = 288 // fuse_uring_req_header: 128 + 128 + 32
	payloadBufSz = 256 * 1024
)

var (
	le       = binary.LittleEndian
	mnt      = flag.String("mnt", "/tmp/fuse-uring/mnt", "mountpoint")
	useUring = flag.Bool("uring", false, "use FUSE-over-io_uring")
	entsPerQ = flag.Int("ents", 2, "ring entries per queue")
	pinQ     = flag.Bool("pin", true, "pin queue thread q to CPU q")
	attrTTLs = flag.Uint64("attrttl", 0, "attr timeout seconds")
	verbose  = flag.Bool("v", false, "verbose")
	spinQ    = flag.Int("spinq", -1, "queue id whose thread busy-polls the CQ (bounded by -spinsecs)")
	spinCPU  = flag.Int("spincpu", 1, "CPU for the spinning queue thread")
	spinSecs = flag.Float64("spinsecs", 4, "max seconds of busy polling")
	nreq     atomic.Int64
	nUring   atomic.Int64
	devfd    int
)

func fillAttr(b []byte, ino uint64) {
	le.PutUint64(b[0:], ino)
	if ino == 1 {
		le.PutUint32(b[60:], syscall.S_IFDIR|0755) // mode
		le.PutUint32(b[64:], 2)                    // nlink
	} else {
		le.PutUint64(b[8:], 4096)                  // size
		le.PutUint64(b[16:], 8)                    // blocks
		le.PutUint32(b[60:], syscall.S_IFREG|0644) // mode
		le.PutUint32(b[64:], 1)
	}
	le.PutUint32(b[80:], 4096) // blksize
}

// handle computes the reply for one request. in: fuse_in_header fields,
// arg0: first (per-op) argument, rest: remaining arguments. Writes reply
// payload into out and returns (errno, payload length).
func handle(opcode uint32, nodeid uint64, arg0, rest []byte, out []byte) (int32, int) {
	nreq.Add(1)
	switch opcode {
	case opLookup:
		name := rest
		for i, c := range rest {
			if c == 0 {
				name = rest[:i]
				break
			}
		}
		if nodeid != 1 || string(name) != "file" {
			return -int32(unix.ENOENT), 0
		}
		for i := 0; i < 128; i++ {
			out[i] = 0
		}
		le.PutUint64(out[0:], 2)     // nodeid
		le.PutUint64(out[16:], 3600) // entry_valid
		le.PutUint64(out[24:], *attrTTLs)
		fillAttr(out[40:], 2)
		return 0, 128
	case opGetattr:
		for i := 0; i < 104; i++ {
			out[i] = 0
		}
		le.PutUint64(out[0:], *attrTTLs)
		fillAttr(out[16:], nodeid)
		return 0, 104
	case opGetxattr:
		return -int32(unix.ENODATA), 0
	}
	if *verbose {
		fmt.Fprintf(os.Stderr, "unhandled opcode %d\n", opcode)
	}
	return -int32(unix.ENOSYS), 0
}

func writeReply(buf []byte, unique uint64, errno int32, plen int) {
	le.PutUint32(buf[0:], uint32(outHdrSz+plen))
	le.PutUint32(buf[4:], uint32(errno))
	le.PutUint64(buf[8:], unique)
	_, err := unix.Write(devfd, buf[:outHdrSz+plen])
	if err != nil && err != unix.ENOENT {
		fmt.Fprintf(os.Stderr, "write /dev/fuse: %v\n", err)
	}
}

// argSplit returns the size of the fixed per-op header (in_args[0]) for the ops we serve.
func arg0Size(op uint32) int {
	switch op {
	case opGetattr:
		return 16
	case opGetxattr:
		return 8
	}
	return 0
}

func doInit() {
	buf := make([]byte, 1<<20+4096)
	n, err := unix.Read(devfd, buf)
	if err != nil {
		fatal("read INIT: %v", err)
	}
	op := le.Uint32(buf[4:])
	unique := le.Uint64(buf[8:])
	if op != opInit {
		fatal("expected INIT, got %d", op)
	}
	in := buf[inHdrSz:n]
	kmaj, kmin := le.Uint32(in[0:]), le.Uint32(in[4:])
	kflags := uint64(le.Uint32(in[12:]))
	if len(in) >= 20 {
		kflags |= uint64(le.Uint32(in[16:])) << 32
	}
	fmt.Fprintf(os.Stderr, "INIT: kernel %d.%d flags=%#x (OVER_IO_URING offered=%v)\n", kmaj, kmin, kflags, kflags&fuseOverIOUring != 0)
	want := uint64(fuseInitExt | fuseMaxPages)
	if *useUring {
		if kflags&fuseOverIOUring == 0 {
			fatal("kernel did not offer FUSE_OVER_IO_URING (enable_uring=N?)")
		}
		want |= fuseOverIOUring
	}
	want &= kflags
	out := make([]byte, 64)
	le.PutUint32(out[0:], 7)
	le.PutUint32(out[4:], kmin)
	le.PutUint32(out[8:], 128*1024) // max_readahead
	le.PutUint32(out[12:], uint32(want))
	le.PutUint16(out[16:], 16)       // max_background
	le.PutUint16(out[18:], 12)       // congestion_threshold
	le.PutUint32(out[20:], 128*1024) // max_write
	le.PutUint32(out[24:], 1)        // time_gran
	le.PutUint16(out[28:], 32)       // max_pages
	le.PutUint32(out[32:], uint32(want>>32))
	rb := make([]byte, outHdrSz+64)
	copy(rb[outHdrSz:], out)
	writeReply(rb, unique, 0, 64)
}

// classicLoop serves requests by read/write on /dev/fuse. In uring mode it
// still runs to drain FORGETs / anything the kernel sends the legacy way.
func classicLoop() {
	runtime.LockOSThread()
	buf := make([]byte, 1<<20+4096)
	out := make([]byte, 4096)
	for {
		n, err := unix.Read(devfd, buf)
		if err != nil {
			if err == unix.EINTR || err == unix.EAGAIN {
				continue
			}
			if err != unix.ENODEV {
				fmt.Fprintf(os.Stderr, "read /dev/fuse: %v\n", err)
			}
			return
		}
		if n < inHdrSz {
			continue
		}
		op := le.Uint32(buf[4:])
		unique := le.Uint64(buf[8:])
		nodeid := le.Uint64(buf[16:])
		if op == opForget || op == opBatchForget {
			continue
		}
		if *useUring && *verbose {
			fmt.Fprintf(os.Stderr, "legacy path got op %d\n", op)
		}
		a0 := arg0Size(op)
		args := buf[inHdrSz:n]
		if a0 > len(args) {
			a0 = len(args)
		}
		errno, plen := handle(op, nodeid, args[:a0], args[a0:], out[outHdrSz:])
		writeReply(out, unique, errno, plen)
	}
}

// ---------------- io_uring ----------------

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

type ring struct {
	fd                     int
	sqHead, sqTail, sqMask *uint32
	sqArray                unsafe.Pointer
	sqes                   []byte
	cqHead, cqTail, cqMask *uint32
	cqes                   unsafe.Pointer
	pending                uint32
}

func newRing(entries uint32) *ring {
	var p ioUringParams
	p.flags = ioringSetupSQE128
	fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if e != 0 {
		fatal("io_uring_setup: %v", e)
	}
	r := &ring{fd: int(fd)}
	sqSz := int(p.sqOff.array + p.sqEntries*4)
	cqSz := int(p.cqOff.cqes + p.cqEntries*16)
	if p.features&ioringFeatSingleMM != 0 && cqSz > sqSz {
		sqSz = cqSz
	}
	sqm, err := unix.Mmap(r.fd, ioringOffSQRing, sqSz, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		fatal("mmap sq: %v", err)
	}
	cqm := sqm
	if p.features&ioringFeatSingleMM == 0 {
		cqm, err = unix.Mmap(r.fd, ioringOffCQRing, cqSz, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err != nil {
			fatal("mmap cq: %v", err)
		}
	}
	r.sqes, err = unix.Mmap(r.fd, ioringOffSQEs, int(p.sqEntries)*128, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		fatal("mmap sqes: %v", err)
	}
	sb := unsafe.Pointer(&sqm[0])
	cb := unsafe.Pointer(&cqm[0])
	r.sqHead = (*uint32)(unsafe.Add(sb, p.sqOff.head))
	r.sqTail = (*uint32)(unsafe.Add(sb, p.sqOff.tail))
	r.sqMask = (*uint32)(unsafe.Add(sb, p.sqOff.ringMask))
	r.sqArray = unsafe.Add(sb, p.sqOff.array)
	r.cqHead = (*uint32)(unsafe.Add(cb, p.cqOff.head))
	r.cqTail = (*uint32)(unsafe.Add(cb, p.cqOff.tail))
	r.cqMask = (*uint32)(unsafe.Add(cb, p.cqOff.ringMask))
	r.cqes = unsafe.Add(cb, p.cqOff.cqes)
	return r
}

// getSQE returns a zeroed 128-byte SQE slot and advances the tail.
func (r *ring) getSQE() []byte {
	tail := atomic.LoadUint32(r.sqTail)
	head := atomic.LoadUint32(r.sqHead)
	mask := *r.sqMask
	if tail-head > mask {
		fatal("SQ full")
	}
	idx := tail & mask
	sqe := r.sqes[idx*128 : idx*128+128]
	clear(sqe)
	*(*uint32)(unsafe.Add(r.sqArray, idx*4)) = idx
	atomic.StoreUint32(r.sqTail, tail+1)
	r.pending++
	return sqe
}

func (r *ring) enter(minComplete uint32) error {
	for {
		_, _, e := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(r.pending), uintptr(minComplete), ioringEnterGetev, 0, 0)
		if e == unix.EINTR {
			// submitted count unknown on EINTR; the kernel consumes SQEs before waiting
			r.pending = 0
			continue
		}
		if e != 0 {
			return e
		}
		r.pending = 0
		return nil
	}
}

type ent struct {
	hdr     []byte // 288 bytes
	payload []byte
	iov     []byte // 2 x struct iovec
}

func prepCmd(sqe []byte, cmdOp uint32, e *ent, idx int, qid uint16, commitID uint64) {
	sqe[0] = ioringOpUringCmd
	le.PutUint32(sqe[4:], uint32(devfd))
	le.PutUint32(sqe[8:], cmdOp) // cmd_op (union with off)
	le.PutUint64(sqe[16:], uint64(uintptr(unsafe.Pointer(&e.iov[0]))))
	le.PutUint32(sqe[24:], 2) // len = number of iovecs
	le.PutUint64(sqe[32:], uint64(idx))
	// cmd area at offset 48: struct fuse_uring_cmd_req
	le.PutUint64(sqe[48:], 0)        // flags
	le.PutUint64(sqe[56:], commitID) // commit_id
	le.PutUint16(sqe[64:], qid)
}

func mmapAnon(n int) []byte {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		fatal("mmap anon: %v", err)
	}
	return b
}

func uringQueue(qid int, ready chan<- error) {
	runtime.LockOSThread()
	if *pinQ {
		var set unix.CPUSet
		if qid == *spinQ {
			set.Set(*spinCPU)
		} else {
			set.Set(qid)
		}
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			fmt.Fprintf(os.Stderr, "q%d setaffinity: %v\n", qid, err)
		}
	}
	r := newRing(uint32(2 * *entsPerQ))
	ents := make([]*ent, *entsPerQ)
	for i := range ents {
		e := &ent{hdr: mmapAnon(4096), payload: mmapAnon(payloadBufSz), iov: mmapAnon(4096)}
		le.PutUint64(e.iov[0:], uint64(uintptr(unsafe.Pointer(&e.hdr[0]))))
		le.PutUint64(e.iov[8:], hdrBufSz)
		le.PutUint64(e.iov[16:], uint64(uintptr(unsafe.Pointer(&e.payload[0]))))
		le.PutUint64(e.iov[24:], payloadBufSz)
		ents[i] = e
		prepCmd(r.getSQE(), cmdRegister, e, i, uint16(qid), 0)
	}
	// Submit registrations without waiting (they complete only when a request arrives).
	if err := r.enter(0); err != nil {
		ready <- fmt.Errorf("q%d register submit: %v", qid, err)
		return
	}
	ready <- nil
	spinUntil := time.Time{}
	if qid == *spinQ {
		spinUntil = time.Now().Add(time.Duration(*spinSecs * float64(time.Second)))
	}
	for {
		minc := uint32(1)
		if !spinUntil.IsZero() {
			// busy-poll: non-blocking enter (runs pending task work) until a CQE shows up
			for atomic.LoadUint32(r.cqHead) == atomic.LoadUint32(r.cqTail) && time.Now().Before(spinUntil) {
				if err := r.enter(0); err != nil {
					fmt.Fprintf(os.Stderr, "q%d io_uring_enter: %v\n", qid, err)
					return
				}
			}
			if time.Now().After(spinUntil) {
				spinUntil = time.Time{}
			} else {
				minc = 0
			}
		}
		if err := r.enter(minc); err != nil {
			fmt.Fprintf(os.Stderr, "q%d io_uring_enter: %v\n", qid, err)
			return
		}
		head := atomic.LoadUint32(r.cqHead)
		tail := atomic.LoadUint32(r.cqTail)
		for ; head != tail; head++ {
			cqe := unsafe.Add(r.cqes, (head&*r.cqMask)*16)
			ud := *(*uint64)(cqe)
			res := *(*int32)(unsafe.Add(cqe, 8))
			if res < 0 {
				if res != -int32(unix.ENOTCONN) {
					fmt.Fprintf(os.Stderr, "q%d ent %d cqe res=%d (%v)\n", qid, ud, res, unix.Errno(-res))
				}
				atomic.StoreUint32(r.cqHead, head+1)
				if res == -int32(unix.ENOTCONN) || res == -int32(unix.ECONNABORTED) {
					return
				}
				continue
			}
			e := ents[ud]
			h := e.hdr
			op := le.Uint32(h[4:])
			unique := le.Uint64(h[8:])
			nodeid := le.Uint64(h[16:])
			commitID := le.Uint64(h[256+8:])
			psz := le.Uint32(h[256+16:])
			nUring.Add(1)
			errno, plen := handle(op, nodeid, h[128:256], e.payload[:psz], e.payload)
			// fuse_out_header into in_out
			le.PutUint32(h[0:], uint32(outHdrSz+plen))
			le.PutUint32(h[4:], uint32(errno))
			le.PutUint64(h[8:], unique)
			le.PutUint32(h[256+16:], uint32(plen)) // ring_ent_in_out.payload_sz
			prepCmd(r.getSQE(), cmdCommitAndFetch, e, int(ud), uint16(qid), commitID)
			atomic.StoreUint32(r.cqHead, head+1)
		}
	}
}

func fatal(f string, a ...any) {
	fmt.Fprintf(os.Stderr, "FATAL: "+f+"\n", a...)
	unix.Unmount(*mnt, unix.MNT_DETACH)
	os.Exit(1)
}

func main() {
	flag.Parse()
	var err error
	devfd, err = unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		fatal("open /dev/fuse: %v", err)
	}
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other", devfd)
	if err := unix.Mount("rawfuse", *mnt, "fuse.rawfuse", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		fatal("mount: %v", err)
	}
	doInit()
	if *useUring {
		ncpu := runtime.NumCPU()
		ready := make(chan error)
		for q := 0; q < ncpu; q++ {
			go uringQueue(q, ready)
		}
		for q := 0; q < ncpu; q++ {
			if err := <-ready; err != nil {
				fatal("%v", err)
			}
		}
		fmt.Fprintf(os.Stderr, "io_uring: %d queues x %d entries registered\n", ncpu, *entsPerQ)
	}
	go classicLoop()
	fmt.Fprintln(os.Stderr, "READY")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, unix.SIGINT, unix.SIGTERM)
	<-sig
	fmt.Fprintf(os.Stderr, "requests served: %d (via io_uring: %d)\n", nreq.Load(), nUring.Load())
	unix.Unmount(*mnt, unix.MNT_DETACH)
}
