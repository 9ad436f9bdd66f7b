// Package benchknob holds settings of the ext4go package that exist only
// so that ext4go's own benchmarks can show what a design choice is worth.
// They are internal: no program outside this module can set them, and
// their zero values are the behaviour every user gets.
package benchknob

import "sync/atomic"

// LazytimeNeighbourWait, in nanoseconds, makes filesystems opened after
// it is set wait (spinning, up to this long) for a busy neighbour's lock
// when a write copies the lazy timestamps of the other inodes in its
// inode-table block, instead of skipping the neighbour at once (kernel:
// ext4_update_other_inodes_time before find_inode_nowait skipped busy
// inodes). "ext4go bench lazytime" sets it for its blocking
// configuration.
var LazytimeNeighbourWait atomic.Int64

// LazytimeNeighbourWaits and LazytimeNeighbourTimeouts count, while
// LazytimeNeighbourWait is in force, the busy neighbours waited for and
// those whose wait ran out (every one of them a wait that, unbounded,
// could have been a deadlock or a stall behind a commit).
var LazytimeNeighbourWaits, LazytimeNeighbourTimeouts atomic.Int64
