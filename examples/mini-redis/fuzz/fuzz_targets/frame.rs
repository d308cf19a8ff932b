//! Fuzzes the RESP2 decoder: the input, split at a point the fuzzer chooses,
//! is fed in two parts to a decoder with small limits; every frame decoded
//! must come back from its encoding, and reading it as a command must not
//! panic.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use spindle_mini_redis::cmd::Command;
use spindle_mini_redis::frame::{Decoder, Frame, Limits};

const LIMITS: Limits = Limits {
    max_bulk: 256,
    max_array: 64,
    max_depth: 4,
    max_line: 64,
};

/// Decodes `parts` fed one after another, up to the first error.
fn decode(parts: &[&[u8]]) -> (Vec<Frame>, bool) {
    let mut decoder = Decoder::new(LIMITS);
    let mut buf = BytesMut::new();
    let mut frames = Vec::new();
    for part in parts {
        buf.extend_from_slice(part);
        // The server skips empty lines between requests.
        while decoder.skip_empty_lines(&mut buf) {
            match decoder.decode(&mut buf) {
                Ok(Some(frame)) => frames.push(frame),
                Ok(None) => break,
                Err(_) => return (frames, true),
            }
        }
    }
    (frames, false)
}

fuzz_target!(|data: &[u8]| {
    let Some(([a, b], input)) = data.split_first_chunk::<2>() else {
        return;
    };
    let at = usize::from(u16::from_le_bytes([*a, *b])) % (input.len() + 1);
    let (first, second) = input.split_at(at);
    let (frames, failed) = decode(&[first, second]);
    // The split point changes nothing.
    assert_eq!(decode(&[input]), (frames.clone(), failed));
    for frame in frames {
        let mut wire = Vec::new();
        frame.encode(&mut wire);
        let (again, failed) = decode(&[&wire]);
        assert!(!failed, "the encoding of {frame:?} does not decode");
        assert_eq!(again, vec![frame.clone()]);
        let _ = Command::from_frame(frame);
    }
});
