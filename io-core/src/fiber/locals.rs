//! A fiber's local values ([`IOLocal`](crate::IOLocal)): a small map from
//! a local's number to its value, shared between a parent and the children
//! it starts until one of them sets a value.
//!
//! The map (a short vector) is immutable behind an `Arc`: a child fiber starts with a clone
//! of its parent's `Arc` (one reference count, whatever the number of
//! values), and a `set` makes a new map with the value changed, so that a
//! change in a child never reaches its parent, nor a change in the parent
//! a child started before it. A fiber that never touches a local has no
//! map at all (its rarely used state holds `None`): starting a child
//! copies `None`.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::any::Any;

use crate::sync::Arc;

/// A value of a local, as the map keeps it: cloned when read, and when a
/// map is copied to set another value.
pub(crate) trait LocalValue: Send + Sync + 'static {
    /// The value itself, to downcast to the local's type.
    fn as_any(&self) -> &dyn Any;
    /// The value itself, to replace in place.
    fn as_any_mut(&mut self) -> &mut dyn Any;
    /// A copy of the value, for a new map.
    fn clone_boxed(&self) -> Box<dyn LocalValue>;
}

impl<A: Clone + Send + Sync + 'static> LocalValue for A {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }

    fn clone_boxed(&self) -> Box<dyn LocalValue> {
        Box::new(self.clone())
    }
}

/// The values a fiber holds, with the number of their local: a vector
/// searched in order (a program holds a few locals; a map's code would
/// cost kilobytes of flash on a microcontroller).
pub(crate) struct LocalMap(Vec<(u64, Box<dyn LocalValue>)>);

/// A fiber's locals: `None` until the fiber (or a parent before it
/// started it) set one.
pub(crate) type Locals = Option<Arc<LocalMap>>;

/// The value `locals` hold for the local numbered `key`, if they hold one
/// of type `A`.
pub(crate) fn get<A: Clone + 'static>(locals: &Locals, key: u64) -> Option<A> {
    let (_, value) = locals.as_ref()?.0.iter().find(|(k, _)| *k == key)?;
    (**value).as_any().downcast_ref::<A>().cloned()
}

/// Sets the local numbered `key` to `value` in place, if `locals` are the
/// fiber's alone (no child shares the map) and hold a value of type `A`
/// for it: no allocation. Gives `value` back otherwise.
pub(crate) fn set_in_place<A: 'static>(locals: &mut Locals, key: u64, value: A) -> Result<(), A> {
    let Some(map) = locals.as_mut().and_then(Arc::get_mut) else {
        return Err(value);
    };
    match map.0.iter_mut().find(|(k, _)| *k == key) {
        Some((_, slot)) => match (**slot).as_any_mut().downcast_mut::<A>() {
            Some(slot) => {
                *slot = value;
                Ok(())
            }
            None => Err(value),
        },
        None => Err(value),
    }
}

/// `locals` with the local numbered `key` set to `value` (`None`: removed,
/// so that its default shows again): a new map, the old one untouched.
pub(crate) fn with(locals: &Locals, key: u64, value: Option<Box<dyn LocalValue>>) -> Locals {
    let mut map = Vec::new();
    if let Some(old) = locals {
        map.reserve(old.0.len() + 1);
        for (k, v) in &old.0 {
            if *k != key {
                map.push((*k, (**v).clone_boxed()));
            }
        }
    }
    if let Some(value) = value {
        map.push((key, value));
    }
    if map.is_empty() {
        None
    } else {
        Some(Arc::new(LocalMap(map)))
    }
}
