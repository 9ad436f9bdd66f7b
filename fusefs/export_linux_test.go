//go:build amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le

package fusefs

// SetUringSetupFault makes the setup of the ring entry threads fail where
// f returns an error (nil: no faults).
func SetUringSetupFault(f func(thread int) error) { uringSetupFault = f }

// SetUringServeHook has f called on a ring entry's thread before each
// request it handles (nil: none).
func SetUringServeHook(f func(op uint32, payload int)) { uringServeHook = f }

// SetReadCPUTimes replaces the reading of the machine's CPU times that
// decides whether ring threads take SCHED_IDLE, and returns the undo.
func SetReadCPUTimes(f func() (total, idle uint64, err error)) (restore func()) {
	prev := readCPUTimes
	readCPUTimes = f
	return func() { readCPUTimes = prev }
}

// UringIdleInterval is how often the CPU times are read.
const UringIdleInterval = idleWatchInterval

// UringIdlePossible says whether ring threads may take SCHED_IDLE here.
func UringIdlePossible() bool { return idleReversible() }

// HeldNodes is the number of nodes the kernel holds lookups of.
func HeldNodes(s *Server) int { return s.raw.nodes.held() }
