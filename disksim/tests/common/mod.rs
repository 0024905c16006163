#![allow(dead_code)]
use disksim::{BlockStore, Disk, RequestId, SECTOR_SIZE};

/// `sectors` sectors of data where every sector is filled with a byte pattern
/// unique to (tag, sector offset), so a post-crash image tells which write each
/// sector came from.
pub fn pattern(tag: u8, sectors: usize) -> Vec<u8> {
    let mut v = vec![0u8; sectors * SECTOR_SIZE];
    for (i, c) in v.chunks_mut(SECTOR_SIZE).enumerate() {
        c.fill(tag);
        c[0] = tag;
        c[1] = i as u8;
    }
    v
}

pub fn disk(sectors: u64) -> Disk {
    Disk::new(BlockStore::zeros(sectors))
}

/// Issues and completes a write.
pub fn write_done(d: &mut Disk, sector: u64, data: &[u8], fua: bool) -> RequestId {
    let id = d.write(sector, data, fua).unwrap();
    d.complete(id).unwrap();
    id
}

/// Issues and completes a flush.
pub fn flush_done(d: &mut Disk) {
    let f = d.flush();
    d.complete(f).unwrap();
}

pub fn peek(d: &Disk, sector: u64, sectors: usize) -> Vec<u8> {
    let mut b = vec![0u8; sectors * SECTOR_SIZE];
    d.peek(sector, &mut b).unwrap();
    b
}

/// The post-crash contents of sectors `0..n` for `state`.
pub fn image(d: &Disk, state: &disksim::CrashState, n: usize) -> Vec<u8> {
    let v = d.crash_view(state).unwrap();
    let mut b = vec![0u8; n * SECTOR_SIZE];
    v.read(0, &mut b).unwrap();
    b
}
