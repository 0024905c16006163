//! A user-mode Linux node's console (`con0`, UML's standard output): a
//! regular file in the node's run directory, read at the node's protocol
//! messages.
//!
//! Bytes are attributed at the next protocol message the node sends: the
//! node writes its console synchronously and is stopped while a message of
//! its is being handled, so exactly the bytes written since its previous
//! message are there to read.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// The file in the node's run directory that its console (`con0`, UML's
/// standard output) is written to.
///
/// A file, not a pipe: UML registers a write interrupt on its console
/// descriptor, and the host sends the writer of a pipe SIGIO each time the
/// reader drains it, at a moment the host scheduler picks. Now and then
/// (2 runs in 240 of one seed, measured on a loaded host) the guest then
/// took a "console-write" interrupt that other runs did not, and the guest
/// kernel mixes every interrupt into its random pool: a UDP client got
/// another ephemeral port, and replays did not reproduce. Nobody signals
/// the writer of a regular file.
pub const CONSOLE_FILE: &str = "console.out";

/// The read end of a node's console file.
pub(super) struct Console {
    file: File,
    /// Bytes read since the node's last message, not yet stamped.
    unstamped: Vec<u8>,
    /// [`Self::read_new`]'s buffer, allocated once.
    scratch: Box<[u8]>,
}

impl Console {
    /// Creates the console file in `run_dir`; returns its read end and the
    /// write end for the node's standard output.
    pub fn create(run_dir: &Path) -> io::Result<(Console, File)> {
        let path = run_dir.join(CONSOLE_FILE);
        let writer = File::create(&path)?;
        let file = File::open(&path)?;
        Ok((Console { file, unstamped: Vec::new(), scratch: vec![0u8; 65536].into_boxed_slice() }, writer))
    }

    /// Moves what the node appended to its console file since the last
    /// read into the unstamped buffer.
    ///
    /// This runs at every protocol message, so it must be cheap: one
    /// scratch buffer for the node's life (zeroing a fresh 64 KiB one was
    /// most of simcluster's instructions per grant, measured with
    /// callgrind), and no read after a short one: the node is stopped
    /// while we drain it, so a short read has reached the end of what it
    /// wrote.
    pub fn read_new(&mut self) {
        let buf = &mut self.scratch[..];
        loop {
            match self.file.read(buf) {
                Ok(n) => {
                    self.unstamped.extend_from_slice(&buf[..n]);
                    if n < buf.len() {
                        break; // all of it, for now
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
    }

    /// The bytes read and not stamped yet.
    pub fn take_unstamped(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.unstamped)
    }
}
