//! `serde::Serialize` for [`Event`] and [`Trace`] (feature `serde`), the
//! trace part of a structured fiber dump (io-core's `serde` feature).
//!
//! The shape, as JSON:
//!
//! ```text
//! { "events": [ { "op": "flat_map", "file": "src/main.rs", "line": 89,
//!                 "column": 28, "function": "app::deadlock" } ],
//!   "omitted": 0, "in_motion": false }
//! ```
//!
//! `events` are oldest first (as [`Trace::events`]); an event's `function`
//! is the function its closure was written in ([`Op::closure_function`];
//! in full mode the first user function of the site's backtrace, as the
//! text rendering shows it), `null` for an operation without a closure.

use serde::ser::{Serialize, SerializeStruct, Serializer};

#[cfg(doc)]
use crate::Op;
use crate::{Event, Trace};

impl Serialize for Event {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let location = self.location();
        let mut event = serializer.serialize_struct("Event", 5)?;
        event.serialize_field("op", self.op().name())?;
        event.serialize_field("file", location.file())?;
        event.serialize_field("line", &location.line())?;
        event.serialize_field("column", &location.column())?;
        #[cfg(feature = "full")]
        if let Some(frame) = self.user_frame() {
            event.serialize_field(
                "function",
                &Some(crate::enclosing_function(&frame.function)),
            )?;
            return event.end();
        }
        event.serialize_field("function", &self.op().closure_function())?;
        event.end()
    }
}

impl Serialize for Trace {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut trace = serializer.serialize_struct("Trace", 3)?;
        trace.serialize_field("events", self.events())?;
        trace.serialize_field("omitted", &self.omitted())?;
        trace.serialize_field("in_motion", &self.in_motion())?;
        trace.end()
    }
}
