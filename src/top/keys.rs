// SPDX-License-Identifier: Apache-2.0
//! The screen's keys, read off standard input in raw mode. crossterm's own reader spins without end once
//! the terminal hangs up (its read loop ignores end-of-file and EIO), so a closed terminal would leave a
//! root process burning a CPU with its probes attached: here a hang-up is a key of its own.

use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    Up,
    Down,
    Char(char),
    /// q, Esc or Ctrl-C.
    Quit,
    /// The terminal is gone.
    HungUp,
}

/// The keys typed within `wait` (none when it passed without any).
pub fn read(wait: Duration) -> Vec<Key> {
    let mut fds = [libc::pollfd {
        fd: 0,
        events: libc::POLLIN,
        revents: 0,
    }];
    let ms = wait.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: poll reads and writes the one pollfd given.
    let ready = unsafe { libc::poll(fds.as_mut_ptr(), 1, ms) };
    if ready <= 0 {
        return Vec::new();
    }
    if fds[0].revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 && fds[0].revents & libc::POLLIN == 0 {
        return vec![Key::HungUp];
    }
    let mut buf = [0u8; 256];
    // SAFETY: read writes at most buf.len() bytes into buf.
    let n = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
    match n {
        n if n > 0 => parse(&buf[..n as usize]),
        // End of file, or an error other than an interruption: nobody is typing any more.
        0 => vec![Key::HungUp],
        _ if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => Vec::new(),
        _ => vec![Key::HungUp],
    }
}

/// The keys in what one read gave: an escape sequence comes whole, so a lone ESC is the Esc key.
fn parse(bytes: &[u8]) -> Vec<Key> {
    let mut keys = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            0x1b => match bytes.get(i + 1..i + 3) {
                Some([b'[' | b'O', b'A']) => {
                    keys.push(Key::Up);
                    i += 3;
                    continue;
                }
                Some([b'[' | b'O', b'B']) => {
                    keys.push(Key::Down);
                    i += 3;
                    continue;
                }
                _ if i + 1 == bytes.len() => keys.push(Key::Quit),
                // Another sequence (a function key, the mouse): skipped to its final byte.
                _ => {
                    i += 1;
                    while i < bytes.len() && !(bytes[i].is_ascii_alphabetic() || bytes[i] == b'~') {
                        i += 1;
                    }
                }
            },
            0x03 | b'q' | b'Q' => keys.push(Key::Quit),
            b'k' => keys.push(Key::Up),
            b'j' => keys.push(Key::Down),
            b => {
                if b.is_ascii_graphic() {
                    keys.push(Key::Char(b as char));
                }
            }
        }
        i += 1;
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_their_escape_sequences() {
        assert_eq!(parse(b"\x1b[A\x1b[Bs"), [Key::Up, Key::Down, Key::Char('s')]);
        assert_eq!(parse(b"\x1bOA"), [Key::Up]);
        assert_eq!(parse(b"\x1b"), [Key::Quit]);
        assert_eq!(parse(b"\x03"), [Key::Quit]);
        assert_eq!(parse(b"q"), [Key::Quit]);
        // F5 is skipped whole; what follows it still counts.
        assert_eq!(parse(b"\x1b[15~p"), [Key::Char('p')]);
        assert_eq!(parse(b"jk\n"), [Key::Down, Key::Up]);
    }
}
