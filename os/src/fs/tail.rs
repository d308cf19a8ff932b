//! [`tail`]: a growing file as an endless stream (`tail -F`).

use std::io::{self, SeekFrom};
use std::path::Path;
use std::time::Duration;

use spindle_core::IO;
use spindle_core::untraced::Untraced as _;
use spindle_stream::{Chunk, InvalidArgument, Stream};

use super::File;

/// What one look at the file found.
enum Look {
    /// New bytes, and the offset after them.
    Bytes(Vec<u8>, u64),
    /// Nothing new: wait `poll` and look again.
    Nothing(u64),
}

/// The bytes of the file at `path` from `offset` on, and then every byte
/// appended to it, for ever: a chunk per read of at most `chunk_size`
/// bytes (above 0); at the end of the file the stream sleeps `poll`
/// (above zero; on the executor's clock, so virtual under TestControl)
/// and looks again. A file cut shorter than what was read (truncated,
/// or rotated by copy and truncate) is read again from its start. The
/// file is opened when the stream is first pulled and closed exactly once
/// when the stream ends (a downstream `take`, an error, a cancellation).
/// fs2's `Files.tail`, and `tail -f`'s loop; no code is copied.
pub fn tail(
    path: impl AsRef<Path>,
    offset: u64,
    chunk_size: usize,
    poll: Duration,
) -> Result<Stream<u8, io::Error>, InvalidArgument> {
    let chunk_size = InvalidArgument::above_zero("fs::tail", "a chunk size above 0", chunk_size)?;
    if poll.is_zero() {
        return Err(InvalidArgument {
            operation: "fs::tail",
            requirement: "a poll period above zero",
        });
    }
    let path = path.as_ref().to_path_buf();
    Ok(Stream::resource(File::open(path)).flat_map(move |file| {
        Stream::unfold_chunk_eval(offset, move |position| {
            look(&file, position, chunk_size, poll)
                .map_untraced(move |(bytes, next)| Some((Chunk::from(bytes), next)))
        })
    }))
}

/// Reads the next bytes at `position` (waiting `poll` between looks
/// until there are some): the bytes and the position after them.
fn look(
    file: &File,
    position: u64,
    chunk_size: usize,
    poll: Duration,
) -> IO<(Vec<u8>, u64), io::Error> {
    let file = file.clone();
    IO::tail_rec_untraced(position, move |position| {
        file.with_untraced("tail", move |f| {
            let len = f.len()?;
            // Cut shorter than what was read: from the start again.
            let position = if len < position { 0 } else { position };
            if len == position {
                return Ok(Look::Nothing(position));
            }
            f.seek(SeekFrom::Start(position))?;
            let bytes = f.read_up_to(chunk_size)?;
            let next = position + bytes.len() as u64;
            Ok(if bytes.is_empty() {
                Look::Nothing(position)
            } else {
                Look::Bytes(bytes, next)
            })
        })
        .flat_map_untraced(move |look| match look {
            Look::Bytes(bytes, next) => IO::pure(std::ops::ControlFlow::Break((bytes, next))),
            Look::Nothing(position) => {
                IO::sleep(poll).map_untraced(move |()| std::ops::ControlFlow::Continue(position))
            }
        })
    })
}
