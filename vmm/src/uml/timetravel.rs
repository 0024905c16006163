//! The controller side of user-mode Linux's external time-travel protocol.
//!
//! The wire format is `struct um_timetravel_msg` from
//! `include/uapi/linux/um_timetravel.h` (linux 6.1): three little-endian
//! fields, `op: u32`, `seq: u32`, `time: u64`, 16 bytes in all, over a
//! `SOCK_STREAM` unix socket that the guest connects to
//! (`time-travel=ext:ID:PATH`).
//!
//! Invariants the kernel relies on (arch/um/kernel/time.c):
//! - every message the guest sends (START, REQUEST, WAIT, GET, UPDATE,
//!   GET_TOD) is answered by exactly one ACK carrying the same `seq`; the
//!   guest blocks until it arrives, so while we hold an ACK the guest is
//!   stopped;
//! - after WAIT the guest is stopped until it receives RUN; RUN must carry
//!   exactly the time the guest last REQUESTed (the kernel BUGs otherwise,
//!   unless an interrupt event was queued in between), and the guest ACKs
//!   the RUN.

use std::io::{self, Read, Write};

/// Size of one message on the wire.
pub const MSG_LEN: usize = 16;

/// Operation codes of `enum um_timetravel_ops`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Op {
    Ack,
    Start,
    Request,
    Wait,
    Get,
    Update,
    Run,
    FreeUntil,
    GetTod,
}

impl Op {
    pub fn code(self) -> u32 {
        match self {
            Op::Ack => 0,
            Op::Start => 1,
            Op::Request => 2,
            Op::Wait => 3,
            Op::Get => 4,
            Op::Update => 5,
            Op::Run => 6,
            Op::FreeUntil => 7,
            Op::GetTod => 8,
        }
    }

    pub fn from_code(code: u32) -> Option<Op> {
        Some(match code {
            0 => Op::Ack,
            1 => Op::Start,
            2 => Op::Request,
            3 => Op::Wait,
            4 => Op::Get,
            5 => Op::Update,
            6 => Op::Run,
            7 => Op::FreeUntil,
            8 => Op::GetTod,
            _ => return None,
        })
    }
}

/// One protocol message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Msg {
    pub op: Op,
    pub seq: u32,
    pub time: u64,
}

/// A message that is not valid on the wire.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    #[error("unknown time-travel operation {0}")]
    UnknownOp(u32),
    #[error("time-travel connection closed by the guest")]
    Closed,
    #[error("time-travel connection: {0}")]
    Io(#[from] io::Error),
}

impl Msg {
    pub fn new(op: Op, seq: u32, time: u64) -> Msg {
        Msg { op, seq, time }
    }

    pub fn encode(&self) -> [u8; MSG_LEN] {
        let mut b = [0u8; MSG_LEN];
        b[0..4].copy_from_slice(&self.op.code().to_le_bytes());
        b[4..8].copy_from_slice(&self.seq.to_le_bytes());
        b[8..16].copy_from_slice(&self.time.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8; MSG_LEN]) -> Result<Msg, ProtocolError> {
        let code = u32::from_le_bytes(b[0..4].try_into().unwrap());
        let op = Op::from_code(code).ok_or(ProtocolError::UnknownOp(code))?;
        Ok(Msg {
            op,
            seq: u32::from_le_bytes(b[4..8].try_into().unwrap()),
            time: u64::from_le_bytes(b[8..16].try_into().unwrap()),
        })
    }

    /// Reads exactly one message; a clean EOF at a message boundary is
    /// [`ProtocolError::Closed`] (the guest exited).
    pub fn read_from(r: &mut impl Read) -> Result<Msg, ProtocolError> {
        let mut b = [0u8; MSG_LEN];
        let mut got = 0;
        while got < MSG_LEN {
            match r.read(&mut b[got..]) {
                Ok(0) => return Err(ProtocolError::Closed),
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        Msg::decode(&b)
    }

    pub fn write_to(&self, w: &mut impl Write) -> Result<(), ProtocolError> {
        w.write_all(&self.encode())?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_every_op() {
        for code in 0..=8 {
            let op = Op::from_code(code).unwrap();
            let m = Msg::new(op, 7 + code, 0x0102_0304_0506_0708);
            assert_eq!(Msg::decode(&m.encode()).unwrap(), m);
        }
    }

    #[test]
    fn wire_layout_is_little_endian_op_seq_time() {
        let m = Msg::new(Op::Run, 2, 1_000_000_000);
        let b = m.encode();
        assert_eq!(&b[0..4], &[6, 0, 0, 0]);
        assert_eq!(&b[4..8], &[2, 0, 0, 0]);
        assert_eq!(u64::from_le_bytes(b[8..16].try_into().unwrap()), 1_000_000_000);
    }

    #[test]
    fn unknown_op_is_an_error() {
        let mut b = Msg::new(Op::Ack, 1, 0).encode();
        b[0] = 99;
        assert!(matches!(Msg::decode(&b), Err(ProtocolError::UnknownOp(99))));
    }

    #[test]
    fn eof_mid_stream_is_closed() {
        let mut r: &[u8] = &[1, 0, 0];
        assert!(matches!(Msg::read_from(&mut r), Err(ProtocolError::Closed)));
    }
}
