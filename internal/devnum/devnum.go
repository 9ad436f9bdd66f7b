// Package devnum encodes device numbers as Linux's dev_t does (glibc's
// gnu_dev_makedev): the form ext4go's API and /proc/self/mountinfo use on
// every host, whatever the host's own dev_t looks like.
package devnum

// Mkdev returns the Linux dev_t of major and minor.
func Mkdev(major, minor uint32) uint64 {
	return uint64(major&0x00000fff)<<8 | uint64(major&0xfffff000)<<32 |
		uint64(minor&0x000000ff) | uint64(minor&0xffffff00)<<12
}

// Major returns the major number of the Linux dev_t dev.
func Major(dev uint64) uint32 {
	return uint32((dev>>8)&0x00000fff) | uint32((dev>>32)&0xfffff000)
}

// Minor returns the minor number of the Linux dev_t dev.
func Minor(dev uint64) uint32 {
	return uint32(dev&0x000000ff) | uint32((dev>>12)&0xffffff00)
}
