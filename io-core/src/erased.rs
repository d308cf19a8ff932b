//! Type-erased values and closures that keep small things out of the heap.
//!
//! The run-loop interprets one untyped node enum, so every value that flows
//! between steps and every continuation closure is stored with its type erased.
//! A `Box<dyn Any>` per value and per closure would cost a heap allocation per
//! step; the seed discussion "Optimize IO's encoding" shows that this is where
//! an effect runtime's speed is won or lost. So both [`Value`] and
//! [`ErasedFn`] keep anything of at most [`INLINE_WORDS`] machine words (and
//! at most word alignment) *inline*, next to a pointer to a static vtable that
//! is generated per type. Only larger things are boxed.
//!
//! # Invariants
//!
//! * A [`Value`] made by `Value::new::<T>` is only ever read back as `T`
//!   (`take::<T>`). The typed `IO<A, E>` handle guarantees this statically;
//!   debug builds check it with the stored `TypeId`.
//! * An [`ErasedFn<I, O>`] made from `F` is called at most once: `call`
//!   consumes it. Dropping it without a call drops `F`.
//! * Everything stored is `Send + 'static`, which is why the containers are
//!   `Send` (they are not `Sync`: nothing shares them).

use core::any::TypeId;
use core::marker::PhantomData;
use core::mem::{self, ManuallyDrop, MaybeUninit};
use core::ptr;

use alloc::boxed::Box;

/// How many machine words are stored without a heap allocation.
pub(crate) const INLINE_WORDS: usize = 1;

/// Inline storage: word-aligned, `INLINE_WORDS` words.
#[repr(C)]
pub(crate) struct Storage([MaybeUninit<usize>; INLINE_WORDS]);

impl Storage {
    #[inline(always)]
    const fn uninit() -> Self {
        Storage([MaybeUninit::uninit(); INLINE_WORDS])
    }

    #[inline(always)]
    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.0.as_mut_ptr().cast()
    }
}

/// Whether `T` is stored inline (decided at compile time for each `T`).
#[inline(always)]
const fn fits_inline<T>() -> bool {
    mem::size_of::<T>() <= mem::size_of::<Storage>()
        && mem::align_of::<T>() <= mem::align_of::<Storage>()
}

/// Writes `t` into `storage`, inline or boxed.
#[inline(always)]
fn store<T>(t: T) -> Storage {
    let mut storage = Storage::uninit();
    if fits_inline::<T>() {
        // SAFETY: `T` fits in the storage in size and alignment (checked just
        // above), and the storage is uninitialised, so nothing is overwritten.
        unsafe { ptr::write(storage.as_mut_ptr().cast::<T>(), t) };
    } else {
        let boxed: *mut T = Box::into_raw(Box::new(t));
        // SAFETY: a thin pointer fits in one word of the word-aligned storage.
        unsafe { ptr::write(storage.as_mut_ptr().cast::<*mut T>(), boxed) };
    }
    storage
}

/// Moves the `T` out of `storage`.
///
/// # Safety
/// * `storage` was filled by `store::<T>` and not read since.
#[inline(always)]
unsafe fn load<T>(storage: &mut Storage) -> T {
    if fits_inline::<T>() {
        // SAFETY: by the precondition the storage holds an inline `T`.
        unsafe { ptr::read(storage.as_mut_ptr().cast::<T>()) }
    } else {
        // SAFETY: by the precondition the storage holds a `Box<T>` pointer
        // made by `Box::into_raw`, read here exactly once.
        unsafe {
            let boxed = ptr::read(storage.as_mut_ptr().cast::<*mut T>());
            *Box::from_raw(boxed)
        }
    }
}

/// Drops the `T` in `storage` in place.
///
/// # Safety
/// * `storage` was filled by `store::<T>` and not read since.
unsafe fn drop_stored<T>(storage: *mut Storage) {
    // SAFETY: forwarded precondition; `storage` is valid for writes.
    drop(unsafe { load::<T>(&mut *storage) });
}

/// The drop entry of a vtable: `None` when dropping a `T` does nothing and
/// the storage is inline, so that dropping such an erased value is free.
const fn drop_fn<T>() -> Option<unsafe fn(*mut Storage)> {
    if fits_inline::<T>() && !mem::needs_drop::<T>() {
        None
    } else {
        Some(drop_stored::<T>)
    }
}

// ---------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------

struct ValueVTable {
    drop: Option<unsafe fn(*mut Storage)>,
    type_id: fn() -> TypeId,
}

trait HasValueVTable {
    const VTABLE: &'static ValueVTable;
}

impl<T: 'static> HasValueVTable for T {
    const VTABLE: &'static ValueVTable = &ValueVTable {
        drop: drop_fn::<T>(),
        type_id: TypeId::of::<T>,
    };
}

/// A value of some `Send + 'static` type, with the type erased.
pub(crate) struct Value {
    storage: Storage,
    vtable: &'static ValueVTable,
}

// SAFETY: `Value::new` only accepts `Send` types, and a `Value` is never
// shared (it has no `&self` access to its contents).
unsafe impl Send for Value {}

impl Value {
    /// Erases `t`. No allocation when `T` fits in [`INLINE_WORDS`] words.
    #[inline(always)]
    pub(crate) fn new<T: Send + 'static>(t: T) -> Value {
        Value {
            storage: store(t),
            vtable: <T as HasValueVTable>::VTABLE,
        }
    }

    /// The unit value, the result of effects that produce nothing.
    #[inline(always)]
    pub(crate) fn unit() -> Value {
        Value::new(())
    }

    /// Takes the value back as the type it was made from.
    ///
    /// # Safety
    /// * The value was made by `Value::new::<T>` (debug builds check this).
    #[inline(always)]
    pub(crate) unsafe fn take<T: 'static>(self) -> T {
        debug_assert!(
            (self.vtable.type_id)() == TypeId::of::<T>(),
            "io-core: a value was read back as `{}`, which is not its type",
            core::any::type_name::<T>()
        );
        let mut this = ManuallyDrop::new(self);
        // SAFETY: the storage holds a `T` (precondition) that has not been
        // read, and `ManuallyDrop` keeps `Drop` from touching it again.
        unsafe { load::<T>(&mut this.storage) }
    }
}

impl Drop for Value {
    #[inline(always)]
    fn drop(&mut self) {
        if let Some(drop) = self.vtable.drop {
            // SAFETY: the storage holds the value the vtable was made for and
            // it has not been taken (`take` forgets `self`).
            unsafe { drop(&mut self.storage) }
        }
    }
}

// ---------------------------------------------------------------------------
// Closures
// ---------------------------------------------------------------------------

/// Vtable of an erased `FnOnce(I) -> O`.
pub(crate) struct FnVTable<I, O> {
    call: unsafe fn(*mut Storage, I) -> O,
    drop: Option<unsafe fn(*mut Storage)>,
}

/// An erased `FnOnce(I) -> O + Send + 'static`, inline when small.
pub(crate) struct ErasedFn<I: 'static, O: 'static> {
    storage: Storage,
    vtable: &'static FnVTable<I, O>,
    _marker: PhantomData<fn(I) -> O>,
}

// SAFETY: `ErasedFn` is only made from `Send` closures and never shared.
unsafe impl<I: 'static, O: 'static> Send for ErasedFn<I, O> {}

/// Adapts a typed closure to the erased calling convention.
///
/// `Adapter` turns the erased input into the closure's own argument and its
/// result into the erased output, so one generic `ErasedFn` serves every
/// frame kind of the run-loop.
pub(crate) trait Adapter<I, O, F> {
    /// Calls `f` with the erased input.
    ///
    /// # Safety
    /// * `input` holds what `F` expects (the typed API guarantees it).
    unsafe fn call(f: F, input: I) -> O;
}

struct VTableFor<A, F, I, O>(PhantomData<(A, F, I, O)>);

impl<A, F, I: 'static, O: 'static> VTableFor<A, F, I, O>
where
    A: Adapter<I, O, F>,
    F: Send + 'static,
{
    const VTABLE: &'static FnVTable<I, O> = &FnVTable {
        call: Self::call,
        drop: drop_fn::<F>(),
    };

    /// # Safety
    /// * `storage` holds an unread `F`; the input satisfies `A::call`.
    unsafe fn call(storage: *mut Storage, input: I) -> O {
        // SAFETY: forwarded preconditions; the closure is read exactly once.
        unsafe {
            let f = load::<F>(&mut *storage);
            A::call(f, input)
        }
    }
}

impl<I: 'static, O: 'static> ErasedFn<I, O> {
    /// Erases `f`, to be called through the adapter `A`.
    #[inline(always)]
    pub(crate) fn new<A, F>(f: F) -> Self
    where
        A: Adapter<I, O, F>,
        F: Send + 'static,
    {
        ErasedFn {
            storage: store(f),
            vtable: VTableFor::<A, F, I, O>::VTABLE,
            _marker: PhantomData,
        }
    }

    /// Calls the closure, consuming it.
    ///
    /// # Safety
    /// * `input` has the type the adapter of this closure expects.
    #[inline(always)]
    pub(crate) unsafe fn call(self, input: I) -> O {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: the storage holds the closure the vtable was made for, not
        // yet read; `ManuallyDrop` keeps `Drop` from touching it again.
        unsafe { (this.vtable.call)(&mut this.storage, input) }
    }
}

impl<I: 'static, O: 'static> Drop for ErasedFn<I, O> {
    #[inline(always)]
    fn drop(&mut self) {
        if let Some(drop) = self.vtable.drop {
            // SAFETY: the closure has not been called (`call` forgets `self`).
            unsafe { drop(&mut self.storage) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;
    use alloc::sync::Arc;
    use alloc::vec;
    use alloc::vec::Vec;

    struct Plain;
    impl<F: FnOnce(u64) -> u64> Adapter<u64, u64, F> for Plain {
        unsafe fn call(f: F, input: u64) -> u64 {
            f(input)
        }
    }

    #[test]
    fn small_values_round_trip_inline_and_large_values_round_trip_boxed() {
        assert!(fits_inline::<u64>());
        assert!(fits_inline::<String>());
        assert!(!fits_inline::<[u64; 4]>());
        // SAFETY: each value is read back as the type it was made from.
        unsafe {
            assert_eq!(Value::new(7u8).take::<u8>(), 7);
            assert_eq!(
                Value::new(String::from("spindle")).take::<String>(),
                "spindle"
            );
            assert_eq!(Value::new([1u64, 2, 3, 4]).take::<[u64; 4]>(), [1, 2, 3, 4]);
            assert_eq!(Value::new(vec![1u32; 100]).take::<Vec<u32>>().len(), 100);
            Value::unit().take::<()>();
        }
    }

    #[test]
    fn dropping_an_unread_value_drops_its_contents_exactly_once() {
        let counter = Arc::new(());
        drop(Value::new(counter.clone()));
        drop(Value::new([
            counter.clone(),
            counter.clone(),
            counter.clone(),
            counter.clone(),
        ]));
        assert_eq!(Arc::strong_count(&counter), 1);
    }

    #[test]
    fn erased_closures_run_once_and_drop_their_captures_when_not_called() {
        let counter = Arc::new(());
        let c = counter.clone();
        let small = ErasedFn::<u64, u64>::new::<Plain, _>(move |x| {
            let _keep = &c;
            x + 1
        });
        // SAFETY: the adapter expects a `u64`.
        assert_eq!(unsafe { small.call(41) }, 42);
        assert_eq!(Arc::strong_count(&counter), 1);

        let big = [
            counter.clone(),
            counter.clone(),
            counter.clone(),
            counter.clone(),
        ];
        let f = ErasedFn::<u64, u64>::new::<Plain, _>(move |x| x + big.len() as u64);
        assert_eq!(Arc::strong_count(&counter), 5);
        drop(f);
        assert_eq!(Arc::strong_count(&counter), 1);
    }
}
