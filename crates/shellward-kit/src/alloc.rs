//! A small-object allocator for policy components.
//!
//! A policy decision makes a dozen small, short-lived allocations: the arguments the host lowers into the component
//! (`cabi_realloc`), the tokens of the command line, the plan handed back. With the standard library's allocator on
//! `wasm32` (dlmalloc), allocating and freeing them was about 1,900 of the default policy's 13,100 instructions per
//! decision (callgrind, `cargo bench -p shellward-policy --bench decision`); talc measured no better. This allocator
//! serves small blocks from per-size-class free lists: an allocation or a free is a handful of instructions.
//!
//! - Blocks of up to [`MAX_SMALL`] bytes with an alignment of at most 16 come in power-of-two size classes from 16
//!   bytes up. A freed block goes onto its class's free list and is reused by the next allocation of that class;
//!   fresh blocks are cut from 64 KiB chunks obtained from the standard allocator.
//! - Everything else (large or over-aligned blocks) goes to the standard allocator unchanged.
//!
//! Memory held by a class is never returned to another class, so a component's footprint is bounded by its peak use
//! per class: right for policies, whose instances serve many similar decisions.
//!
//! A policy component opts in with one line:
//!
//! ```ignore
//! #[cfg(target_arch = "wasm32")]
//! #[global_allocator]
//! static ALLOCATOR: shellward_kit::alloc::PolicyAllocator = shellward_kit::alloc::PolicyAllocator::new();
//! ```
//!
//! It is for single-threaded programs only (components built for `wasm32-wasip2` are): it takes no locks, and it is
//! `Sync` (so usable as a `static` global allocator) only on `wasm32` without the `atomics` target feature, where a
//! second thread cannot exist. Natively it can still be used as a local value (its unit tests do).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::ptr::null_mut;

/// Largest block served from the size classes (bytes).
pub const MAX_SMALL: usize = 4096;
/// Smallest class: 16 bytes (`1 << MIN_SHIFT`), which also keeps every block 16-byte aligned.
const MIN_SHIFT: u32 = 4;
const CLASSES: usize = (MAX_SMALL.trailing_zeros() - MIN_SHIFT + 1) as usize;
const CHUNK: usize = 64 * 1024;
const ALIGN: usize = 16;

struct State {
    /// Head of each class's free list; a free block's first word points to the next one.
    free: [*mut u8; CLASSES],
    /// The unused rest of the current chunk.
    bump: *mut u8,
    bump_end: *mut u8,
}

/// The allocator; see the [module documentation](self).
pub struct PolicyAllocator {
    state: UnsafeCell<State>,
}

// SAFETY: `Sync` is declared only where no second thread can exist: `wasm32` built without the `atomics` feature
// (components for `wasm32-wasip2` are), where the program has exactly one thread. On every other target the type is
// not `Sync`, so it cannot be installed as a global allocator or shared between threads by mistake.
#[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
unsafe impl Sync for PolicyAllocator {}

impl Default for PolicyAllocator {
    fn default() -> Self {
        PolicyAllocator::new()
    }
}

/// The size class serving `layout`, if it is small.
#[inline]
fn class_of(layout: &Layout) -> Option<usize> {
    let size = layout.size();
    if size > MAX_SMALL || layout.align() > ALIGN {
        return None;
    }
    let shift = size
        .max(1)
        .next_power_of_two()
        .trailing_zeros()
        .max(MIN_SHIFT);
    Some((shift - MIN_SHIFT) as usize)
}

impl PolicyAllocator {
    /// A new allocator with empty free lists.
    pub const fn new() -> PolicyAllocator {
        PolicyAllocator {
            state: UnsafeCell::new(State {
                free: [null_mut(); CLASSES],
                bump: null_mut(),
                bump_end: null_mut(),
            }),
        }
    }

    /// Cuts a fresh block of `class` from the current chunk, taking a new chunk when it is used up.
    #[cold]
    unsafe fn carve(&self, class: usize) -> *mut u8 {
        let size = 1usize << (class as u32 + MIN_SHIFT);
        // SAFETY: single-threaded (the type is `Sync` only where no second thread exists); no other reference to the state is alive.
        let s = unsafe { &mut *self.state.get() };
        if (s.bump_end as usize) - (s.bump as usize) < size {
            // The tail of the old chunk is left unused: at most 4 KiB of 64 KiB.
            // SAFETY: a valid, non-zero-sized layout.
            let chunk = unsafe { System.alloc(Layout::from_size_align_unchecked(CHUNK, ALIGN)) };
            if chunk.is_null() {
                return null_mut();
            }
            s.bump = chunk;
            // SAFETY: one past the end of the chunk just allocated.
            s.bump_end = unsafe { chunk.add(CHUNK) };
        }
        let block = s.bump;
        // SAFETY: `size` bytes are left in the chunk (checked above).
        s.bump = unsafe { s.bump.add(size) };
        block
    }
}

// SAFETY: small blocks are 16-byte aligned, at least as large as requested, and handed out once until freed (a block
// is either on one free list or owned by the program); everything else is delegated to `System` with its own layout,
// and `dealloc`/`realloc` route a block back by the same layout test that allocated it.
unsafe impl GlobalAlloc for PolicyAllocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some(class) = class_of(&layout) else {
            // SAFETY: forwarded unchanged.
            return unsafe { System.alloc(layout) };
        };
        // SAFETY: single-threaded; no other reference to the state is alive.
        let s = unsafe { &mut *self.state.get() };
        let head = s.free[class];
        if head.is_null() {
            // SAFETY: as above.
            return unsafe { self.carve(class) };
        }
        // SAFETY: a free block stores the next free block in its first word (16-byte aligned, at least 16 bytes).
        s.free[class] = unsafe { *(head as *mut *mut u8) };
        head
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let Some(class) = class_of(&layout) else {
            // SAFETY: the block came from `System` with this layout.
            return unsafe { System.dealloc(ptr, layout) };
        };
        // SAFETY: single-threaded; the block is ours and no longer used by the program.
        unsafe {
            let s = &mut *self.state.get();
            *(ptr as *mut *mut u8) = s.free[class];
            s.free[class] = ptr;
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `new_size` with the old alignment is a valid layout (the `GlobalAlloc::realloc` contract).
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (class_of(&layout), class_of(&new_layout)) {
            // Still fits its block.
            (Some(old), Some(new)) if old == new => ptr,
            // SAFETY: forwarded unchanged.
            (None, None) => unsafe { System.realloc(ptr, layout, new_size) },
            _ => {
                // SAFETY: a fresh block for the new layout; the old one is valid for `layout.size()` bytes.
                unsafe {
                    let new = self.alloc(new_layout);
                    if !new.is_null() {
                        std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                    new
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    #[test]
    fn classes_cover_sizes_and_alignments() {
        assert_eq!(class_of(&layout(0, 1)), Some(0));
        assert_eq!(class_of(&layout(16, 8)), Some(0));
        assert_eq!(class_of(&layout(17, 1)), Some(1));
        assert_eq!(class_of(&layout(MAX_SMALL, 16)), Some(CLASSES - 1));
        assert_eq!(class_of(&layout(MAX_SMALL + 1, 1)), None);
        assert_eq!(class_of(&layout(8, 32)), None);
    }

    #[test]
    fn blocks_are_distinct_aligned_reused_and_keep_their_bytes() {
        let a = PolicyAllocator::new();
        // SAFETY: one thread uses this local allocator; every block is used within its layout and freed once.
        unsafe {
            let mut live: Vec<(*mut u8, Layout, u8)> = Vec::new();
            for (i, size) in [1usize, 7, 16, 24, 100, 4096, 5000, 70_000, 3, 33]
                .iter()
                .cycle()
                .take(400)
                .enumerate()
            {
                let l = layout(*size, if i % 3 == 0 { 16 } else { 1 });
                let p = a.alloc(l);
                assert!(!p.is_null());
                assert_eq!(p as usize % l.align(), 0);
                std::ptr::write_bytes(p, i as u8, *size);
                live.push((p, l, i as u8));
                if i % 4 == 3 {
                    // Free an older block: its slot is reused later.
                    let (p, l, v) = live.remove(live.len() / 2);
                    assert!((0..l.size()).all(|k| *p.add(k) == v), "bytes changed");
                    a.dealloc(p, l);
                }
            }
            // No two live blocks overlap, and every block still holds what was written to it.
            let mut spans: Vec<(usize, usize)> = live
                .iter()
                .map(|(p, l, _)| (*p as usize, *p as usize + l.size()))
                .collect();
            spans.sort();
            assert!(
                spans.windows(2).all(|w| w[0].1 <= w[1].0),
                "overlapping blocks"
            );
            for (p, l, v) in live {
                assert!((0..l.size()).all(|k| *p.add(k) == v), "bytes changed");
                a.dealloc(p, l);
            }
            // A freed block is handed out again for the same class.
            let p = a.alloc(layout(40, 8));
            a.dealloc(p, layout(40, 8));
            assert_eq!(a.alloc(layout(64, 1)), p);
        }
    }

    #[test]
    fn realloc_keeps_contents_across_classes_and_to_the_system_allocator() {
        let a = PolicyAllocator::new();
        // SAFETY: one thread uses this local allocator; each block is read and written within its current layout.
        unsafe {
            let mut l = layout(10, 1);
            let mut p = a.alloc(l);
            for k in 0..10 {
                *p.add(k) = k as u8;
            }
            for new_size in [12, 16, 17, 300, 4096, 9000, 100_000, 20, 5] {
                let q = a.realloc(p, l, new_size);
                assert!(!q.is_null());
                let kept = l.size().min(new_size).min(10);
                assert!(
                    (0..kept).all(|k| *q.add(k) == k as u8),
                    "lost bytes at {new_size}"
                );
                p = q;
                l = layout(new_size, 1);
            }
            a.dealloc(p, l);
        }
    }
}
