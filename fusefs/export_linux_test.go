package fusefs

// SetUringSetupFault makes the setup of the ring entry threads fail where
// f returns an error (nil: no faults).
func SetUringSetupFault(f func(thread int) error) { uringSetupFault = f }
