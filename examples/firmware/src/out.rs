//! Output (the architecture's console) without `core::fmt`, whose
//! formatting machinery would be most of a small image: text and `u32`s
//! only, a line at a time (`say!`). Shared by both programs.

/// A piece of a line.
pub trait Piece {
    /// Appends itself to `line`.
    fn put(&self, line: &mut Line);
}
impl Piece for &str {
    fn put(&self, line: &mut Line) {
        line.push(self.as_bytes());
    }
}
impl Piece for u32 {
    fn put(&self, line: &mut Line) {
        let mut digits = [0u8; 10];
        let mut i = digits.len();
        let mut n = *self;
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        line.push(&digits[i..]);
    }
}

/// A line being built (longer lines are cut).
pub struct Line {
    buf: [u8; 160],
    len: usize,
}

impl Line {
    /// An empty line.
    pub fn new() -> Self {
        Line {
            buf: [0; 160],
            len: 0,
        }
    }
    /// Appends `bytes`, as many as fit.
    fn push(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
        self.len += n;
    }
    /// Writes the line and a newline to the console.
    pub fn print(mut self) {
        self.push(b"\n");
        crate::arch::write(&self.buf[..self.len]);
    }
}

/// Prints its pieces (text and `u32`s) as one line.
macro_rules! say {
    ($($piece:expr),* $(,)?) => {{
        let mut line = $crate::out::Line::new();
        $( $crate::out::Piece::put(&$piece, &mut line); )*
        line.print();
    }};
}
