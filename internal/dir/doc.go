// Package dir encodes and decodes ext4 directories: linear directory
// blocks (ext4_dir_entry_2, or the old ext4_dir_entry without a file type),
// their metadata_csum tails, the htree (dx) index blocks with their own
// checksum tails, the name hashes the index is keyed by, inline-data
// directories, and lookups and iteration over a whole directory.
//
// Everything is pure: blocks come in as byte slices and, where a walk needs
// more blocks (Dir.Lookup, Dir.Iterate, Dir.Check), through a BlockReader the
// caller supplies. Nothing here holds state between calls, so all of it is
// safe for concurrent use as long as callers do not share the byte slices
// they pass.
//
// The write path is Editor: insert, delete and replace entries in a linear
// directory or an htree, turning a full one-block directory into an htree,
// splitting leaves and index blocks and adding index levels like the
// kernel's namei.c. It reads, writes and grows the directory only through a
// Store the filesystem implements inside one transaction; its only state is
// the directory's block count and index flag, which the caller persists. An
// Editor is used by one goroutine at a time (the caller's directory lock).
// Inline-data directories are edited in place by InlineAdd, InlineRemove and
// friends, and moved to a block by InlineToBlock.
//
// Invariants kept by the editor, checked by Dir.Check and by e2fsck -fn and
// the kernel in the tests: dirents tile every block exactly, with the
// checksum tail under metadata_csum; an unused dirent only ever starts a
// leaf; names are unique; in an htree every block but the root is referenced
// once, all leaves sit at one depth, index hashes are sorted, and every name
// lies in the hash range its leaf has in the index (with the low-bit
// continuation mark where a run of equal hashes spans leaves), so a lookup
// by hash finds it. An AppendBlock that fails (ENOSPC) leaves a valid
// directory: a block is appended before the blocks that will point at it
// change, and a directory is valid again between any two appends. A failing
// WriteBlock, by contrast, leaves the transaction to be aborted.
//
// Invariants kept by the decoders, whatever the input bytes:
//   - they never panic and never index outside the slice they are given;
//   - every dirent is checked like the kernel's __ext4_check_dir_entry
//     (rec_len ≥ 12, 4-aligned, large enough for name_len, inside the region,
//     not leaving a gap too small for another entry), so the entries of a
//     region always tile it exactly;
//   - htree walks are bounded: depth by indirect_levels (≤ 1, ≤ 2 with
//     largedir), block numbers by the directory size, cycles on the path
//     from the root are refused, and a lookup visits at most as many leaves
//     as the directory has blocks.
//
// Decoded names are copies; they never alias the input block.
//
// Names are compared and hashed as raw bytes. Casefolded directories (which
// hash and compare the casefolded name) and encrypted ones (ciphertext names,
// siphash, hashes stored in the dirent) are the caller's to refuse; a siphash
// htree root gives *fserr.UnsupportedError.
//
// Errors are fserr types: *fserr.CorruptError for broken structures,
// *fserr.ChecksumError for checksum mismatches, *fserr.UnsupportedError for
// hash versions ext4go does not implement (siphash). Their Block field is
// filled in where the package knows the logical block.
package dir
