// Package lockstat counts how often each shared lock and each shared
// cache line of the write path is taken, so that a machine with two cores
// can show which ones many cores would fight over (the kernel's point:
// a global lock, s_md_lock, was taken on every fallocate and every
// truncate).
//
// A lock is declared as Mutex[K] or RWMutex[K], where the marker type K
// names its Site; a shared counter calls Count at each write. The sites
// are classed by Scope: one instance for the whole filesystem (Global),
// one of many chosen by a key such as the block or inode number
// (Sharded), or the object's own (PerObject: a file's inode, a block's
// buffer, a block group). A path that many goroutines run on different
// files scales when it takes no Global site.
//
// Counting is compiled in only with the build tag lockstat (go build
// -tags lockstat); without it Mutex is a plain sync.Mutex, Count is
// empty, and the compiler removes both. With it the counters are atomics
// of their own, which is a cost only a measurement run pays.
package lockstat

// Site is one shared lock or counter.
type Site int

// The sites. Keep siteInfo in step.
const (
	TxnManager       Site = iota // txn.Manager.mu: waits for a commit closing the transaction
	TxnCommit                    // txn.Manager.commitMu: serialises commits
	TxnOpenCount                 // a shard of a transaction's open-handle count
	TxnDirtyCount                // a transaction's count of changed blocks
	TxnDirtyShard                // a shard of a transaction's changed-block set
	TxnRevoke                    // a transaction's revoke set
	TxnHooks                     // the commit hooks
	BufferCache                  // a shard of the block cache's map
	Buffer                       // one cached block
	AllocGroup                   // an allocator block group
	AllocInodePA                 // a shard of the allocator's per-inode preallocation state
	AllocLocality                // a locality group (small-file preallocation)
	AllocDeferred                // a shard of the deferred frees
	AllocPending                 // the allocator's count of frees awaiting commit
	AllocStreams                 // the allocator's count of streaming inodes
	AllocLegacyGoal              // the legacy configuration's single stream goal (s_md_lock)
	AllocFreeCount               // a shard of the free-cluster count (s_freeclusters_counter)
	AllocFlexFree                // a flex group's free-cluster count (s_flex_groups[].free_clusters)
	AllocCounterFold             // the centre of the free or pending count, written once per batch of changes (percpu_counter's fbc->count)
	AllocStreamGoal              // a stream goal slot (s_mb_last_groups[ino % n])
	FSSuper                      // the filesystem's superblock lock
	FSOrphans                    // the orphan list
	FSInodeCache                 // a shard of the inode cache
	FSInode                      // one inode's lock
	FSDeferredInodes             // a shard of the inodes whose table slot the commit re-encodes
	numSites
)

// Scope is how many goroutines on different files may meet on a site.
type Scope int

const (
	PerObject Scope = iota // the file's, block's or group's own
	Sharded                // one of many, chosen by a key
	Global                 // one for the whole filesystem
)

func (s Scope) String() string {
	switch s {
	case PerObject:
		return "per-object"
	case Sharded:
		return "sharded"
	}
	return "global"
}

var siteInfo = [numSites]struct {
	name  string
	scope Scope
}{
	TxnManager:       {"txn.Manager.mu", Global},
	TxnCommit:        {"txn.Manager.commitMu", Global},
	TxnOpenCount:     {"txn.Transaction.updates[shard]", Sharded},
	TxnDirtyCount:    {"txn.Transaction.ndirty", Global},
	TxnDirtyShard:    {"txn.Transaction.dirty[shard].mu", Sharded},
	TxnRevoke:        {"txn.Transaction.revokeMu", Global},
	TxnHooks:         {"txn.Manager.hooksMu", Global},
	BufferCache:      {"txn.cache shard mu", Sharded},
	Buffer:           {"txn.Buffer.mu", PerObject},
	AllocGroup:       {"mballoc group lock", PerObject},
	AllocInodePA:     {"mballoc.inodeShard.mu", Sharded},
	AllocLocality:    {"mballoc.localityGroup.mu", Sharded},
	AllocDeferred:    {"mballoc.deferShard.mu", Sharded},
	AllocPending:     {"mballoc.Allocator.pending[shard]", Sharded},
	AllocStreams:     {"mballoc.Allocator.streams[shard]", Sharded},
	AllocLegacyGoal:  {"mballoc legacy stream goal (s_md_lock)", Global},
	AllocFreeCount:   {"mballoc.Allocator.free[shard]", Sharded},
	AllocFlexFree:    {"mballoc.Allocator.flexFree[flex group]", PerObject},
	AllocCounterFold: {"shard.Counter centre (free, pending)", Global},
	AllocStreamGoal:  {"mballoc.Allocator.goals[ino%n]", Sharded},
	FSSuper:          {"ext4go.FS superblock lock", Global},
	FSOrphans:        {"ext4go.FS orphan list lock", Global},
	FSInodeCache:     {"ext4go inode cache shard", Sharded},
	FSInode:          {"ext4go node.mu (inode lock)", PerObject},
	FSDeferredInodes: {"ext4go deferred inode writes[shard]", Sharded},
}

// Name returns the site's name: the lock or counter as the code calls it.
func (s Site) Name() string { return siteInfo[s].name }

// Scope returns the site's scope.
func (s Site) Scope() Scope { return siteInfo[s].scope }

// Sites returns every site, in order.
func Sites() []Site {
	out := make([]Site, numSites)
	for i := range out {
		out[i] = Site(i)
	}
	return out
}

// Counts are acquisitions per site.
type Counts [numSites]uint64

// Sub returns c - o, site by site.
func (c Counts) Sub(o Counts) Counts {
	for i := range c {
		c[i] -= o[i]
	}
	return c
}

// Marker types name a lock's site in its declaration.
type (
	MTxnManager    struct{}
	MTxnCommit     struct{}
	MTxnDirtyShard struct{}
	MTxnRevoke     struct{}
	MTxnHooks      struct{}
	MBufferCache   struct{}
	MBuffer        struct{}
	MAllocGroup    struct{}
	MAllocInodePA  struct{}
	MAllocLocality struct{}
	MAllocDeferred struct{}
	MAllocLegacy   struct{}
	MFSSuper       struct{}
	MFSOrphans     struct{}
	MFSInodeCache  struct{}
	MFSInode       struct{}
	MFSDeferred    struct{}
)

func (MTxnManager) site() Site    { return TxnManager }
func (MTxnCommit) site() Site     { return TxnCommit }
func (MTxnDirtyShard) site() Site { return TxnDirtyShard }
func (MTxnRevoke) site() Site     { return TxnRevoke }
func (MTxnHooks) site() Site      { return TxnHooks }
func (MBufferCache) site() Site   { return BufferCache }
func (MBuffer) site() Site        { return Buffer }
func (MAllocGroup) site() Site    { return AllocGroup }
func (MAllocInodePA) site() Site  { return AllocInodePA }
func (MAllocLocality) site() Site { return AllocLocality }
func (MAllocDeferred) site() Site { return AllocDeferred }
func (MAllocLegacy) site() Site   { return AllocLegacyGoal }
func (MFSSuper) site() Site       { return FSSuper }
func (MFSOrphans) site() Site     { return FSOrphans }
func (MFSInodeCache) site() Site  { return FSInodeCache }
func (MFSInode) site() Site       { return FSInode }
func (MFSDeferred) site() Site    { return FSDeferredInodes }

// Marker is implemented by the marker types.
type Marker interface{ site() Site }
