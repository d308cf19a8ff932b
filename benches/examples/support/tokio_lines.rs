//! The tokio side of the socket-lines measurement, shared by the stream
//! bench and the `socket_lines` example (tokio is a dev-dependency, so it
//! cannot live in the benches library).

use std::net::SocketAddr;

use tokio::io::AsyncBufReadExt;

/// Lines and their bytes (line breaks not counted) read from `addr` with
/// tokio's `BufReader::lines` (a buffer of `capacity`).
pub async fn tokio_lines(addr: SocketAddr, capacity: usize) -> std::io::Result<(u64, u64)> {
    let socket = tokio::net::TcpStream::connect(addr).await?;
    let mut lines = tokio::io::BufReader::with_capacity(capacity, socket).lines();
    let (mut n, mut bytes) = (0u64, 0u64);
    while let Some(line) = lines.next_line().await? {
        n += 1;
        bytes += line.len() as u64;
    }
    Ok((n, bytes))
}
