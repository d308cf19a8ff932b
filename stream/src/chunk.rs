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
