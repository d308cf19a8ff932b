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
use core::any::TypeId;

use super::run_state::Core;
use crate::sync::Arc;

/// The running fiber's locals, as a `Local` node's closure receives them
/// (`IOLocal`'s operations): a pointer to the fiber's state, valid while
/// the closure runs, which the run-loop does not touch meanwhile. A
/// `delay` with the fiber's locals: the run-loop hands it over in a
/// register, without the spawner a `Start` node's closure is given.
pub(crate) struct FiberLocals {
    core: *mut Core,
}

impl FiberLocals {
    /// The locals of the fiber whose state is `core`, for one closure.
    #[inline(always)]
    pub(crate) fn new(core: &mut Core) -> FiberLocals {
        FiberLocals { core }
    }

    /// The locals of the fiber whose state `core` points at, valid and
    /// untouched by the run-loop while the closure runs (a `Start` node's
    /// spawner: narrow targets run `IOLocal`'s closures so).
    #[cfg(not(target_pointer_width = "64"))]
    pub(super) fn from_ptr(core: *mut Core) -> FiberLocals {
        FiberLocals { core }
    }

    /// The running fiber's value of the local numbered `key`, if it holds
    /// one of type `A`.
    #[inline(always)]
    pub(crate) fn get<A: Clone + 'static>(&self, key: u64) -> Option<A> {
        // SAFETY: the state is alive while the closure runs, and the
        // run-loop does not touch it meanwhile (`new`); only read here.
        let locals = unsafe { (*self.core).locals_ref() }?;
        get(locals, key)
    }

    /// Sets the running fiber's value of the local numbered `key`: in
    /// place when the fiber holds a value for it in a map no child shares
    /// (no allocation), in a new map otherwise.
    #[inline]
    pub(crate) fn set_value<A: Clone + Send + Sync + 'static>(&self, key: u64, value: A) {
        // SAFETY: as in `get`; the only reference to the state made while
        // the closure runs is this one, for this call.
        let core = unsafe { &mut *self.core };
        let value = match core.locals_mut() {
            Some(locals) => match set_in_place(locals, key, value) {
                Ok(()) => return,
                Err(value) => value,
            },
            None => value,
        };
        let locals = with(&core.locals(), key, Some(Box::new(value)));
        core.set_locals(locals);
    }

    /// Sets (`Some`) or removes (`None`) the running fiber's value of the
    /// local numbered `key`.
    pub(crate) fn set<A: LocalValue>(&self, key: u64, value: Option<Box<A>>) {
        // SAFETY: as in `set_value`.
        let core = unsafe { &mut *self.core };
        let locals = with(&core.locals(), key, value);
        core.set_locals(locals);
    }
}

/// A value of a local, as the map keeps it: cloned when a map is copied
/// to set another value.
pub(crate) trait LocalValue: Send + Sync + 'static {
    /// A copy of the value, for a new map.
    fn clone_boxed(&self) -> Box<dyn LocalValue>;
}

impl<A: Clone + Send + Sync + 'static> LocalValue for A {
    fn clone_boxed(&self) -> Box<dyn LocalValue> {
        Box::new(self.clone())
    }
}

/// One value of a fiber's map: the number of its local, the type of the
/// value, and the value.
///
/// The type is kept beside the value (rather than asked of it through
/// `Any`, two calls through its vtable) so that reading it back as the
/// local's type is a compare of two constants and a cast.
struct Entry {
    key: u64,
    type_id: TypeId,
    value: Box<dyn LocalValue>,
}

impl Entry {
    /// The entry of `value` for the local numbered `key`.
    fn new<A: LocalValue>(key: u64, value: Box<A>) -> Entry {
        Entry {
            key,
            type_id: TypeId::of::<A>(),
            value,
        }
    }

    /// The value, if it is an `A`.
    #[inline(always)]
    fn get<A: 'static>(&self) -> Option<&A> {
        if self.type_id == TypeId::of::<A>() {
            // SAFETY: the value is an `A` (its type was recorded from the
            // box it was made of, `Entry::new`, and `with` copies the pair
            // together), so the data pointer of the box points at an `A`.
            Some(unsafe { &*(&*self.value as *const dyn LocalValue).cast::<A>() })
        } else {
            None
        }
    }

    /// The value, if it is an `A`, to replace in place.
    #[inline(always)]
    fn get_mut<A: 'static>(&mut self) -> Option<&mut A> {
        if self.type_id == TypeId::of::<A>() {
            // SAFETY: as in `get`; the box is borrowed mutably through
            // `self`.
            Some(unsafe { &mut *(&mut *self.value as *mut dyn LocalValue).cast::<A>() })
        } else {
            None
        }
    }
}

/// The values a fiber holds, with the number of their local: a vector
/// searched in order (a program holds a few locals; a map's code would
/// cost kilobytes of flash on a microcontroller).
pub(crate) struct LocalMap(Vec<Entry>);

/// A fiber's locals: `None` until the fiber (or a parent before it
/// started it) set one.
pub(crate) type Locals = Option<Arc<LocalMap>>;

/// The value `locals` hold for the local numbered `key`, if they hold one
/// of type `A`.
#[inline(always)]
pub(crate) fn get<A: Clone + 'static>(locals: &Locals, key: u64) -> Option<A> {
    let entry = locals.as_ref()?.0.iter().find(|entry| entry.key == key)?;
    entry.get::<A>().cloned()
}

/// Sets the local numbered `key` to `value` in place, if `locals` are the
/// fiber's alone (no child shares the map) and hold a value of type `A`
/// for it: no allocation. Gives `value` back otherwise.
#[inline(always)]
pub(crate) fn set_in_place<A: 'static>(locals: &mut Locals, key: u64, value: A) -> Result<(), A> {
    let Some(map) = unique(locals) else {
        return Err(value);
    };
    match map.0.iter_mut().find(|entry| entry.key == key) {
        Some(entry) => match entry.get_mut::<A>() {
            Some(slot) => {
                *slot = value;
                Ok(())
            }
            None => Err(value),
        },
        None => Err(value),
    }
}

/// The map of `locals`, to change in place, if no other fiber shares it.
///
/// What `Arc::get_mut` answers, with one relaxed load instead of its
/// compare-and-swap, load and store: no map is ever referenced weakly
/// (nothing here downgrades one), so a strong count of one means that
/// this `Arc`, borrowed mutably, is the only way to the map.
#[inline(always)]
fn unique(locals: &mut Locals) -> Option<&mut LocalMap> {
    let map = locals.as_mut()?;
    if Arc::strong_count(map) != 1 {
        return None;
    }
    // A child that shared the map read it and then dropped its `Arc`
    // with a release decrement, which the count of one just read comes
    // after: this fence orders those reads before the writes to come.
    core::sync::atomic::fence(core::sync::atomic::Ordering::Acquire);
    // SAFETY: the map's only strong reference is `map`, borrowed mutably
    // for the lifetime returned, and it has no weak reference (above):
    // no other reference to the map exists or can be made meanwhile.
    // `Arc::as_ptr` keeps the allocation's write provenance.
    Some(unsafe { &mut *Arc::as_ptr(map).cast_mut() })
}

/// `locals` with the local numbered `key` set to `value` (`None`: removed,
/// so that its default shows again): a new map, the old one untouched.
pub(crate) fn with<A: LocalValue>(locals: &Locals, key: u64, value: Option<Box<A>>) -> Locals {
    let mut map = Vec::new();
    if let Some(old) = locals {
        map.reserve(old.0.len() + 1);
        for entry in &old.0 {
            if entry.key != key {
                map.push(Entry {
                    key: entry.key,
                    type_id: entry.type_id,
                    value: (*entry.value).clone_boxed(),
                });
            }
        }
    }
    if let Some(value) = value {
        map.push(Entry::new(key, value));
    }
    if map.is_empty() {
        None
    } else {
        Some(Arc::new(LocalMap(map)))
    }
}

#[cfg(test)]
mod tests {
    use alloc::boxed::Box;
    use alloc::string::String;

    use super::{get, set_in_place, with};

    #[test]
    fn a_value_reads_back_only_as_its_own_type_and_survives_copies_of_the_map() {
        let one = with(&None, 7, Some(Box::new(String::from("seven"))));
        let two = with(&one, 9, Some(Box::new(9u32)));
        assert_eq!(get::<String>(&two, 7), Some(String::from("seven")));
        assert_eq!(get::<u32>(&two, 9), Some(9));
        // Another type under the same number is not read as it.
        assert_eq!(get::<u64>(&two, 9), None);
        assert_eq!(get::<u32>(&two, 7), None);
        assert_eq!(get::<u32>(&two, 8), None);
        // The map copied first is untouched.
        assert_eq!(get::<u32>(&one, 9), None);
        // Removing a value shows the default again.
        let three = with::<u32>(&two, 9, None);
        assert_eq!(get::<u32>(&three, 9), None);
        assert_eq!(get::<String>(&three, 7), Some(String::from("seven")));
    }

    #[test]
    fn a_value_is_replaced_in_place_only_in_an_unshared_map_and_as_its_own_type() {
        let mut locals = with(&None, 3, Some(Box::new(String::from("a"))));
        assert_eq!(set_in_place(&mut locals, 3, String::from("b")), Ok(()));
        assert_eq!(get::<String>(&locals, 3), Some(String::from("b")));
        // The wrong type, or a number the map does not hold: given back.
        assert_eq!(set_in_place(&mut locals, 3, 5u8), Err(5u8));
        assert_eq!(set_in_place(&mut locals, 4, 5u8), Err(5u8));
        // A map a child shares is not changed in place.
        let child = locals.clone();
        assert_eq!(
            set_in_place(&mut locals, 3, String::from("c")),
            Err(String::from("c"))
        );
        assert_eq!(get::<String>(&child, 3), Some(String::from("b")));
        // Once the child's copy is gone (on another thread here), the map
        // is the fiber's alone again.
        #[cfg(feature = "std")]
        std::thread::spawn(move || drop(child)).join().unwrap();
        #[cfg(not(feature = "std"))]
        drop(child);
        assert_eq!(set_in_place(&mut locals, 3, String::from("d")), Ok(()));
        assert_eq!(get::<String>(&locals, 3), Some(String::from("d")));
    }
}
