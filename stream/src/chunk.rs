//! [`Chunk`]: the unit in which a stream moves its elements.
//!
//! A chunk of one element keeps it inline (no allocation): the shape of
//! every stage that emits one element per step (`eval_map`, `emit`,
//! `repeat_eval`, `Stream::block`'s `emit`). Longer chunks own a `Vec`.

use alloc::vec::Vec;
use core::fmt;
use core::ops::Deref;

/// A run of elements a stream emits at once.
///
/// Streams move elements in chunks: a stage's per-element work is a loop
/// over a chunk, and a program step (a pull) is paid per chunk, not per
/// element. A chunk owns its elements; its slice is reachable through
/// `Deref`.
///
/// ```
/// use spindle_effect::stream::Chunk;
///
/// let chunk = Chunk::from(vec![1, 2, 3]);
/// assert_eq!(chunk.len(), 3);
/// assert_eq!(chunk.iter().sum::<i32>(), 6);
/// assert_eq!(chunk.into_vec(), [1, 2, 3]);
/// ```
pub struct Chunk<A> {
    repr: Repr<A>,
}

enum Repr<A> {
    One(A),
    Many(Vec<A>),
}

/// Whether `A` and `B` have the same size (not zero) and alignment and
/// neither has drop glue: a vector of `A`s can then hold `B`s written over
/// them, one place at a time, and a panic halfway leaves nothing to drop.
const fn same_plain_layout<A, B>() -> bool {
    size_of::<A>() == size_of::<B>()
        && size_of::<A>() != 0
        && align_of::<A>() == align_of::<B>()
        && !core::mem::needs_drop::<A>()
        && !core::mem::needs_drop::<B>()
}

/// `f` over `items`, each result written where its element was: the
/// chunk's buffer, already in the cache, is the output's (no allocation,
/// half the memory traffic of a new vector). Only for
/// [`same_plain_layout`] types. Written out rather than left to the
/// standard library's in-place `into_iter().map(f).collect()`, which
/// reuses the buffer too but ran a `map`/`filter`/`fold` pipeline 1.12x
/// slower than this loop (and slower than a new vector).
fn map_in_place<A, B, F: FnMut(A) -> B>(items: Vec<A>, mut f: F) -> Vec<B> {
    /// Frees the buffer if `f` panics (its elements need no drop).
    struct Free<A> {
        ptr: *mut A,
        capacity: usize,
    }
    impl<A> Drop for Free<A> {
        fn drop(&mut self) {
            // SAFETY: `ptr` and `capacity` are those of the vector
            // `map_in_place` took apart (allocated for `capacity` `A`s);
            // a length of 0 drops no element (none needs it).
            drop(unsafe { Vec::from_raw_parts(self.ptr, 0, self.capacity) });
        }
    }
    debug_assert!(same_plain_layout::<A, B>());
    let mut items = core::mem::ManuallyDrop::new(items);
    let (ptr, len, capacity) = (items.as_mut_ptr(), items.len(), items.capacity());
    let free = Free { ptr, capacity };
    for i in 0..len {
        // SAFETY: `i < len`: place `i` holds an `A` not read before (the
        // places before it hold `B`s); it is moved out, and the `B` is
        // written back in its place, which has the size and alignment of
        // a `B` (`same_plain_layout`).
        unsafe {
            let item = ptr.add(i).read();
            ptr.add(i).cast::<B>().write(f(item));
        }
    }
    core::mem::forget(free);
    // SAFETY: the buffer was allocated for `capacity` `A`s, which is the
    // size and alignment of `capacity` `B`s; its first `len` places hold
    // `B`s (written above); the vector it came from is not used again.
    unsafe { Vec::from_raw_parts(ptr.cast::<B>(), len, capacity) }
}

impl<A> Chunk<A> {
    /// An empty chunk.
    pub fn empty() -> Self {
        Chunk {
            repr: Repr::Many(Vec::new()),
        }
    }

    /// A chunk of one element (kept inline, without an allocation).
    pub fn singleton(item: A) -> Self {
        Chunk {
            repr: Repr::One(item),
        }
    }

    /// The elements, as a vector.
    pub fn into_vec(self) -> Vec<A> {
        match self.repr {
            Repr::One(item) => alloc::vec![item],
            Repr::Many(items) => items,
        }
    }

    /// Keeps the first `n` elements (all if there are fewer).
    pub fn truncate(&mut self, n: usize) {
        match &mut self.repr {
            Repr::One(_) if n == 0 => *self = Chunk::empty(),
            Repr::One(_) => {}
            Repr::Many(items) => items.truncate(n),
        }
    }

    /// Drops the first `n` elements (all if there are fewer).
    pub(crate) fn drop_front(&mut self, n: usize) {
        match &mut self.repr {
            Repr::One(_) if n > 0 => *self = Chunk::empty(),
            Repr::One(_) => {}
            Repr::Many(items) => {
                let n = n.min(items.len());
                items.drain(..n);
            }
        }
    }

    /// The elements mapped by `f` (into a vector of the chunk's length,
    /// written by a loop the compiler can vectorize).
    pub fn map<B, F: FnMut(A) -> B>(self, mut f: F) -> Chunk<B> {
        Chunk {
            repr: match self.repr {
                Repr::One(item) => Repr::One(f(item)),
                Repr::Many(items) if same_plain_layout::<A, B>() => {
                    Repr::Many(map_in_place(items, f))
                }
                Repr::Many(items) => {
                    let mut out = Vec::with_capacity(items.len());
                    out.extend(items.into_iter().map(f));
                    Repr::Many(out)
                }
            },
        }
    }

    /// The elements `keep` accepts, in order.
    pub fn filter<F: FnMut(&A) -> bool>(self, mut keep: F) -> Chunk<A> {
        match self.repr {
            Repr::One(item) if keep(&item) => Chunk::singleton(item),
            Repr::One(_) => Chunk::empty(),
            Repr::Many(mut items) => {
                items.retain(keep);
                Chunk {
                    repr: Repr::Many(items),
                }
            }
        }
    }

    /// The values `f` gives, in order, skipping `None`s.
    pub fn filter_map<B, F: FnMut(A) -> Option<B>>(self, mut f: F) -> Chunk<B> {
        match self.repr {
            Repr::One(item) => f(item).map_or_else(Chunk::empty, Chunk::singleton),
            Repr::Many(items) => Chunk {
                repr: Repr::Many(items.into_iter().filter_map(f).collect()),
            },
        }
    }

    /// Adds an element at the end.
    pub(crate) fn push(&mut self, item: A) {
        match &mut self.repr {
            Repr::Many(items) => items.push(item),
            Repr::One(_) => {
                let Repr::One(first) =
                    core::mem::replace(&mut self.repr, Repr::Many(Vec::with_capacity(2)))
                else {
                    unreachable!("matched One above")
                };
                if let Repr::Many(items) = &mut self.repr {
                    items.push(first);
                    items.push(item);
                }
            }
        }
    }

    /// An empty chunk with room for `n` elements.
    pub(crate) fn with_capacity(n: usize) -> Self {
        Chunk {
            repr: Repr::Many(Vec::with_capacity(n)),
        }
    }
}

impl<A> Deref for Chunk<A> {
    type Target = [A];

    fn deref(&self) -> &[A] {
        match &self.repr {
            Repr::One(item) => core::slice::from_ref(item),
            Repr::Many(items) => items,
        }
    }
}

impl<A> Default for Chunk<A> {
    fn default() -> Self {
        Chunk::empty()
    }
}

impl<A: Clone> Clone for Chunk<A> {
    fn clone(&self) -> Self {
        Chunk {
            repr: match &self.repr {
                Repr::One(item) => Repr::One(item.clone()),
                Repr::Many(items) => Repr::Many(items.clone()),
            },
        }
    }
}

impl<A: PartialEq> PartialEq for Chunk<A> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<A: Eq> Eq for Chunk<A> {}

impl<A: fmt::Debug> fmt::Debug for Chunk<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<A> From<Vec<A>> for Chunk<A> {
    fn from(items: Vec<A>) -> Self {
        Chunk {
            repr: Repr::Many(items),
        }
    }
}

impl<A> FromIterator<A> for Chunk<A> {
    fn from_iter<I: IntoIterator<Item = A>>(iter: I) -> Self {
        Chunk {
            repr: Repr::Many(iter.into_iter().collect()),
        }
    }
}

/// The elements of a [`Chunk`], by value.
pub struct IntoIter<A> {
    inner: IntoIterRepr<A>,
}

enum IntoIterRepr<A> {
    One(Option<A>),
    Many(alloc::vec::IntoIter<A>),
}

impl<A> Iterator for IntoIter<A> {
    type Item = A;

    #[inline]
    fn next(&mut self) -> Option<A> {
        match &mut self.inner {
            IntoIterRepr::One(item) => item.take(),
            IntoIterRepr::Many(items) => items.next(),
        }
    }

    /// One dispatch on the representation, then the inner iterator's own
    /// loop (a fold over a chunk's vector is a plain loop).
    #[inline]
    fn fold<B, F: FnMut(B, A) -> B>(self, init: B, f: F) -> B {
        match self.inner {
            IntoIterRepr::One(item) => item.into_iter().fold(init, f),
            IntoIterRepr::Many(items) => items.fold(init, f),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.inner {
            IntoIterRepr::One(item) => {
                let n = usize::from(item.is_some());
                (n, Some(n))
            }
            IntoIterRepr::Many(items) => items.size_hint(),
        }
    }
}

impl<A> ExactSizeIterator for IntoIter<A> {}

impl<A> IntoIterator for Chunk<A> {
    type Item = A;
    type IntoIter = IntoIter<A>;

    fn into_iter(self) -> IntoIter<A> {
        IntoIter {
            inner: match self.repr {
                Repr::One(item) => IntoIterRepr::One(Some(item)),
                Repr::Many(items) => IntoIterRepr::Many(items.into_iter()),
            },
        }
    }
}

impl<'a, A> IntoIterator for &'a Chunk<A> {
    type Item = &'a A;
    type IntoIter = core::slice::Iter<'a, A>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use alloc::vec;

    #[test]
    fn map_over_a_plain_type_writes_into_the_chunks_own_buffer() {
        let items: Vec<u64> = (0..100).collect();
        let buffer = items.as_ptr() as usize;
        let mapped = Chunk::from(items).map(|x| x as i64 * -2).into_vec();
        assert_eq!(mapped, (0..100).map(|x| x * -2).collect::<Vec<i64>>());
        assert_eq!(mapped.as_ptr() as usize, buffer, "no new allocation");
    }

    #[test]
    fn map_to_a_type_of_another_size_or_with_drop_glue_gives_the_same_values() {
        let wider = Chunk::from(vec![1u32, 2, 3]).map(u64::from).into_vec();
        assert_eq!(wider, [1, 2, 3]);
        let owned = Chunk::from(vec![1u64, 2, 3])
            .map(|x| alloc::format!("{x}"))
            .into_vec();
        assert_eq!(owned, ["1", "2", "3"]);
        let floats = Chunk::from(vec![1u32, 2, 3])
            .map(|x| x as f32 / 2.0)
            .into_vec();
        assert_eq!(floats, [0.5, 1.0, 1.5]);
    }

    #[test]
    fn a_panic_while_mapping_in_place_frees_the_buffer() {
        // Under Miri, a buffer left behind fails the run as a leak.
        let chunk = Chunk::from((0..10u64).collect::<Vec<_>>());
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            chunk.map(|x| if x == 5 { panic!("at 5") } else { x + 1 })
        }));
        assert!(result.is_err());
    }
}
