package state

import (
	"math/bits"
	"net/netip"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// ipBlock is a row of the derived ip_blocks table: which addresses of one
// block of 256 (an IPv4 /24, an IPv6 /120) are held by allocations that are
// not client-terminal. A bitmap per block costs a few bytes per allocation,
// where a go-memdb index over allocation addresses would cost hundreds, and
// it answers "is this address held" and "which address of this block is
// free" without a scan. Rows are immutable; a transaction writes new ones.
type ipBlock struct {
	// key is the block's first address in 16-byte form.
	key  string
	held [4]uint64
}

// ipBlockKey splits an address into its block key and its offset within
// the block. ok is false for text that is not an address.
func ipBlockKey(ip string) (key string, offset uint8, ok bool) {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return "", 0, false
	}
	b := addr.As16()
	offset = b[15]
	b[15] = 0
	return string(b[:]), offset, true
}

func (b *ipBlock) has(offset uint8) bool {
	return b != nil && b.held[offset/64]&(1<<(offset%64)) != 0
}

// firstFree returns the lowest offset at or after from that is not held.
func (b *ipBlock) firstFree(from uint8) (uint8, bool) {
	for i := int(from); i < 256; {
		var word uint64
		if b != nil {
			word = b.held[i/64]
		}
		free := ^word >> (i % 64)
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

// holdsIP reports whether an allocation holds its address.
func holdsIP(a *droverv1.Allocation) bool {
	return a != nil && a.GetResources().GetIp() != "" && !a.ClientTerminal()
}

// ipChanges accumulates a transaction's changes to the ip_blocks table.
type ipChanges map[string]*ipBlock

// track records that an allocation went from before to after (either may be
// nil) as far as its address is concerned.
func (tx *txn) trackIP(before, after *droverv1.Allocation) {
	wasHeld, isHeld := holdsIP(before), holdsIP(after)
	if wasHeld && (!isHeld || before.GetResources().GetIp() != after.GetResources().GetIp()) {
		tx.setIP(before.GetResources().GetIp(), false)
	}
	if isHeld && (!wasHeld || before.GetResources().GetIp() != after.GetResources().GetIp()) {
		tx.setIP(after.GetResources().GetIp(), true)
	}
}

func (tx *txn) setIP(ip string, held bool) {
	key, off, ok := ipBlockKey(ip)
	if !ok {
		return
	}
	row, ok := tx.ipBlocks[key]
	if !ok {
		row = &ipBlock{key: key}
		if old := get[*ipBlock](tx, tableIPBlocks, key); old != nil {
			row.held = old.held
		}
		tx.ipBlocks[key] = row
	}
	if held {
		row.held[off/64] |= 1 << (off % 64)
	} else {
		row.held[off/64] &^= 1 << (off % 64)
	}
}

// flushIPs writes the changed blocks; empty blocks are deleted.
func (tx *txn) flushIPs() {
	for _, key := range sortedKeys(tx.ipBlocks) {
		row := tx.ipBlocks[key]
		var err error
		if row.held == [4]uint64{} {
			if old := get[*ipBlock](tx, tableIPBlocks, key); old != nil {
				err = tx.db.Delete(tableIPBlocks, old)
			}
		} else {
			err = tx.db.Insert(tableIPBlocks, row)
		}
		if err != nil {
			panic("state: write " + tableIPBlocks + ": " + err.Error())
		}
	}
	clear(tx.ipBlocks)
}

// AllocIPHeld reports whether an allocation that is not client-terminal
// holds the address.
func (s *Snapshot) AllocIPHeld(ip string) bool {
	key, off, ok := ipBlockKey(ip)
	if !ok {
		return false
	}
	return first[*ipBlock](s, tableIPBlocks, indexID, key).has(off)
}

// FreeIPInBlock returns the first address not held by an allocation in the
// block of 256 addresses that contains from, starting at from itself. ok is
// false when the rest of the block is taken.
func (s *Snapshot) FreeIPInBlock(from netip.Addr) (netip.Addr, bool) {
	key, off, ok := ipBlockKey(from.String())
	if !ok {
		return netip.Addr{}, false
	}
	free, ok := first[*ipBlock](s, tableIPBlocks, indexID, key).firstFree(off)
	if !ok {
		return netip.Addr{}, false
	}
	b := from.As16()
	b[15] = free
	addr := netip.AddrFrom16(b)
	if from.Is4() {
		addr = addr.Unmap()
	}
	return addr, true
}
