package dir

import (
	"fmt"
	"syscall"
)

// Store is a directory's block storage as the Editor sees it: the
// filesystem implements it inside one transaction. Logical block numbers
// count from 0 to the Editor's NBlocks-1.
type Store interface {
	// ReadBlock returns the current content of logical block lblk,
	// BlockSize bytes, or nil for a hole. The editor may modify the
	// returned slice, and then always calls WriteBlock with it.
	ReadBlock(lblk uint32) ([]byte, error)
	// WriteBlock stores the new content of block lblk. Leaf and index
	// checksums are already set.
	WriteBlock(lblk uint32, b []byte) error
	// AppendBlock grows the directory by one block at its end (allocating
	// and mapping it, and raising i_size) and returns its logical number,
	// which must be the directory's previous block count. Its content is
	// written next with WriteBlock.
	AppendBlock() (lblk uint32, err error)
}

// Viewer is a Store that can also show a block without copying it: fn gets
// block lblk's current content (nil for a hole) and must neither keep nor
// change it. The editor reads through it where it only looks (scanning a
// linear directory for room), and copies with ReadBlock what it changes.
type Viewer interface {
	ViewBlock(lblk uint32, fn func(b []byte) error) error
}

// Modifier is a Store that can also change a block in place: fn gets block
// lblk's content and may change it, and the change is recorded as
// WriteBlock would record it. A hole is an error. The editor inserts
// through it (Insert changes nothing when it fails), sparing the copies
// of ReadBlock and WriteBlock.
type Modifier interface {
	ModifyBlock(lblk uint32, fn func(b []byte) error) error
}

// MemStore is an in-memory Store: Blocks[i] is logical block i, nil a hole.
// It is meant for tests and for building directories in memory.
type MemStore struct {
	BlockSize int
	Blocks    [][]byte
	// MaxBlocks, if not 0, makes AppendBlock fail with ENOSPC once the
	// directory has that many blocks.
	MaxBlocks int
}

// ReadBlock implements Store; it returns the stored slice itself.
func (m *MemStore) ReadBlock(lblk uint32) ([]byte, error) {
	if int64(lblk) >= int64(len(m.Blocks)) {
		return nil, fmt.Errorf("memstore: read of block %d past the end (%d blocks)", lblk, len(m.Blocks))
	}
	return m.Blocks[lblk], nil
}

// WriteBlock implements Store.
func (m *MemStore) WriteBlock(lblk uint32, b []byte) error {
	if int64(lblk) >= int64(len(m.Blocks)) {
		return fmt.Errorf("memstore: write of block %d past the end (%d blocks)", lblk, len(m.Blocks))
	}
	if len(b) != m.BlockSize {
		return fmt.Errorf("memstore: write of %d bytes to block %d, want %d", len(b), lblk, m.BlockSize)
	}
	if m.Blocks[lblk] == nil || &m.Blocks[lblk][0] != &b[0] {
		m.Blocks[lblk] = append([]byte(nil), b...)
	}
	return nil
}

// AppendBlock implements Store: the new block is zeroed.
func (m *MemStore) AppendBlock() (uint32, error) {
	if m.MaxBlocks > 0 && len(m.Blocks) >= m.MaxBlocks {
		return 0, fmt.Errorf("memstore: %d blocks: %w", len(m.Blocks), syscall.ENOSPC)
	}
	m.Blocks = append(m.Blocks, make([]byte, m.BlockSize))
	return uint32(len(m.Blocks) - 1), nil
}
