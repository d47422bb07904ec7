package state

import (
	"fmt"
	"math/bits"
	"net/netip"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// ipBlock is a row of the ip_blocks table: for one block of 256 addresses
// (an IPv4 /24, an IPv6 /120), which are held by allocations that are not
// client-terminal, which were held once and have been released since, and
// when. A bitmap per block costs a few bytes per address, where a go-memdb
// index over allocation addresses would cost hundreds, and it answers "is
// this address held" and "which address of this block was never used"
// without a scan. Rows are immutable; a transaction writes new ones.
//
// held is derived from the allocations and rebuilt on restore; the release
// history (freed, releasedAt) is state of its own, kept in snapshots, since
// the allocations that held the addresses are garbage collected.
type ipBlock struct {
	// key is the block's first address in 16-byte form.
	key  string
	held [4]uint64
	// freed marks the addresses released and not held since.
	freed [4]uint64
	// releasedAt[i] is the raft index of the entry that released freed
	// address i, zero for the others; nil while no address is freed, so
	// that blocks whose addresses are all held or unused cost no more.
	releasedAt *[256]uint64
	// oldest is the smallest releasedAt of a freed address, zero when
	// none: what the released index orders blocks by.
	oldest uint64
}

// ipSpan is a row of the derived ip_spans table: for one span of 256
// blocks (an IPv4 /16, an IPv6 /112), which of its blocks have no address
// left that was never used. The search for a never-used address skips a
// used-up network a span at a time rather than a block at a time: 64
// lookups, not 16,384, to learn that a /10 has none left. A block's
// addresses never become unused again, so a bit, once set, stays set
// (until a restore rebuilds the table).
type ipSpan struct {
	// key is the span's first address in 16-byte form.
	key  string
	full [4]uint64
}

// spanKey returns the key of the span holding the block with key, and the
// block's index in the span.
func spanKey(blockKey string) (string, uint8) {
	b := []byte(blockKey)
	idx := b[14]
	b[14] = 0
	return string(b), idx
}

// firstNotFull returns the lowest block index at or after from whose
// block has a never-used address.
func (sp *ipSpan) firstNotFull(from uint8) (uint8, bool) {
	if sp == nil {
		return from, true
	}
	return firstClear(&sp.full, from)
}

// firstClear returns the lowest bit at or after from that is not set.
func firstClear(words *[4]uint64, from uint8) (uint8, bool) {
	for i := int(from); i < 256; {
		free := ^words[i/64] >> (i % 64)
		if free != 0 {
			off := i + bits.TrailingZeros64(free)
			if off < (i/64+1)*64 {
				return uint8(off), true
			}
		}
		i = (i/64 + 1) * 64
	}
	return 0, false
}

// ipBlockKey splits an address into its block key and its offset within
// the block. ok is false for text that is not an address.
func ipBlockKey(ip string) (key string, offset uint8, ok bool) {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return "", 0, false
	}
	key, offset = addrBlockKey(addr)
	return key, offset, true
}

func addrBlockKey(addr netip.Addr) (key string, offset uint8) {
	b := addr.As16()
	offset = b[15]
	b[15] = 0
	return string(b[:]), offset
}

// blockAddr is the address at offset of the block with key; IPv4 for a
// block of IPv4-mapped addresses.
func blockAddr(key string, offset uint8) netip.Addr {
	var b [16]byte
	copy(b[:], key)
	b[15] = offset
	return netip.AddrFrom16(b).Unmap()
}

func bit(words *[4]uint64, offset uint8) bool { return words[offset/64]&(1<<(offset%64)) != 0 }
func setBit(words *[4]uint64, offset uint8)   { words[offset/64] |= 1 << (offset % 64) }
func clearBit(words *[4]uint64, offset uint8) { words[offset/64] &^= 1 << (offset % 64) }

func (b *ipBlock) has(offset uint8) bool {
	return b != nil && bit(&b.held, offset)
}

// firstNeverUsed returns the lowest offset at or after from that is
// neither held nor freed.
func (b *ipBlock) firstNeverUsed(from uint8) (uint8, bool) {
	if b == nil {
		return from, true
	}
	used := b.used()
	return firstClear(&used, from)
}

// used marks the addresses held or freed.
func (b *ipBlock) used() [4]uint64 {
	var u [4]uint64
	for i := range u {
		u[i] = b.held[i] | b.freed[i]
	}
	return u
}

// usedUp reports whether every address of the block has been used.
func (b *ipBlock) usedUp() bool {
	return b != nil && b.used() == [4]uint64{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}
}

// clone returns a copy the transaction may change.
func (b *ipBlock) clone() *ipBlock {
	c := *b
	if b.releasedAt != nil {
		r := *b.releasedAt
		c.releasedAt = &r
	}
	return &c
}

// hold marks an address held; it is no longer freed.
func (b *ipBlock) hold(offset uint8) {
	setBit(&b.held, offset)
	clearBit(&b.freed, offset)
	if b.releasedAt != nil {
		b.releasedAt[offset] = 0
	}
}

// release marks a held address freed by the entry at index.
func (b *ipBlock) release(offset uint8, index uint64) {
	clearBit(&b.held, offset)
	b.markFreed(offset, index)
}

func (b *ipBlock) markFreed(offset uint8, index uint64) {
	setBit(&b.freed, offset)
	if b.releasedAt == nil {
		b.releasedAt = new([256]uint64)
	}
	b.releasedAt[offset] = index
}

// settle recomputes oldest and drops releasedAt once nothing is freed.
func (b *ipBlock) settle() {
	b.oldest = 0
	if b.freed == [4]uint64{} {
		b.releasedAt = nil
		return
	}
	for off, at := range b.releasedAt {
		if at != 0 && bit(&b.freed, uint8(off)) && (b.oldest == 0 || at < b.oldest) {
			b.oldest = at
		}
	}
}

// holdsIP reports whether an allocation holds its address.
func holdsIP(a *droverv1.Allocation) bool {
	return a != nil && a.GetResources().GetIp() != "" && !a.ClientTerminal()
}

// ipChanges accumulates a transaction's changes to the ip_blocks table.
type ipChanges map[string]*ipBlock

// trackIP records that an allocation went from before to after (either may
// be nil) as far as its address is concerned. An address released is
// stamped with the transaction's raft index: the same on every server.
func (tx *txn) trackIP(before, after *droverv1.Allocation) {
	wasHeld, isHeld := holdsIP(before), holdsIP(after)
	if wasHeld && (!isHeld || before.GetResources().GetIp() != after.GetResources().GetIp()) {
		if row, off, ok := tx.ipRow(before.GetResources().GetIp()); ok {
			row.release(off, tx.index)
		}
	}
	if isHeld && (!wasHeld || before.GetResources().GetIp() != after.GetResources().GetIp()) {
		if row, off, ok := tx.ipRow(after.GetResources().GetIp()); ok {
			row.hold(off)
		}
	}
}

// ipRow returns the transaction's writable copy of the block holding ip,
// and ip's offset in it.
func (tx *txn) ipRow(ip string) (*ipBlock, uint8, bool) {
	key, off, ok := ipBlockKey(ip)
	if !ok {
		return nil, 0, false
	}
	return tx.ipRowByKey(key), off, true
}

func (tx *txn) ipRowByKey(key string) *ipBlock {
	row, ok := tx.ipBlocks[key]
	if !ok {
		if old := get[*ipBlock](tx, tableIPBlocks, key); old != nil {
			row = old.clone()
		} else {
			row = &ipBlock{key: key}
		}
		tx.ipBlocks[key] = row
	}
	return row
}

// flushIPs writes the changed blocks; a block with nothing held or freed
// is deleted. A block whose last never-used address was taken marks its
// span.
func (tx *txn) flushIPs() {
	spans := make(map[string]*ipSpan)
	for _, key := range sortedKeys(tx.ipBlocks) {
		row := tx.ipBlocks[key]
		row.settle()
		old := get[*ipBlock](tx, tableIPBlocks, key)
		var err error
		if row.held == [4]uint64{} && row.freed == [4]uint64{} {
			if old != nil {
				err = tx.db.Delete(tableIPBlocks, old)
			}
		} else {
			err = tx.db.Insert(tableIPBlocks, row)
		}
		if err != nil {
			panic("state: write " + tableIPBlocks + ": " + err.Error())
		}
		if full := row.usedUp(); full != old.usedUp() {
			tx.markSpan(spans, key, full)
		}
	}
	clear(tx.ipBlocks)
	for _, key := range sortedKeys(spans) {
		var err error
		if sp := spans[key]; sp.full == [4]uint64{} {
			if old := get[*ipSpan](tx, tableIPSpans, key); old != nil {
				err = tx.db.Delete(tableIPSpans, old)
			}
		} else {
			err = tx.db.Insert(tableIPSpans, sp)
		}
		if err != nil {
			panic("state: write " + tableIPSpans + ": " + err.Error())
		}
	}
}

// markSpan records in spans, the transaction's writable span rows, that
// the block with key is used up or not.
func (tx *txn) markSpan(spans map[string]*ipSpan, blockKey string, full bool) {
	key, idx := spanKey(blockKey)
	sp, ok := spans[key]
	if !ok {
		sp = &ipSpan{key: key}
		if old := get[*ipSpan](tx, tableIPSpans, key); old != nil {
			sp.full = old.full
		}
		spans[key] = sp
	}
	if full {
		setBit(&sp.full, idx)
	} else {
		clearBit(&sp.full, idx)
	}
}

// restoreIPReleases lays a snapshot's release history of one block over
// what the restored allocations hold; an address held stays held.
func (tx *txn) restoreIPReleases(rec *droverv1.IPBlockReleases) error {
	block, released := rec.GetBlock(), rec.GetReleasedIndex()
	if len(block) != 16 || block[15] != 0 {
		return fmt.Errorf("%w: ip block key %x is not the first address of a block of 256", ErrInvalidEntry, block)
	}
	if len(released) > 256 {
		return fmt.Errorf("%w: ip block %x has %d release indexes, at most 256", ErrInvalidEntry, block, len(released))
	}
	row := tx.ipRowByKey(string(block))
	for off, at := range released {
		if at != 0 && !bit(&row.held, uint8(off)) {
			row.markFreed(uint8(off), at)
		}
	}
	return nil
}
