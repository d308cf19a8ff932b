//! Properties of the RESP2 decoder and encoder: any frame comes back from
//! its encoding however the bytes are split, and no input makes the decoder
//! panic.

use bytes::{Bytes, BytesMut};
use proptest::collection::vec;
use proptest::prelude::*;
use spindle_mini_redis::cmd::Command;
use spindle_mini_redis::frame::{Decoder, Frame, FrameError, Limits};

/// Text without `\r` or `\n` (the encoder writes those as spaces).
fn line_text() -> impl Strategy<Value = String> {
    "[^\r\n]{0,24}"
}

/// Any frame, arrays nested at most 4 deep.
fn frame() -> impl Strategy<Value = Frame> {
    let leaf = prop_oneof![
        line_text().prop_map(Frame::Simple),
        line_text().prop_map(Frame::Error),
        any::<i64>().prop_map(Frame::Integer),
        vec(any::<u8>(), 0..40).prop_map(|data| Frame::Bulk(Bytes::from(data))),
        Just(Frame::Null),
    ];
    leaf.prop_recursive(4, 64, 6, |inner| vec(inner, 0..6).prop_map(Frame::Array))
}

/// Feeds `input` to a fresh decoder in pieces ending at `cuts` (positions,
/// in any order), collecting every frame until the first error.
fn decode_split(input: &[u8], cuts: &[usize], limits: Limits) -> (Vec<Frame>, Option<FrameError>) {
    let mut ends: Vec<usize> = cuts.iter().map(|&cut| cut.min(input.len())).collect();
    ends.push(input.len());
    ends.sort_unstable();
    let mut decoder = Decoder::new(limits);
    let mut buf = BytesMut::new();
    let mut frames = Vec::new();
    let mut start = 0;
    for end in ends {
        buf.extend_from_slice(&input[start..end]);
        start = end;
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(frame)) => frames.push(frame),
                Ok(None) => break,
                Err(error) => return (frames, Some(error)),
            }
        }
    }
    (frames, None)
}

fn encode_all(frames: &[Frame]) -> Vec<u8> {
    let mut out = Vec::new();
    for frame in frames {
        frame.encode(&mut out);
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn frames_come_back_from_their_encoding_however_it_is_split(
        frames in vec(frame(), 1..6),
        cuts in vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let wire = encode_all(&frames);
        let cuts: Vec<usize> = cuts.iter().map(|cut| cut.index(wire.len() + 1)).collect();
        let (decoded, error) = decode_split(&wire, &cuts, Limits::default());
        prop_assert_eq!(error, None);
        prop_assert_eq!(decoded, frames);
    }

    #[test]
    fn frames_come_back_when_fed_byte_by_byte(frame in frame()) {
        let wire = encode_all(std::slice::from_ref(&frame));
        let cuts: Vec<usize> = (0..wire.len()).collect();
        let (decoded, error) = decode_split(&wire, &cuts, Limits::default());
        prop_assert_eq!(error, None);
        prop_assert_eq!(decoded, vec![frame]);
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_split_points_do_not_change_the_outcome(
        input in vec(any::<u8>(), 0..256),
        cut in any::<prop::sample::Index>(),
    ) {
        let limits = Limits { max_bulk: 64, max_array: 16, max_depth: 3, max_line: 32 };
        let whole = decode_split(&input, &[], limits);
        let split = decode_split(&input, &[cut.index(input.len() + 1)], limits);
        prop_assert_eq!(&whole, &split);
        for frame in whole.0 {
            // Whatever decoded re-encodes to bytes that decode to it.
            let wire = encode_all(std::slice::from_ref(&frame));
            let (again, error) = decode_split(&wire, &[], limits);
            prop_assert_eq!(error, None);
            prop_assert_eq!(again, vec![frame.clone()]);
            let _ = Command::from_frame(frame);
        }
    }

    #[test]
    fn arbitrary_resp_shaped_bytes_never_panic(
        pieces in vec(
            prop_oneof![
                Just(&b"*"[..]), Just(&b"$"[..]), Just(&b":"[..]), Just(&b"+"[..]),
                Just(&b"-"[..]), Just(&b"\r\n"[..]), Just(&b"\r"[..]), Just(&b"\n"[..]),
                Just(&b"-1"[..]), Just(&b"0"[..]), Just(&b"1"[..]), Just(&b"2"[..]),
                Just(&b"99999999999999999999"[..]), Just(&b"a"[..]),
            ],
            0..64,
        ),
        cut in any::<prop::sample::Index>(),
    ) {
        let input = pieces.concat();
        let limits = Limits { max_bulk: 64, max_array: 16, max_depth: 3, max_line: 32 };
        let whole = decode_split(&input, &[], limits);
        let split = decode_split(&input, &[cut.index(input.len() + 1)], limits);
        prop_assert_eq!(whole, split);
    }

    #[test]
    fn commands_come_back_from_their_frames(
        key in vec(any::<u8>(), 0..16),
        value in vec(any::<u8>(), 0..16),
        ms in proptest::option::of(1u64..=i64::MAX as u64),
    ) {
        let command = Command::Set {
            key: Bytes::from(key),
            value: Bytes::from(value),
            expire: ms.map(std::time::Duration::from_millis),
        };
        let wire = encode_all(&[command.clone().into_frame()]);
        let (frames, error) = decode_split(&wire, &[], Limits::default());
        prop_assert_eq!(error, None);
        prop_assert_eq!(frames.len(), 1);
        let decoded = Command::from_frame(frames.into_iter().next().unwrap_or(Frame::Null));
        prop_assert_eq!(decoded, Ok(command));
    }
}
