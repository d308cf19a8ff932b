//! [`Chunk`]: the unit in which a stream moves its elements.

use alloc::vec::Vec;
use core::ops::Deref;

/// A run of elements a stream emits at once.
///
/// Streams move elements in chunks: a stage's per-element work is a loop
/// over a chunk, and a program step (a pull) is paid per chunk, not per
/// element. A chunk owns its elements (a `Vec`); its slice is reachable
/// through `Deref`.
///
/// ```
/// use spindle_effect::stream::Chunk;
///
/// let chunk = Chunk::from(vec![1, 2, 3]);
/// assert_eq!(chunk.len(), 3);
/// assert_eq!(chunk.iter().sum::<i32>(), 6);
/// assert_eq!(chunk.into_vec(), [1, 2, 3]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Chunk<A> {
    items: Vec<A>,
}

impl<A> Chunk<A> {
    /// An empty chunk.
    pub fn empty() -> Self {
        Chunk { items: Vec::new() }
    }

    /// A chunk of one element.
    pub fn singleton(item: A) -> Self {
        Chunk {
            items: alloc::vec![item],
        }
    }

    /// The elements, as a vector.
    pub fn into_vec(self) -> Vec<A> {
        self.items
    }

    /// Keeps the first `n` elements (all if there are fewer).
    pub fn truncate(&mut self, n: usize) {
        self.items.truncate(n);
    }

    /// Drops the first `n` elements (all if there are fewer).
    pub(crate) fn drop_front(&mut self, n: usize) {
        let n = n.min(self.items.len());
        self.items.drain(..n);
    }

    /// The elements mapped by `f` (in place when the layouts allow).
    pub fn map<B, F: FnMut(A) -> B>(self, f: F) -> Chunk<B> {
        Chunk {
            items: self.items.into_iter().map(f).collect(),
        }
    }

    /// The elements `keep` accepts, in order.
    pub fn filter<F: FnMut(&A) -> bool>(mut self, keep: F) -> Chunk<A> {
        self.items.retain(keep);
        self
    }

    /// The values `f` gives, in order, skipping `None`s.
    pub fn filter_map<B, F: FnMut(A) -> Option<B>>(self, f: F) -> Chunk<B> {
        Chunk {
            items: self.items.into_iter().filter_map(f).collect(),
        }
    }

    pub(crate) fn push(&mut self, item: A) {
        self.items.push(item);
    }

    pub(crate) fn with_capacity(n: usize) -> Self {
        Chunk {
            items: Vec::with_capacity(n),
        }
    }
}

impl<A> Deref for Chunk<A> {
    type Target = [A];

    fn deref(&self) -> &[A] {
        &self.items
    }
}

impl<A> From<Vec<A>> for Chunk<A> {
    fn from(items: Vec<A>) -> Self {
        Chunk { items }
    }
}

impl<A> FromIterator<A> for Chunk<A> {
    fn from_iter<I: IntoIterator<Item = A>>(iter: I) -> Self {
        Chunk {
            items: iter.into_iter().collect(),
        }
    }
}

impl<A> IntoIterator for Chunk<A> {
    type Item = A;
    type IntoIter = alloc::vec::IntoIter<A>;

    fn into_iter(self) -> Self::IntoIter {
        self.items.into_iter()
    }
}

impl<'a, A> IntoIterator for &'a Chunk<A> {
    type Item = &'a A;
    type IntoIter = core::slice::Iter<'a, A>;

    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}
