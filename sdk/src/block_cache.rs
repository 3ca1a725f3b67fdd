//! A component's allocator: small blocks a call frees go to the next call that asks for that
//! size, from a free list per power-of-two size, in front of the system allocator (dlmalloc
//! in a component).
//!
//! Every call of a policy allocates and frees the same few small blocks: the batch the host
//! lowers through `cabi_realloc`, the records the SDK unpacks it into, the answer's id list
//! the post-return frees, and the policy's own queue entries. dlmalloc's `malloc` and `free`
//! search, split and coalesce each time; a free-list pop or push is a few loads and stores.
//! Blocks on the lists are never handed back to the system allocator, so a component keeps
//! at most what it held at its busiest in each size, inside the host's memory cap.

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout};
use std::cell::UnsafeCell;
use std::ptr;

/// The smallest block: 16 bytes, room for the list's link on any target.
const MIN_SHIFT: u32 = 4;
/// Sizes 16, 32, … 2048 bytes are cached; larger ones go straight to the system allocator.
const CLASSES: usize = 8;
/// Every cached block is aligned to this, so any request of at most this alignment may
/// take any block of its size.
const ALIGN: usize = 16;

/// The largest cached size.
const MAX_CACHED: usize = 1 << (MIN_SHIFT as usize + CLASSES - 1);

/// Free lists of small blocks in front of `A`. It must only be used from one thread: a
/// component is one (see the `Sync` impl below).
#[derive(Debug)]
pub struct BlockCache<A> {
    inner: A,
    /// Per size class, the first free block; each free block's first word links the next.
    free: UnsafeCell<[*mut u8; CLASSES]>,
}

impl<A> BlockCache<A> {
    /// An empty cache in front of `inner`.
    pub const fn new(inner: A) -> Self {
        Self {
            inner,
            free: UnsafeCell::new([ptr::null_mut(); CLASSES]),
        }
    }
}

// SAFETY: `GlobalAlloc` needs `Sync` for a `static`. The cache is installed only in a
// component built for wasm32 without the `atomics` feature, where there is exactly one
// thread, so the lists are never touched from two threads; tests use it from one.
unsafe impl<A: Sync> Sync for BlockCache<A> {}

/// The size class of `layout`, if it is cached.
fn class(layout: Layout) -> Option<usize> {
    if layout.align() > ALIGN || layout.size() > MAX_CACHED {
        return None;
    }
    let size = layout.size().max(1 << MIN_SHIFT);
    // The power of two at or above `size`, counted from the smallest block.
    let shift = usize::BITS - (size - 1).leading_zeros();
    Some((shift - MIN_SHIFT) as usize)
}

/// The layout every block of class `c` is allocated with.
fn class_layout(c: usize) -> Layout {
    // A power of two no larger than MAX_CACHED and a power-of-two alignment: always valid.
    Layout::from_size_align(1 << (c + MIN_SHIFT as usize), ALIGN).expect("a valid class")
}

// SAFETY: blocks handed out are either the inner allocator's, allocated with the class's
// layout (at least as large and as aligned as asked), or ones freed earlier with a layout
// of the same class, which the caller no longer uses. A free block holds only its link.
unsafe impl<A: GlobalAlloc> GlobalAlloc for BlockCache<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some(c) = class(layout) else {
            // SAFETY: the caller's contract, passed on.
            return unsafe { self.inner.alloc(layout) };
        };
        // SAFETY: one thread (see `Sync`), and no reference to the lists outlives this call.
        let free = unsafe { &mut *self.free.get() };
        let head = free[c];
        if head.is_null() {
            // SAFETY: a class layout has a non-zero size.
            return unsafe { self.inner.alloc(class_layout(c)) };
        }
        // SAFETY: `head` is a free block of this class, whose first word is its link,
        // written by `dealloc` (blocks are 16-byte aligned, so the read is aligned).
        free[c] = unsafe { head.cast::<*mut u8>().read() };
        head
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        let Some(c) = class(layout) else {
            // SAFETY: the caller's contract, passed on: `block` came from `alloc` with
            // `layout`, which sent it to the inner allocator.
            return unsafe { self.inner.dealloc(block, layout) };
        };
        // SAFETY: one thread; `block` is a block of class `c` (at least 16 bytes, aligned
        // to 16) that the caller gives up, so its first word may hold the link.
        unsafe {
            let free = &mut *self.free.get();
            block.cast::<*mut u8>().write(free[c]);
            free[c] = block;
        }
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `new_size`, rounded up to the alignment, does not
        // overflow; the alignment is the old layout's, which was valid.
        let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (class(layout), class(new)) {
            // The block already has room for the new size.
            (Some(old), Some(grown)) if old == grown => block,
            // SAFETY: both uncached: the inner allocator made the block.
            (None, None) => unsafe { self.inner.realloc(block, layout, new_size) },
            _ => {
                // SAFETY: `new` has a non-zero size (the caller's contract); the copy stays
                // within both blocks, which are distinct; the old one is then given up.
                unsafe {
                    let moved = self.alloc(new);
                    if !moved.is_null() {
                        ptr::copy_nonoverlapping(block, moved, layout.size().min(new_size));
                        self.dealloc(block, layout);
                    }
                    moved
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::alloc::System;

    use super::*;

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    #[test]
    fn sizes_map_to_the_power_of_two_at_or_above_them() {
        assert_eq!(class(layout(1, 1)), Some(0));
        assert_eq!(class(layout(16, 8)), Some(0));
        assert_eq!(class(layout(17, 8)), Some(1));
        assert_eq!(class(layout(2048, 16)), Some(7));
        assert_eq!(class(layout(2049, 8)), None, "past the largest class");
        assert_eq!(class(layout(64, 32)), None, "aligned past the blocks");
    }

    #[test]
    fn a_freed_block_is_the_next_one_of_its_size_and_others_are_not_mixed_in() {
        let cache = BlockCache::new(System);
        // SAFETY: every block is used within its layout and freed once with it.
        unsafe {
            let a = cache.alloc(layout(40, 8));
            let b = cache.alloc(layout(100, 8));
            assert!(!a.is_null() && !b.is_null());
            cache.dealloc(a, layout(40, 8));
            cache.dealloc(b, layout(100, 8));
            assert_eq!(
                cache.alloc(layout(33, 4)),
                a,
                "40 and 33 share the 64-byte class"
            );
            assert_eq!(cache.alloc(layout(128, 16)), b);
            let c = cache.alloc(layout(40, 8));
            assert!(c != a && c != b, "nothing of its class is free");
            for (p, l) in [(a, layout(33, 4)), (b, layout(128, 16)), (c, layout(40, 8))] {
                cache.dealloc(p, l);
            }
        }
    }

    #[test]
    fn blocks_keep_their_bytes_through_reallocation_and_never_overlap() {
        // A random mix of allocations, growths and frees, every block filled with its own
        // byte and checked before it is resized or freed.
        let cache = BlockCache::new(System);
        let mut live: Vec<(*mut u8, Layout, u8)> = Vec::new();
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || crate::collections::xorshift(&mut seed);
        let intact = |(p, l, byte): (*mut u8, Layout, u8)| {
            // SAFETY: `p` is live with layout `l`, all of it written with `byte`.
            unsafe { std::slice::from_raw_parts(p, l.size()) }
                .iter()
                .all(|&b| b == byte)
        };
        for step in 0..20_000u32 {
            let r = next();
            let byte = step as u8;
            if live.len() < 64 && r % 3 != 0 {
                let l = layout(1 + (r >> 8) as usize % 3000, 1 << ((r >> 20) % 5));
                // SAFETY: a non-zero size; the block is written within its layout.
                let p = unsafe { cache.alloc(l) };
                assert!(!p.is_null());
                unsafe { p.write_bytes(byte, l.size()) };
                live.push((p, l, byte));
            } else if !live.is_empty() {
                let i = (r >> 8) as usize % live.len();
                let block = live.swap_remove(i);
                assert!(intact(block), "block {i} was overwritten");
                let (p, l, old_byte) = block;
                if r % 2 == 0 {
                    let size = 1 + (r >> 24) as usize % 3000;
                    // SAFETY: `p` is live with `l`; the kept part is read, then all of it
                    // written.
                    let q = unsafe { cache.realloc(p, l, size) };
                    assert!(!q.is_null());
                    let kept = l.size().min(size);
                    assert!(intact((q, layout(kept, 1), old_byte)), "realloc lost bytes");
                    unsafe { q.write_bytes(byte, size) };
                    live.push((q, layout(size, l.align()), byte));
                } else {
                    // SAFETY: freed once, with its layout.
                    unsafe { cache.dealloc(p, l) };
                }
            }
        }
        for block in live {
            assert!(intact(block));
            // SAFETY: freed once, with its layout.
            unsafe { cache.dealloc(block.0, block.1) };
        }
    }
}
