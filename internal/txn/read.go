package txn

import (
	"fmt"
	"io"
)

// Read returns a copy of block nr's current content.
func (m *Manager) Read(nr uint64) ([]byte, error) {
	out := make([]byte, m.bs)
	err := m.View(nr, func(b []byte) error {
		copy(out, b)
		return nil
	})
	return out, err
}

// ViewSealed is View for a block with a checksum under seed that fn
// verifies: fn is told whether the block is sealed with seed (verified, or
// written by ModifySealed, since it last changed), and returns whether it
// verified the block now, which seals it. Verification then costs once per
// change of the block rather than once per read, as the kernel's
// buffer_verified flag does.
func (m *Manager) ViewSealed(nr uint64, seed uint32, fn func(b []byte, sealed bool) (bool, error)) error {
	b, err := m.readLocked(nr)
	if err != nil {
		return err
	}
	seal := sealOf(seed)
	if err := b.settleUnless(seal); err != nil {
		b.readUnlock()
		return err
	}
	defer b.readUnlock()
	sealed := b.sealed.Load() == seal
	ok, err := fn(b.data, sealed)
	if ok && !sealed && err == nil {
		// Writers hold the write lock, so the content fn verified is
		// still the buffer's.
		b.sealed.Store(seal)
	}
	return err
}

// View calls fn with block nr's current content, read-locked: fn must not
// keep or change b.
func (m *Manager) View(nr uint64, fn func(b []byte) error) error {
	b, err := m.readLocked(nr)
	if err != nil {
		return err
	}
	if err := b.settleUnless(0); err != nil {
		b.readUnlock()
		return err
	}
	defer b.readUnlock()
	return fn(b.data)
}

// settleUnless settles a deferred checksum of b, read-locked, unless b is
// sealed with seal (a reader under that seal trusts the content and does
// not look at the checksum field). It returns with b read-locked.
func (b *Buffer) settleUnless(seal uint64) error {
	for b.sum != nil && (seal == 0 || b.sealed.Load() != seal) {
		b.mu.RUnlock()
		b.mu.Lock()
		err := b.settleSum()
		b.mu.Unlock()
		b.mu.RLock()
		if err != nil {
			return err
		}
	}
	return nil
}

// readLocked returns block nr's buffer, valid, pinned and read-locked; the
// caller ends with readUnlock.
func (m *Manager) readLocked(nr uint64) (*Buffer, error) {
	if err := m.checkBlock(nr); err != nil {
		return nil, err
	}
	b, err := m.buffer(nr, true, nil)
	if err != nil {
		return nil, err
	}
	b.mu.RLock()
	return b, nil
}

// readUnlock ends readLocked.
func (b *Buffer) readUnlock() {
	b.mu.RUnlock()
	b.unpin()
}

// buffer returns the cached buffer of block nr, pinned, reading it from the
// device when read is set and it is not valid yet, unless zero (if set),
// asked under the buffer's lock, reports that zeros will do. The caller
// must unpin it.
func (m *Manager) buffer(nr uint64, read bool, zero func() bool) (*Buffer, error) {
	b := m.cache.get(nr, m.bs)
	if !read {
		return b, nil
	}
	b.mu.RLock()
	valid := b.valid
	b.mu.RUnlock()
	if valid {
		return b, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.valid && zero != nil && zero() {
		clear(b.data)
		b.valid = true
	}
	if !b.valid {
		n, err := m.dev.ReadAt(b.data, int64(nr)*int64(m.bs))
		if n < len(b.data) {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			b.unpin()
			return nil, fmt.Errorf("read block %d: %w", nr, err)
		}
		b.valid = true
	}
	return b, nil
}
