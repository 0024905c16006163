//! Classic libpcap capture files with nanosecond timestamps.
//!
//! Format (all fields little-endian, written explicitly so the bytes do not
//! depend on the host): a 24-byte global header with magic `0xa1b23c4d`
//! (nanosecond resolution), version 2.4, `LINKTYPE_ETHERNET`; then per frame
//! a 16-byte record header (seconds, nanoseconds, captured length, original
//! length) and the captured bytes. Timestamps are *virtual* time, so a
//! capture is as reproducible as the execution.

use std::collections::BTreeMap;
use std::io::{self, Write};

use simtime::VirtualTime;

use crate::addr::NodeId;
use crate::network::Delivery;

/// Magic number of a nanosecond-resolution pcap file.
pub const MAGIC_NANOS: u32 = 0xa1b2_3c4d;
/// `LINKTYPE_ETHERNET`.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Default snapshot length: enough for any frame we carry.
pub const DEFAULT_SNAPLEN: u32 = 262_144;
/// Size of the global header.
pub const GLOBAL_HEADER_LEN: usize = 24;
/// Size of a record header.
pub const RECORD_HEADER_LEN: usize = 16;

/// Writes one pcap stream to `W`.
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    out: W,
    snaplen: u32,
    frames: u64,
}

/// The 24-byte global header.
pub fn global_header(snaplen: u32) -> [u8; GLOBAL_HEADER_LEN] {
    let mut h = [0u8; GLOBAL_HEADER_LEN];
    h[0..4].copy_from_slice(&MAGIC_NANOS.to_le_bytes());
    h[4..6].copy_from_slice(&2u16.to_le_bytes()); // version major
    h[6..8].copy_from_slice(&4u16.to_le_bytes()); // version minor
                                                  // thiszone (i32) = 0, sigfigs (u32) = 0
    h[16..20].copy_from_slice(&snaplen.to_le_bytes());
    h[20..24].copy_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
    h
}

impl<W: Write> PcapWriter<W> {
    /// Writes the global header with [`DEFAULT_SNAPLEN`].
    pub fn new(out: W) -> io::Result<Self> {
        Self::with_snaplen(out, DEFAULT_SNAPLEN)
    }

    /// Writes the global header; frames longer than `snaplen` are truncated
    /// in the file (their original length is still recorded).
    pub fn with_snaplen(mut out: W, snaplen: u32) -> io::Result<Self> {
        out.write_all(&global_header(snaplen))?;
        Ok(PcapWriter { out, snaplen, frames: 0 })
    }

    /// Appends one frame seen at virtual time `time` (an error past pcap's
    /// 32-bit seconds, about 136 years).
    pub fn write_frame(&mut self, time: VirtualTime, frame: &[u8]) -> io::Result<()> {
        let time_ns = time.as_ns();
        let secs = u32::try_from(time_ns / 1_000_000_000)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "virtual time beyond pcap's 32-bit seconds"))?;
        let nanos = (time_ns % 1_000_000_000) as u32;
        let orig = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        let incl = orig.min(self.snaplen);
        let mut rec = [0u8; RECORD_HEADER_LEN];
        rec[0..4].copy_from_slice(&secs.to_le_bytes());
        rec[4..8].copy_from_slice(&nanos.to_le_bytes());
        rec[8..12].copy_from_slice(&incl.to_le_bytes());
        rec[12..16].copy_from_slice(&orig.to_le_bytes());
        self.out.write_all(&rec)?;
        self.out.write_all(&frame[..incl as usize])?;
        self.frames += 1;
        Ok(())
    }

    /// Frames written so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Flushes the writer underneath.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// The writer underneath.
    pub fn get_ref(&self) -> &W {
        &self.out
    }

    /// The writer underneath, giving up the capture.
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// The captures of one execution: per node (what it sent and what it
/// received) and optionally the whole network (every frame once, when sent,
/// as a tap at the sender's port sees it; lost frames included).
///
/// The engine calls [`Capture::on_send`] for every `Network::send` and
/// [`Capture::on_deliver`] for every delivery it hands to a guest.
#[derive(Debug)]
pub struct Capture<W: Write> {
    nodes: BTreeMap<NodeId, PcapWriter<W>>,
    all: Option<PcapWriter<W>>,
}

impl<W: Write> Default for Capture<W> {
    fn default() -> Self {
        Capture { nodes: BTreeMap::new(), all: None }
    }
}

impl<W: Write> Capture<W> {
    /// A capture of nothing yet: no node's file and no file of all frames.
    pub fn new() -> Self {
        Self::default()
    }

    /// Captures `node`'s traffic into `out` (replacing any previous writer).
    pub fn add_node(&mut self, node: NodeId, out: W) -> io::Result<()> {
        self.nodes.insert(node, PcapWriter::new(out)?);
        Ok(())
    }

    /// Captures the whole network into `out`.
    pub fn set_network(&mut self, out: W) -> io::Result<()> {
        self.all = Some(PcapWriter::new(out)?);
        Ok(())
    }

    /// `from` sent `frame` at `now`.
    pub fn on_send(&mut self, now: VirtualTime, from: NodeId, frame: &[u8]) -> io::Result<()> {
        if let Some(w) = self.nodes.get_mut(&from) {
            w.write_frame(now, frame)?;
        }
        if let Some(w) = &mut self.all {
            w.write_frame(now, frame)?;
        }
        Ok(())
    }

    /// `d` reached its receiver at `d.time`.
    pub fn on_deliver(&mut self, d: &Delivery) -> io::Result<()> {
        match self.nodes.get_mut(&d.to) {
            Some(w) => w.write_frame(d.time, &d.frame),
            None => Ok(()),
        }
    }

    /// `node`'s writer, when its frames are captured.
    pub fn node(&self, node: NodeId) -> Option<&PcapWriter<W>> {
        self.nodes.get(&node)
    }

    /// The writer of every frame on the network, when there is one.
    pub fn network(&self) -> Option<&PcapWriter<W>> {
        self.all.as_ref()
    }

    /// Flushes every writer (nodes in id order, then the network one).
    pub fn flush(&mut self) -> io::Result<()> {
        for w in self.nodes.values_mut() {
            w.flush()?;
        }
        if let Some(w) = &mut self.all {
            w.flush()?;
        }
        Ok(())
    }

    /// The writers back, e.g. to close files or inspect buffers.
    pub fn into_parts(self) -> (BTreeMap<NodeId, W>, Option<W>) {
        (self.nodes.into_iter().map(|(n, w)| (n, w.into_inner())).collect(), self.all.map(PcapWriter::into_inner))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_record_bytes() {
        let mut w = PcapWriter::with_snaplen(Vec::new(), 4).unwrap();
        w.write_frame(VirtualTime::from_ns(3_000_000_007), &[1, 2, 3, 4, 5, 6]).unwrap();
        let b = w.into_inner();
        assert_eq!(&b[..4], &[0x4d, 0x3c, 0xb2, 0xa1]);
        assert_eq!(&b[4..8], &[2, 0, 4, 0]);
        assert_eq!(&b[16..20], &4u32.to_le_bytes());
        assert_eq!(&b[20..24], &[1, 0, 0, 0]);
        let r = &b[24..];
        assert_eq!(&r[0..4], &3u32.to_le_bytes());
        assert_eq!(&r[4..8], &7u32.to_le_bytes());
        assert_eq!(&r[8..12], &4u32.to_le_bytes(), "truncated to snaplen");
        assert_eq!(&r[12..16], &6u32.to_le_bytes(), "original length kept");
        assert_eq!(&r[16..], &[1, 2, 3, 4]);
    }

    #[test]
    fn time_overflow_is_an_error() {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        assert!(w.write_frame(VirtualTime::MAX, &[0; 14]).is_err());
    }
}
