package mballoc

import "fmt"

// OptimizeScan selects how groups are chosen at the cheap criteria
// (kernel mount option mb_optimize_scan).
type OptimizeScan uint8

const (
	// OptimizeScanAuto uses the order indexes when the filesystem has at
	// least 16 groups, as the kernel does by default.
	OptimizeScanAuto OptimizeScan = iota
	// OptimizeScanOn always uses the order indexes.
	OptimizeScanOn
	// OptimizeScanOff always scans groups linearly.
	OptimizeScanOff
)

func (o OptimizeScan) String() string {
	switch o {
	case OptimizeScanOn:
		return "on"
	case OptimizeScanOff:
		return "off"
	}
	return "auto"
}

// optimizeScanMinGroups is the group count from which OptimizeScanAuto
// turns the indexes on (kernel: MB_DEFAULT_LINEAR_SCAN_THRESHOLD).
const optimizeScanMinGroups = 16

// Tunables are the allocator's knobs, named after and defaulting to the
// kernel's /sys/fs/ext4/<dev>/mb_* files. They can be changed at any time
// with SetTunables; an allocation in progress keeps the values it started
// with.
type Tunables struct {
	Stats                 bool         // mb_stats: count Stats (costs shared atomics)
	MaxToScan             uint32       // mb_max_to_scan: free extents looked at before settling
	MinToScan             uint32       // mb_min_to_scan: extents looked at once one fits
	Order2Req             uint32       // mb_order2_req: power-of-two search for requests of 2^k, k+1 >= this
	StreamReq             uint32       // mb_stream_req: files up to this many blocks share locality groups
	GroupPrealloc         uint32       // mb_group_prealloc: clusters a locality-group preallocation asks for
	MaxLinearGroups       uint32       // mb_max_linear_groups: groups scanned linearly before the indexes
	BestAvailMaxTrimOrder uint32       // mb_best_avail_max_trim_order: how far "best available" shrinks a goal
	OptimizeScan          OptimizeScan // mb_optimize_scan
	// StreamSpread is ext4go's own, not the kernel's: a stream that
	// cannot grow at its goal is placed in the middle of a group's largest
	// free run, so that concurrent streams leave each other room to grow
	// contiguously (see spread.go). Off, streams are placed as the kernel
	// places them. Never used by the legacy allocator.
	StreamSpread bool
	// HoleFit is ext4go's own, not the kernel's: a small-file
	// (locality-group) allocation is first taken from the smallest free
	// run that holds it and is shorter than GroupPrealloc, in the
	// HoleFitGroups groups from its goal, before a locality-group
	// preallocation is used; one right after the file's last block takes
	// that block if it is free (see holefit.go). Off, small files are
	// placed as the kernel places them. Never used by the legacy
	// allocator.
	HoleFit       bool
	HoleFitGroups uint32 // groups HoleFit looks at, from the goal group
	// RunStart is ext4go's own, not the kernel's: at the power-of-two
	// criterion (CrPower2Aligned) a data request is placed at the start of
	// the free run that holds the aligned buddy chunk found, not at the
	// chunk itself. Normalized requests are powers of two, so the kernel's
	// placement leaves the part of the run before the chunk as a hole in
	// front of almost every stream window and locality-group
	// preallocation; at the run's start none is cut. Off, such requests
	// are aligned as the kernel aligns them. Never used by the legacy
	// allocator.
	RunStart bool
}

// DefaultTunables returns the kernel's defaults for a filesystem with the
// given blocks per cluster (1 without bigalloc).
func DefaultTunables(clusterRatio uint32) Tunables {
	gp := uint32(512)
	if clusterRatio > 1 {
		gp = max(512/clusterRatio, 32)
	}
	return Tunables{
		MaxToScan:             200,
		MinToScan:             10,
		Order2Req:             2,
		StreamReq:             16,
		GroupPrealloc:         gp,
		MaxLinearGroups:       0,
		BestAvailMaxTrimOrder: 3,
		OptimizeScan:          OptimizeScanAuto,
		StreamSpread:          true,
		HoleFit:               true,
		HoleFitGroups:         4,
		RunStart:              true,
	}
}

func (t *Tunables) validate() error {
	switch {
	case t.MaxToScan == 0:
		return fmt.Errorf("mballoc: MaxToScan must be positive")
	case t.MinToScan > t.MaxToScan:
		return fmt.Errorf("mballoc: MinToScan %d > MaxToScan %d", t.MinToScan, t.MaxToScan)
	case t.BestAvailMaxTrimOrder > 64:
		return fmt.Errorf("mballoc: BestAvailMaxTrimOrder %d", t.BestAvailMaxTrimOrder)
	case t.OptimizeScan > OptimizeScanOff:
		return fmt.Errorf("mballoc: OptimizeScan %d", t.OptimizeScan)
	}
	return nil
}

// Tunables returns the current tunables.
func (a *Allocator) Tunables() Tunables { return *a.tun.Load() }

// SetTunables replaces the tunables.
func (a *Allocator) SetTunables(t Tunables) error {
	if err := t.validate(); err != nil {
		return err
	}
	a.tun.Store(&t)
	return nil
}
