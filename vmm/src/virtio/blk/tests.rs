use super::*;
use crate::virtio::testing::{memory, DriverQueue};
use disksim::virtio::{RequestHeader, T_FLUSH, T_GET_ID, T_IN, T_OUT};
use disksim::BlockStore;
use vm_memory::{Bytes, GuestAddress};

fn setup() -> (VirtioBlk, Queues, DriverQueue) {
    let mem = memory(1 << 20);
    let dq = DriverQueue::new(&mem, 0x1000, 64);
    let mut dev = VirtioBlk::new(Disk::new(BlockStore::zeros(2048)), BlkConfig::default());
    dev.ack_features(dev.features());
    let queues = Queues { queues: vec![dq.device_queue(256)], mem };
    (dev, queues, dq)
}

fn header(qs: &Queues, at: u64, t: u32, sector: u64) {
    let h = RequestHeader { request_type: t, reserved: 0, sector };
    qs.mem.write_slice(&h.to_bytes(), GuestAddress(at)).unwrap();
}

fn status(qs: &Queues, at: u64) -> u8 {
    qs.mem.read_obj(GuestAddress(at)).unwrap()
}

#[test]
fn config_reports_capacity_seg_max_blk_size() {
    let (dev, _, _) = setup();
    let c = dev.config();
    assert_eq!(u64::from_le_bytes(c[0..8].try_into().unwrap()), 2048);
    assert_eq!(u32::from_le_bytes(c[12..16].try_into().unwrap()), 254);
    assert_eq!(u32::from_le_bytes(c[20..24].try_into().unwrap()), 512);
}

#[test]
fn write_flush_read_complete_when_the_engine_says() {
    let (mut dev, mut qs, mut dq) = setup();
    // WRITE 1024 bytes at sector 4, data split over two descriptors.
    header(&qs, 0x10000, T_OUT, 4);
    qs.mem.write_slice(&[0x5a; 512], GuestAddress(0x11000)).unwrap();
    qs.mem.write_slice(&[0xa5; 512], GuestAddress(0x12000)).unwrap();
    qs.mem.write_obj(0xffu8, GuestAddress(0x13000)).unwrap();
    let w = dq.add(&qs.mem, &[(0x10000, 16, false), (0x11000, 512, false), (0x12000, 512, false), (0x13000, 1, true)]);
    assert!(!dev.queue_notify(0, &mut qs).unwrap(), "nothing completed yet");
    let ids = dev.take_accepted();
    assert_eq!(ids.len(), 1);
    assert!(dq.take_used(&qs.mem).is_empty());
    assert_eq!(status(&qs, 0x13000), 0xff, "no status before completion");
    assert_eq!(dev.disk().volatile_writes().count(), 1);

    dev.complete(ids[0], &mut qs).unwrap();
    assert!(qs.needs_interrupt(0).unwrap());
    assert_eq!(dq.take_used(&qs.mem), vec![(w as u32, 1)]);
    assert_eq!(status(&qs, 0x13000), 0);
    assert!(matches!(dev.complete(ids[0], &mut qs), Err(DeviceError::UnknownRequest(_))));

    // FLUSH makes it durable once completed.
    header(&qs, 0x14000, T_FLUSH, 0);
    let f = dq.add(&qs.mem, &[(0x14000, 16, false), (0x15000, 1, true)]);
    dev.queue_notify(0, &mut qs).unwrap();
    let ids = dev.take_accepted();
    dev.complete(ids[0], &mut qs).unwrap();
    assert_eq!(dq.take_used(&qs.mem), vec![(f as u32, 1)]);
    assert_eq!(dev.disk().volatile_writes().count(), 0);

    // READ it back, into a data buffer plus status in one descriptor.
    header(&qs, 0x16000, T_IN, 4);
    let r = dq.add(&qs.mem, &[(0x16000, 16, false), (0x17000, 1025, true)]);
    dev.queue_notify(0, &mut qs).unwrap();
    let ids = dev.take_accepted();
    assert_eq!(dev.pending().collect::<Vec<_>>(), ids);
    dev.complete(ids[0], &mut qs).unwrap();
    assert_eq!(dq.take_used(&qs.mem), vec![(r as u32, 1025)]);
    let mut got = vec![0u8; 1025];
    qs.mem.read_slice(&mut got, GuestAddress(0x17000)).unwrap();
    assert!(got[..512].iter().all(|&b| b == 0x5a));
    assert!(got[512..1024].iter().all(|&b| b == 0xa5));
    assert_eq!(got[1024], 0);
}

#[test]
fn reads_at_once_complete_inside_the_kick_and_writes_wait() {
    let (mut dev, mut qs, mut dq) = setup();
    dev.set_reads_at_once(true);
    // WRITE at sector 8 (pending), then READ of sectors 8..10 (at once,
    // seeing the in-flight write through the cache view).
    header(&qs, 0x10000, T_OUT, 8);
    qs.mem.write_slice(&[0x77; 1024], GuestAddress(0x11000)).unwrap();
    let w = dq.add(&qs.mem, &[(0x10000, 16, false), (0x11000, 1024, false), (0x12000, 1, true)]);
    header(&qs, 0x13000, T_IN, 8);
    let r = dq.add(&qs.mem, &[(0x13000, 16, false), (0x14000, 1025, true)]);
    assert!(dev.queue_notify(0, &mut qs).unwrap(), "the read completed: the driver wants an interrupt");
    let ids = dev.take_accepted();
    assert_eq!(ids.len(), 1, "only the write waits");
    assert_eq!(
        dev.request(ids[0]),
        Some(BlkRequest { id: ids[0], kind: RequestKind::Write { fua: false }, sector: 8, sectors: 2 })
    );
    let reads = dev.take_reads_done();
    assert_eq!(reads.len(), 1);
    assert_eq!(
        (reads[0].request.kind, reads[0].request.sector, reads[0].request.sectors, reads[0].fault),
        (RequestKind::Read, 8, 2, None)
    );
    assert_eq!(dq.take_used(&qs.mem), vec![(r as u32, 1025)]);
    let mut got = vec![0u8; 1025];
    qs.mem.read_slice(&mut got, GuestAddress(0x14000)).unwrap();
    assert!(got[..1024].iter().all(|&b| b == 0x77));
    assert_eq!(got[1024], 0);
    assert_eq!(dev.disk().outstanding().count(), 1, "the read is done in the disk too");
    // Flushes wait as well.
    header(&qs, 0x15000, T_FLUSH, 0);
    dq.add(&qs.mem, &[(0x15000, 16, false), (0x16000, 1, true)]);
    dev.queue_notify(0, &mut qs).unwrap();
    let f = dev.take_accepted();
    assert_eq!(dev.request(f[0]).unwrap().kind, RequestKind::Flush);
    dev.complete(ids[0], &mut qs).unwrap();
    assert_eq!(dq.take_used(&qs.mem), vec![(w as u32, 1)]);
    let disk = dev.take_disk();
    assert_eq!(disk.outstanding().count(), 1, "the flush stays outstanding");
    assert!(dev.pending().next().is_none());
    assert_eq!(dev.disk().capacity_sectors(), 0);
}

/// A read of `sectors` sectors at `sector` through the queue, into
/// guest memory at 0x21000 (status byte after the data).
fn read_via_queue(dev: &mut VirtioBlk, qs: &mut Queues, dq: &mut DriverQueue, sector: u64, sectors: u32) -> Vec<u8> {
    header(qs, 0x20000, T_IN, sector);
    let len = sectors * 512;
    dq.add(&qs.mem, &[(0x20000, 16, false), (0x21000, len + 1, true)]);
    dev.queue_notify(0, qs).unwrap();
    dq.take_used(&qs.mem);
    let mut got = vec![0u8; len as usize + 1];
    qs.mem.read_slice(&mut got, GuestAddress(0x21000)).unwrap();
    assert_eq!(got.pop(), Some(0), "status OK");
    got
}

#[test]
fn corrupt_reads_flip_the_returned_bits_not_the_disk() {
    let corrupted = |seed: u64| {
        let (mut dev, mut qs, mut dq) = setup();
        dev.set_reads_at_once(true);
        let w = dev.disk_mut().write(8, &[0x77; 4096], false).unwrap();
        dev.disk_mut().complete(w).unwrap();
        dev.set_read_faults(ReadFaults { corrupt_read: 1.0, seed });
        let got = read_via_queue(&mut dev, &mut qs, &mut dq, 8, 8);
        let done = dev.take_reads_done();
        let Some(DiskFault::CorruptRead { bits }) = done[0].fault else { panic!("{done:?}") };
        let flipped: u32 = got.iter().map(|b| (b ^ 0x77).count_ones()).sum();
        assert_eq!(flipped, bits);
        // Transient: the disk still holds the data.
        let mut stored = vec![0u8; 4096];
        dev.disk().peek(8, &mut stored).unwrap();
        assert!(stored.iter().all(|&b| b == 0x77));
        // Off again: intact, and nothing reported.
        dev.set_read_faults(ReadFaults::default());
        let again = read_via_queue(&mut dev, &mut qs, &mut dq, 8, 8);
        assert!(again.iter().all(|&b| b == 0x77));
        assert_eq!(dev.take_reads_done()[0].fault, None);
        got
    };
    assert_eq!(corrupted(5), corrupted(5), "the same seed corrupts the same bits");
    assert_ne!(corrupted(5), corrupted(6));
}

#[test]
fn a_failed_write_reports_an_io_error_and_a_misdirected_one_succeeds() {
    let (mut dev, mut qs, mut dq) = setup();
    let mut write = |dev: &mut VirtioBlk, qs: &mut Queues, fault: DiskFault| {
        header(qs, 0x10000, T_OUT, 4);
        qs.mem.write_slice(&[0x5a; 1024], GuestAddress(0x11000)).unwrap();
        qs.mem.write_obj(0xffu8, GuestAddress(0x12000)).unwrap();
        dq.add(&qs.mem, &[(0x10000, 16, false), (0x11000, 1024, false), (0x12000, 1, true)]);
        dev.queue_notify(0, qs).unwrap();
        let id = dev.take_accepted()[0];
        assert!(dev.disk_mut().inject(id, fault));
        assert_eq!(dev.complete(id, qs).unwrap(), Some(fault));
        dq.take_used(&qs.mem);
        status(qs, 0x12000)
    };
    assert_eq!(write(&mut dev, &mut qs, DiskFault::WriteError), Status::IoErr as u8);
    let mut b = vec![0u8; 1024];
    dev.disk().peek(4, &mut b).unwrap();
    assert!(b.iter().all(|&x| x == 0), "a failed write does not land");
    assert_eq!(dev.disk().volatile_writes().count(), 0);
    assert_eq!(write(&mut dev, &mut qs, DiskFault::Misdirected { to: 100 }), Status::Ok as u8);
    dev.disk().peek(4, &mut b).unwrap();
    assert!(b.iter().all(|&x| x == 0), "nor a misdirected one at its place");
    dev.disk().peek(100, &mut b).unwrap();
    assert!(b.iter().all(|&x| x == 0x5a), "it is at sector 100");
}

#[test]
fn get_id_and_bad_requests_complete_at_once() {
    let (mut dev, mut qs, mut dq) = setup();
    header(&qs, 0x10000, T_GET_ID, 0);
    let g = dq.add(&qs.mem, &[(0x10000, 16, false), (0x11000, 20, true), (0x12000, 1, true)]);
    header(&qs, 0x13000, 99, 0);
    let u = dq.add(&qs.mem, &[(0x13000, 16, false), (0x14000, 1, true)]);
    assert!(dev.queue_notify(0, &mut qs).unwrap());
    assert!(dev.take_accepted().is_empty());
    assert_eq!(dq.take_used(&qs.mem), vec![(g as u32, 21), (u as u32, 1)]);
    let mut id = [0u8; 20];
    qs.mem.read_slice(&mut id, GuestAddress(0x11000)).unwrap();
    assert_eq!(&id[..10], b"simcluster");
    assert_eq!(status(&qs, 0x12000), 0);
    assert_eq!(status(&qs, 0x14000), Status::Unsupp as u8);
}
