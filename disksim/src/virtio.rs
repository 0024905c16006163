//! virtio-blk requests, independent of guest memory access.
//!
//! The transport glue (vhost-user or virtio-mmio, elsewhere) walks a descriptor
//! chain, hands the 16-byte header to [`RequestHeader::parse`], the driver's
//! data to [`submit`], and later writes the status byte once the engine has
//! completed the request. Everything here is a pure function of byte slices
//! and the [`Disk`], so it can be tested without a guest.
//!
//! Layout (virtio 1.x, 5.2.6): `le32 type; le32 reserved; le64 sector;`
//! then data, then one status byte written by the device. Sector numbers are in
//! 512-byte units whatever the block size.
//!
//! virtio-blk has no FUA flag: Linux sends a flush before and after a
//! REQ_FUA write, so OUT requests map to non-FUA writes.

use crate::disk::{Disk, DiskError, RequestId};
use crate::store::StoreError;
use crate::SECTOR_SIZE;

/// `VIRTIO_BLK_T_IN`: read.
pub const T_IN: u32 = 0;
/// `VIRTIO_BLK_T_OUT`: write.
pub const T_OUT: u32 = 1;
/// `VIRTIO_BLK_T_FLUSH`.
pub const T_FLUSH: u32 = 4;
/// `VIRTIO_BLK_T_GET_ID`: the device serial, 20 bytes.
pub const T_GET_ID: u32 = 8;
/// Size of the request header.
pub const HEADER_LEN: usize = 16;
/// Size of the GET_ID answer.
pub const ID_BYTES: usize = 20;

/// The status byte the device writes at the end of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Status {
    /// VIRTIO_BLK_S_OK: the request succeeded.
    Ok = 0,
    /// VIRTIO_BLK_S_IOERR: the request failed.
    IoErr = 1,
    /// VIRTIO_BLK_S_UNSUPP: the device does not know the request type.
    Unsupp = 2,
}

/// A parsed request header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestHeader {
    /// VIRTIO_BLK_T_* (IN, OUT, FLUSH, GET_ID; with the FUA flag on OUT).
    pub request_type: u32,
    /// Legacy `ioprio`; kept so that headers round-trip.
    pub reserved: u32,
    /// The first sector (512 bytes each) the request reads or writes.
    pub sector: u64,
}

/// Why a header or request cannot be served.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The header descriptor is shorter than a header.
    #[error("request header is {0} bytes, needs {HEADER_LEN}")]
    ShortHeader(usize),
    /// A request type this device does not serve.
    #[error("unsupported request type {0}")]
    UnsupportedType(u32),
    /// Data whose length is not a whole number of sectors.
    #[error("data length {0} is not a multiple of {SECTOR_SIZE}")]
    Misaligned(usize),
    /// A read or write with no data buffers.
    #[error("empty data for a read or write")]
    EmptyData,
    /// FLUSH and GET_ID must carry sector 0.
    #[error("request type {request_type} carries sector {sector}, expected 0")]
    NonZeroSector {
        /// The request's type.
        request_type: u32,
        /// The sector it carried.
        sector: u64,
    },
    /// GET_ID's buffer is not [`ID_BYTES`] long.
    #[error("GET_ID needs a {ID_BYTES}-byte buffer, got {0}")]
    BadIdBuffer(usize),
}

impl RequestError {
    /// The status a device reports for this error.
    pub fn status(&self) -> Status {
        match self {
            RequestError::UnsupportedType(_) => Status::Unsupp,
            _ => Status::IoErr,
        }
    }
}

/// What a request asks of the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlkOp {
    /// Read `len` bytes from `sector` on.
    Read {
        /// The first sector.
        sector: u64,
        /// Bytes to read, a whole number of sectors.
        len: usize,
    },
    /// Write `len` bytes from `sector` on.
    Write {
        /// The first sector.
        sector: u64,
        /// Bytes to write, a whole number of sectors.
        len: usize,
    },
    /// Make every acknowledged write durable.
    Flush,
    /// The device's id string.
    GetId,
}

impl RequestHeader {
    /// Parses the first 16 bytes of `bytes` (extra bytes are ignored: some
    /// drivers put data in the same descriptor).
    pub fn parse(bytes: &[u8]) -> Result<Self, RequestError> {
        if bytes.len() < HEADER_LEN {
            return Err(RequestError::ShortHeader(bytes.len()));
        }
        let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().expect("4 bytes"));
        Ok(RequestHeader {
            request_type: u32_at(0),
            reserved: u32_at(4),
            sector: u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes")),
        })
    }

    /// The 16-byte wire form.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..4].copy_from_slice(&self.request_type.to_le_bytes());
        b[4..8].copy_from_slice(&self.reserved.to_le_bytes());
        b[8..16].copy_from_slice(&self.sector.to_le_bytes());
        b
    }

    /// Maps the header plus the data length (bytes the driver supplies for OUT,
    /// or the writable buffer size, status byte excluded, for IN and GET_ID) to
    /// an operation.
    pub fn op(&self, data_len: usize) -> Result<BlkOp, RequestError> {
        let sector = self.sector;
        match self.request_type {
            T_IN | T_OUT => {
                if data_len == 0 {
                    return Err(RequestError::EmptyData);
                }
                if data_len % SECTOR_SIZE != 0 {
                    return Err(RequestError::Misaligned(data_len));
                }
                Ok(if self.request_type == T_IN {
                    BlkOp::Read { sector, len: data_len }
                } else {
                    BlkOp::Write { sector, len: data_len }
                })
            }
            T_FLUSH | T_GET_ID if sector != 0 => {
                Err(RequestError::NonZeroSector { request_type: self.request_type, sector })
            }
            T_FLUSH => Ok(BlkOp::Flush),
            T_GET_ID if data_len < ID_BYTES => Err(RequestError::BadIdBuffer(data_len)),
            T_GET_ID => Ok(BlkOp::GetId),
            t => Err(RequestError::UnsupportedType(t)),
        }
    }
}

/// The result of [`submit`]: what to tell the guest once the engine completes
/// `request` (or at once, when `request` is `None`: requests that fail
/// before reaching the disk, and GET_ID, which never touches it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Submitted {
    /// The disk's request, to complete later; `None` when answered at once.
    pub request: Option<RequestId>,
    /// The status byte to write once it completes.
    pub status: Status,
    /// Bytes to copy into the driver's writable buffers (reads, GET_ID).
    pub data_in: Vec<u8>,
}

impl Submitted {
    fn now(status: Status) -> Self {
        Submitted { request: None, status, data_in: Vec::new() }
    }
}

/// Serves one request: parses `header`, applies it to `disk`, and returns what
/// the guest gets. `data_out` is the driver's data for OUT; `in_len` the size of
/// the writable data buffers for IN / GET_ID. `serial` is the GET_ID answer
/// (truncated or zero-padded to 20 bytes).
///
/// Disk errors become `IoErr`; a corrupt block is returned as `Err` as well,
/// because the engine must hear about it rather than the guest alone.
pub fn submit(
    disk: &mut Disk,
    header: &[u8],
    data_out: &[u8],
    in_len: usize,
    serial: &[u8],
) -> Result<Submitted, StoreError> {
    let h = match RequestHeader::parse(header) {
        Ok(h) => h,
        Err(e) => return Ok(Submitted::now(e.status())),
    };
    let len = if h.request_type == T_OUT { data_out.len() } else { in_len };
    let op = match h.op(len) {
        Ok(op) => op,
        Err(e) => return Ok(Submitted::now(e.status())),
    };
    let r = match op {
        BlkOp::Read { sector, len } => disk.read(sector, len),
        BlkOp::Write { sector, .. } => disk.write(sector, data_out, false).map(|id| (id, Vec::new())),
        BlkOp::Flush => Ok((disk.flush(), Vec::new())),
        BlkOp::GetId => {
            let mut id = vec![0u8; ID_BYTES];
            let n = serial.len().min(ID_BYTES);
            id[..n].copy_from_slice(&serial[..n]);
            return Ok(Submitted { request: None, status: Status::Ok, data_in: id });
        }
    };
    match r {
        Ok((id, data_in)) => Ok(Submitted { request: Some(id), status: Status::Ok, data_in }),
        Err(DiskError::Store(e @ StoreError::CorruptBlock { .. })) => Err(e),
        Err(_) => Ok(Submitted::now(Status::IoErr)),
    }
}
