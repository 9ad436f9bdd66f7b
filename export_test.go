package ext4go

// StaleWrites is the number of changes refused because they reached a node
// that no longer owned its inode (see lifetime.go); tests require zero.
func StaleWrites() int64 { return staleWrites.Load() }
