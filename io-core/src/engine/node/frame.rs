//! Frames: the continuations on a fiber's explicit stack, two words each
//! (the closure and its tagged vtable, tagged like a node's). Success pops
//! error-handler frames without a call; an error skips `map` and
//! `flat_map` frames until the nearest handler (`run_loop.rs`).

use core::mem::ManuallyDrop;
use core::ptr;

use super::{
    BARE, EndedRegion, FRAME_VTABLE_FIRST, FRAME_VTABLE_KINDS, LOW_BITS, Node, OnError, OnOutcome,
    OnResult, OnSuccess, RegionData, Res, Resume, Tag, bare, has_tag, tag_of, tagged_frame,
    untagged,
};
use crate::engine::erased::{EMPTY_WORD, ErasedFn, FnVTable, Value, Word};

/// A continuation waiting on the explicit stack of a fiber: two words, the
/// closure and its tagged vtable.
pub(crate) struct Frame {
    word: Word,
    vtable: *const (),
}

// SAFETY: frames hold `Send` closures.
unsafe impl Send for Frame {}

/// A frame decoded for matching.
pub(crate) enum FrameKind {
    /// Apply to a success.
    Map(OnSuccess<Value>),
    /// Continue with a program on success.
    FlatMap(OnSuccess<Node>),
    /// Recover from an error with a program; popped for free on success.
    HandleErrorWith(OnError<Node>),
    /// Transform an error; popped for free on success.
    MapError(OnError<Value>),
    /// Fold either outcome into a result.
    Fold(OnResult<Res>),
    /// Fold either outcome into a program.
    FoldWith(OnResult<Node>),
    /// End of an uncancelable region: unmask one level.
    Unmask,
    /// End of a `poll`: mask again.
    Remask,
    /// Run on cancellation only; popped for free otherwise.
    OnCancel(ErasedFn<(), Node>),
    /// Run a finalizer with the outcome, whatever it is.
    GuaranteeCase(OnOutcome),
    /// Gives back what an `Acquire` node took (run once, however the
    /// program it guards ends).
    Release(ErasedFn<(), ()>),
    /// After a finalizer that ran on success: produce this value again (or
    /// the finalizer's error, if it failed).
    RestoreOk(Value),
    /// After a finalizer that ran on an error: fail with this error again
    /// (a finalizer error is then suppressed, not lost).
    RestoreErr(Value),
    /// After a finalizer that ran while the fiber finalizes: go on finalizing.
    ResumeUnwind,
    /// Give an IO block the result of the program it awaits (either side).
    ResumeBlock(Resume),
    /// The end of a traced scope: tracing goes back to this state.
    TraceScope(bool),
    /// The end of a deadline region (`fiber/region.rs`; 64-bit targets
    /// only).
    #[cfg_attr(not(target_pointer_width = "64"), allow(dead_code))]
    RegionEnd(EndedRegion),
}

impl Frame {
    #[inline(always)]
    fn from_value(value: Value, tag: Tag) -> Frame {
        let (word, vtable) = value.into_raw();
        Frame {
            word,
            vtable: tagged_frame(vtable, tag),
        }
    }
    #[inline(always)]
    fn bare(tag: Tag) -> Frame {
        Frame {
            word: EMPTY_WORD,
            vtable: bare(tag),
        }
    }
    #[inline(always)]
    pub(crate) fn unmask() -> Frame {
        Frame::bare(Tag::Unmask)
    }
    #[inline(always)]
    pub(crate) fn remask() -> Frame {
        Frame::bare(Tag::Remask)
    }
    #[inline(always)]
    pub(crate) fn resume_unwind() -> Frame {
        Frame::bare(Tag::ResumeUnwind)
    }
    /// The end of a traced scope; `was_on`: tracing before the scope.
    #[inline(always)]
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    pub(crate) fn trace_scope(was_on: bool) -> Frame {
        Frame {
            word: core::mem::MaybeUninit::new(ptr::without_provenance_mut(was_on as usize)),
            vtable: bare(Tag::TraceScope),
        }
    }
    #[inline(always)]
    pub(crate) fn on_cancel(finalizer: ErasedFn<(), Node>) -> Frame {
        Frame::from_fn(finalizer, Tag::OnCancel)
    }
    #[inline(always)]
    pub(crate) fn guarantee_case(finalizer: OnOutcome) -> Frame {
        Frame::from_fn(finalizer.0, Tag::GuaranteeCase)
    }
    /// What an `Acquire` node took, to give back when its source ends.
    #[inline(always)]
    pub(crate) fn release(release: ErasedFn<(), ()>) -> Frame {
        Frame::from_fn(release, Tag::Release)
    }

    /// A `Release` frame's closure (`None` for any other frame, dropped),
    /// for the run-loop's loop that passes frames on success. On 64-bit
    /// hosts through the full decoding, which the compiler merges with the
    /// loop's other decodings (a separate tag test there cost `map_calls`
    /// 0.6% and `mutex_resource` 1.7% more instructions); on narrower
    /// targets by one tag test, which keeps a second copy of the decoding
    /// out of the run-loop (350 bytes of the thumbv7m firmware's flash).
    #[inline(always)]
    pub(crate) fn into_release(self) -> Option<ErasedFn<(), ()>> {
        #[cfg(target_pointer_width = "64")]
        {
            match self.into_kind() {
                FrameKind::Release(release) => Some(release),
                _ => None,
            }
        }
        #[cfg(not(target_pointer_width = "64"))]
        {
            if !self.is(Tag::Release) {
                return None;
            }
            let this = ManuallyDrop::new(self);
            // SAFETY: a `Release` frame holds the raw parts of an
            // `ErasedFn<(), ()>` (`Frame::release`), its vtable pointer
            // under the tag; they move out once (`this` is not dropped).
            Some(unsafe { ErasedFn::from_raw(this.word, &*untagged(this.vtable).cast()) })
        }
    }
    #[inline(always)]
    pub(crate) fn restore_ok(value: Value) -> Frame {
        Frame::from_value(value, Tag::RestoreOk)
    }
    #[inline(always)]
    pub(crate) fn restore_err(error: Value) -> Frame {
        Frame::from_value(error, Tag::RestoreErr)
    }
    /// The end of a deadline region.
    #[inline(always)]
    pub(crate) fn region_end(data: RegionData) -> Frame {
        Frame::from_value(Value::new(data), Tag::RegionEnd)
    }
    /// The payload of a `RegionEnd` frame, borrowed (`None` for any other
    /// frame).
    #[inline]
    pub(crate) fn region(&self) -> Option<&RegionData> {
        if !self.is(Tag::RegionEnd) {
            return None;
        }
        // SAFETY: a `RegionEnd` frame's word is the payload of a
        // `Value::new::<RegionData>` (`region_end`), owned by the frame,
        // which is borrowed for as long as the reference lives.
        Some(unsafe { crate::engine::erased::peek_word::<RegionData>(&self.word) })
    }
    #[inline(always)]
    fn from_fn<I, O>(f: ErasedFn<I, O>, tag: Tag) -> Frame {
        let (word, vtable) = f.into_raw();
        Frame {
            word,
            vtable: tagged_frame(vtable, tag),
        }
    }
    #[inline(always)]
    pub(crate) fn map(k: OnSuccess<Value>) -> Frame {
        Frame::from_fn(k.0, Tag::Map)
    }
    #[inline(always)]
    pub(crate) fn flat_map(k: OnSuccess<Node>) -> Frame {
        Frame::from_fn(k.0, Tag::FlatMap)
    }
    #[inline(always)]
    pub(crate) fn handle_error_with(k: OnError<Node>) -> Frame {
        Frame::from_fn(k.0, Tag::HandleErrorWith)
    }
    #[inline(always)]
    pub(crate) fn map_err(k: OnError<Value>) -> Frame {
        Frame::from_fn(k.0, Tag::MapError)
    }
    #[inline(always)]
    pub(crate) fn fold(k: OnResult<Res>) -> Frame {
        Frame::from_fn(k.0, Tag::Fold)
    }
    /// An IO block waiting for the result of the program it awaits.
    #[inline(always)]
    pub(crate) fn resume_block(resume: Resume) -> Frame {
        let (word, vtable) = resume.into_raw();
        Frame {
            word,
            vtable: tagged_frame(vtable, Tag::ResumeBlock),
        }
    }
    #[inline(always)]
    pub(crate) fn fold_with(k: OnResult<Node>) -> Frame {
        Frame::from_fn(k.0, Tag::FoldWith)
    }

    /// The frame's kind.
    #[inline(always)]
    pub(crate) fn tag(&self) -> Tag {
        tag_of(self.vtable, FRAME_VTABLE_FIRST)
    }

    /// Whether a value passes this frame without a step: an error
    /// handler (dropped) or a release (called as the value passes). One
    /// test of the tag (the compiler makes the four compares one bit
    /// test), so that skipping a release costs the other frames nothing.
    #[inline(always)]
    pub(crate) fn is_passed_by_value(&self) -> bool {
        self.is(Tag::HandleErrorWith)
            || self.is(Tag::MapError)
            || self.is(Tag::OnCancel)
            || self.is(Tag::Release)
    }

    /// Whether the frame is of kind `tag` (cheaper than `tag() == tag`).
    #[inline(always)]
    pub(crate) fn is(&self, tag: Tag) -> bool {
        has_tag(self.vtable, tag, FRAME_VTABLE_KINDS)
    }

    /// Whether a result passes this frame without a new program being
    /// evaluated: a value passes error handlers, `map` and `fold`
    /// (`attempt`, `redeem`); an error passes `map`, `flat_map` (skipped),
    /// `map_err`, `fold` and `on_cancel`. (Used to place the cancellation
    /// check at the end of an uncancelable region; see `run_loop.rs`.)
    #[inline]
    pub(crate) fn is_passed_through(&self, ok: bool) -> bool {
        match self.tag() {
            Tag::Map
            | Tag::Fold
            | Tag::MapError
            | Tag::OnCancel
            | Tag::TraceScope
            | Tag::RegionEnd => true,
            Tag::HandleErrorWith => ok,
            Tag::FlatMap => !ok,
            _ => false,
        }
    }

    /// Whether this is a fold frame (`attempt`, `redeem`): it turns a value
    /// or an error into a value (both of its constructors return `Ok`).
    #[inline]
    pub(crate) fn is_fold(&self) -> bool {
        self.is(Tag::Fold)
    }

    /// Whether this frame masks again what reaches it: the end of a `poll`,
    /// or a `guarantee_case` finalizer (which runs masked).
    #[inline]
    pub(crate) fn masks_again(&self) -> bool {
        self.is(Tag::Remask) || self.is(Tag::GuaranteeCase)
    }

    /// Whether the frame has no payload (its vtable pointer is a bare tag).
    #[inline(always)]
    fn is_bare(&self) -> bool {
        if super::COMPACT {
            self.vtable.addr() & LOW_BITS == BARE
        } else {
            matches!(
                self.tag(),
                Tag::Unmask | Tag::Remask | Tag::ResumeUnwind | Tag::TraceScope
            )
        }
    }

    /// Decodes the frame, giving up ownership of its closure.
    #[inline(always)]
    pub(crate) fn into_kind(self) -> FrameKind {
        let this = ManuallyDrop::new(self);
        let vt = untagged(this.vtable);
        // SAFETY: the tag says which constructor stored the closure, so the
        // vtable has the type named in each arm; the closure is moved once.
        unsafe {
            match tag_of(this.vtable, FRAME_VTABLE_FIRST) {
                Tag::Map => FrameKind::Map(OnSuccess(ErasedFn::from_raw(this.word, &*vt.cast()))),
                Tag::FlatMap => {
                    FrameKind::FlatMap(OnSuccess(ErasedFn::from_raw(this.word, &*vt.cast())))
                }
                Tag::HandleErrorWith => {
                    FrameKind::HandleErrorWith(OnError(ErasedFn::from_raw(this.word, &*vt.cast())))
                }
                Tag::MapError => {
                    FrameKind::MapError(OnError(ErasedFn::from_raw(this.word, &*vt.cast())))
                }
                Tag::Fold => FrameKind::Fold(OnResult(ErasedFn::from_raw(this.word, &*vt.cast()))),
                Tag::FoldWith => {
                    FrameKind::FoldWith(OnResult(ErasedFn::from_raw(this.word, &*vt.cast())))
                }
                Tag::Unmask => FrameKind::Unmask,
                Tag::Remask => FrameKind::Remask,
                Tag::ResumeUnwind => FrameKind::ResumeUnwind,
                Tag::TraceScope => FrameKind::TraceScope(this.word.assume_init().addr() != 0),
                Tag::OnCancel => FrameKind::OnCancel(ErasedFn::from_raw(this.word, &*vt.cast())),
                Tag::GuaranteeCase => {
                    FrameKind::GuaranteeCase(OnOutcome(ErasedFn::from_raw(this.word, &*vt.cast())))
                }
                Tag::Release => FrameKind::Release(ErasedFn::from_raw(this.word, &*vt.cast())),
                Tag::RestoreOk => FrameKind::RestoreOk(Value::from_raw(this.word, &*vt.cast())),
                Tag::RestoreErr => FrameKind::RestoreErr(Value::from_raw(this.word, &*vt.cast())),
                Tag::ResumeBlock => {
                    FrameKind::ResumeBlock(Resume::from_raw(this.word, &*vt.cast()))
                }
                #[cfg(target_pointer_width = "64")]
                Tag::RegionEnd => {
                    FrameKind::RegionEnd(EndedRegion::new(Value::from_raw(this.word, &*vt.cast())))
                }
                // (No region on narrower targets: `Node::region`.)
                #[cfg(not(target_pointer_width = "64"))]
                Tag::RegionEnd => unreachable!("io-core: a region's frame on a narrow target"),
                _ => unreachable!("io-core: a node tag on a frame"),
            }
        }
    }

    /// Drops the payload without decoding the frame's full kind: every
    /// frame vtable (`FnVTable`, `ValueVTable`, both `repr(C)`) starts with
    /// the drop entry.
    #[inline(always)]
    fn drop_closure(&mut self) {
        if self.is_bare() {
            return;
        }
        let vt = self
            .vtable
            .map_addr(|a| a & !LOW_BITS)
            .cast::<FnVTable<Value, Value>>();
        // SAFETY: a frame with a payload has an `FnVTable<I, O>` or a
        // `ValueVTable`, both `repr(C)` with `drop: Option<unsafe fn(Word)>`
        // first; the payload has not been moved out (`into_kind` forgets
        // the frame).
        unsafe {
            if let Some(drop) = (*vt).drop {
                drop(self.word)
            }
        }
    }
}

impl Drop for Frame {
    #[inline(always)]
    fn drop(&mut self) {
        self.drop_closure();
    }
}
