mod common;
use common::*;
use disksim::virtio::{self, BlkOp, RequestError, RequestHeader, Status};
use disksim::SECTOR_SIZE;

fn hdr(t: u32, sector: u64) -> [u8; 16] {
    RequestHeader { request_type: t, reserved: 0, sector }.to_bytes()
}

#[test]
fn header_round_trips() {
    let h = RequestHeader { request_type: virtio::T_OUT, reserved: 0xdead_beef, sector: 0x0102_0304_0506_0708 };
    let b = h.to_bytes();
    assert_eq!(&b[..4], &[1, 0, 0, 0]);
    assert_eq!(&b[8..], &[8, 7, 6, 5, 4, 3, 2, 1]);
    assert_eq!(RequestHeader::parse(&b).unwrap(), h);
    // Trailing bytes are ignored.
    let mut long = b.to_vec();
    long.extend_from_slice(&[9; 8]);
    assert_eq!(RequestHeader::parse(&long).unwrap(), h);
}

#[test]
fn header_to_op() {
    assert_eq!(RequestHeader::parse(&hdr(0, 5)).unwrap().op(1024), Ok(BlkOp::Read { sector: 5, len: 1024 }));
    assert_eq!(RequestHeader::parse(&hdr(1, 5)).unwrap().op(512), Ok(BlkOp::Write { sector: 5, len: 512 }));
    assert_eq!(RequestHeader::parse(&hdr(4, 0)).unwrap().op(0), Ok(BlkOp::Flush));
    assert_eq!(RequestHeader::parse(&hdr(8, 0)).unwrap().op(20), Ok(BlkOp::GetId));
}

#[test]
fn short_and_garbled_headers_are_rejected() {
    for n in 0..16 {
        assert_eq!(RequestHeader::parse(&vec![0u8; n]), Err(RequestError::ShortHeader(n)));
    }
    let op = |t, s, len| RequestHeader::parse(&hdr(t, s)).unwrap().op(len);
    assert_eq!(op(11, 0, 512), Err(RequestError::UnsupportedType(11))); // DISCARD
    assert_eq!(op(0xffff_ffff, 0, 512), Err(RequestError::UnsupportedType(0xffff_ffff)));
    assert_eq!(op(0, 0, 100), Err(RequestError::Misaligned(100)));
    assert_eq!(op(1, 0, 0), Err(RequestError::EmptyData));
    assert_eq!(op(4, 7, 0), Err(RequestError::NonZeroSector { request_type: 4, sector: 7 }));
    assert_eq!(op(8, 0, 10), Err(RequestError::BadIdBuffer(10)));
    assert_eq!(RequestError::UnsupportedType(11).status(), Status::Unsupp);
    assert_eq!(RequestError::ShortHeader(3).status(), Status::IoErr);
    assert_eq!(Status::Ok as u8, 0);
    assert_eq!(Status::IoErr as u8, 1);
    assert_eq!(Status::Unsupp as u8, 2);
}

#[test]
fn submit_maps_to_disk() {
    let mut d = disk(64);
    let data = pattern(7, 2);
    let w = virtio::submit(&mut d, &hdr(virtio::T_OUT, 4), &data, 0, b"").unwrap();
    assert_eq!(w.status, Status::Ok);
    let r = virtio::submit(&mut d, &hdr(virtio::T_IN, 4), &[], 2 * SECTOR_SIZE, b"").unwrap();
    assert_eq!(r.data_in, data);
    let f = virtio::submit(&mut d, &hdr(virtio::T_FLUSH, 0), &[], 0, b"").unwrap();
    for id in [w.request, r.request, f.request] {
        d.complete(id.unwrap()).unwrap();
    }
    let g = virtio::submit(&mut d, &hdr(virtio::T_GET_ID, 0), &[], 20, b"node-1").unwrap();
    assert_eq!((g.request, g.status), (None, Status::Ok));
    assert_eq!(&g.data_in[..6], b"node-1");
    assert_eq!(g.data_in.len(), 20);
    // Errors: short header, unsupported, out of range.
    let s = virtio::submit(&mut d, &[1, 2, 3], &[], 0, b"").unwrap();
    assert_eq!((s.request, s.status), (None, Status::IoErr));
    let s = virtio::submit(&mut d, &hdr(13, 0), &[], 0, b"").unwrap();
    assert_eq!(s.status, Status::Unsupp);
    let s = virtio::submit(&mut d, &hdr(virtio::T_OUT, 63), &pattern(1, 2), 0, b"").unwrap();
    assert_eq!((s.request, s.status), (None, Status::IoErr));
    assert_eq!(d.outstanding().count(), 0);
    // A corrupt block is surfaced to the caller, not only the guest. (The write
    // completed after the flush was issued, so flush again to make it durable.)
    flush_done(&mut d);
    assert_eq!(d.volatile_writes().count(), 0);
    d.durable_store_mut().inject_corruption(0, 600, 1).unwrap();
    assert!(virtio::submit(&mut d, &hdr(virtio::T_IN, 1), &[], 512, b"").is_err());
}
