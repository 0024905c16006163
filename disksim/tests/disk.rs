mod common;
use common::*;
use disksim::{CrashState, DiskError, RequestKind, StoreError, SECTOR_SIZE};

#[test]
fn reads_see_writes_before_completion() {
    let mut d = disk(128);
    let a = pattern(1, 3);
    let w = d.write(10, &a, false).unwrap();
    let (r, got) = d.read(10, 3 * SECTOR_SIZE).unwrap();
    assert_eq!(got, a);
    let b = pattern(2, 1);
    d.write(11, &b, false).unwrap();
    assert_eq!(&peek(&d, 11, 1), &b);
    assert_eq!(&peek(&d, 10, 1)[..], &a[..SECTOR_SIZE]);
    assert_eq!(d.complete(r).unwrap().kind, RequestKind::Read);
    assert_eq!(d.complete(w).unwrap().kind, RequestKind::Write { fua: false });
    assert!(matches!(d.complete(w), Err(DiskError::UnknownRequest(_))));
}

#[test]
fn nothing_is_durable_without_flush() {
    let mut d = disk(64);
    write_done(&mut d, 0, &pattern(1, 1), false);
    assert_eq!(image(&d, &CrashState::none(), 1), vec![0u8; SECTOR_SIZE]);
    assert_eq!(d.volatile_writes().count(), 1);
}

#[test]
fn flush_makes_earlier_completed_writes_durable_not_later_ones() {
    let mut d = disk(64);
    let done = write_done(&mut d, 0, &pattern(1, 1), false);
    let in_flight = d.write(1, &pattern(2, 1), false).unwrap();
    let f = d.flush();
    // Completes after the flush was issued: not covered.
    d.complete(in_flight).unwrap();
    let late = write_done(&mut d, 2, &pattern(3, 1), false);
    d.complete(f).unwrap();
    let vol: Vec<_> = d.volatile_writes().map(|w| w.0).collect();
    assert_eq!(vol, vec![in_flight, late]);
    assert!(!vol.contains(&done));
    let img = image(&d, &CrashState::none(), 3);
    assert_eq!(&img[..SECTOR_SIZE], &pattern(1, 1)[..]);
    assert_eq!(&img[SECTOR_SIZE..], &vec![0u8; 2 * SECTOR_SIZE][..]);
    // A second flush covers them.
    flush_done(&mut d);
    assert_eq!(d.volatile_writes().count(), 0);
    assert_eq!(d.crash_state_count(Default::default()).lower_bound(), 1);
}

#[test]
fn flush_does_not_cover_uncompleted_writes() {
    let mut d = disk(64);
    let w = d.write(0, &pattern(1, 1), false).unwrap();
    flush_done(&mut d);
    d.complete(w).unwrap();
    assert_eq!(d.volatile_writes().count(), 1);
}

#[test]
fn fua_is_durable_on_completion_only() {
    let mut d = disk(64);
    let w = d.write(4, &pattern(9, 2), true).unwrap();
    assert_eq!(d.volatile_writes().count(), 1);
    d.complete(w).unwrap();
    assert_eq!(d.volatile_writes().count(), 0);
    assert_eq!(&image(&d, &CrashState::none(), 6)[4 * SECTOR_SIZE..], &pattern(9, 2)[..]);
    // A FUA write does not flush earlier volatile ones.
    let mut d = disk(64);
    write_done(&mut d, 0, &pattern(1, 1), false);
    write_done(&mut d, 1, &pattern(2, 1), true);
    let img = image(&d, &CrashState::none(), 2);
    assert_eq!(&img[..SECTOR_SIZE], &vec![0u8; SECTOR_SIZE][..]);
    assert_eq!(&img[SECTOR_SIZE..], &pattern(2, 1)[..]);
}

#[test]
fn durable_write_behind_volatile_one_shadows_it() {
    let mut d = disk(64);
    let v = write_done(&mut d, 0, &pattern(1, 2), false); // sectors 0,1 volatile
    write_done(&mut d, 1, &pattern(2, 1), true); // sector 1 durable, issued later
                                                 // Whatever happens to v, sector 1 holds the FUA data.
    for s in [
        CrashState::none(),
        CrashState { persisted: vec![disksim::Persist { write: v, sectors: disksim::SectorSet::All }] },
    ] {
        assert_eq!(&image(&d, &s, 2)[SECTOR_SIZE..], &pattern(2, 1)[..]);
    }
    assert_eq!(d.crash_state_count(Default::default()), disksim::StateCount::Exact(2));
}

#[test]
fn log_compacts_and_cache_is_released() {
    let mut d = disk(1024);
    for i in 0..10 {
        write_done(&mut d, i * 8, &pattern(i as u8 + 1, 8), false);
    }
    assert!(d.storage().cache_overlay > 0 && d.storage().log > 0);
    flush_done(&mut d);
    let s = d.storage();
    assert_eq!((s.cache_overlay, s.log), (0, 0));
    assert_eq!(d.durable_store().overlay_blocks(), 10);
    for i in 0..10u64 {
        assert_eq!(peek(&d, i * 8, 8), pattern(i as u8 + 1, 8));
    }
}

#[test]
fn apply_crash_result_and_reset() {
    let mut d = disk(64);
    write_done(&mut d, 0, &pattern(1, 1), false);
    flush_done(&mut d);
    let a = write_done(&mut d, 1, &pattern(2, 1), false);
    let _b = write_done(&mut d, 2, &pattern(3, 1), false);
    let pending = d.write(3, &pattern(4, 1), false).unwrap();
    let st = CrashState { persisted: vec![disksim::Persist { write: a, sectors: disksim::SectorSet::All }] };
    d.apply_crash(&st).unwrap();
    let img = peek(&d, 0, 4);
    assert_eq!(&img[..SECTOR_SIZE], &pattern(1, 1)[..]);
    assert_eq!(&img[SECTOR_SIZE..2 * SECTOR_SIZE], &pattern(2, 1)[..]);
    assert_eq!(&img[2 * SECTOR_SIZE..], &vec![0u8; 2 * SECTOR_SIZE][..]);
    assert_eq!(d.volatile_writes().count(), 0);
    assert_eq!(d.outstanding().count(), 0);
    assert!(matches!(d.complete(pending), Err(DiskError::UnknownRequest(_))));
    // Ids are not reused after the crash.
    let next = d.flush();
    assert!(next > pending);
}

#[test]
fn apply_crash_rejects_foreign_states() {
    let mut d = disk(64);
    let a = write_done(&mut d, 0, &pattern(1, 2), false);
    let b = write_done(&mut d, 2, &pattern(2, 1), false);
    use disksim::{CrashError, Persist, SectorSet};
    let bad = |persisted| CrashState { persisted };
    assert!(matches!(
        d.crash_view(&bad(vec![Persist { write: disksim::RequestId(99), sectors: SectorSet::All }])),
        Err(CrashError::NotVolatile(_))
    ));
    assert!(matches!(
        d.crash_view(&bad(vec![
            Persist { write: b, sectors: SectorSet::All },
            Persist { write: a, sectors: SectorSet::All }
        ])),
        Err(CrashError::Unsorted(_))
    ));
    assert!(matches!(
        d.crash_view(&bad(vec![Persist { write: a, sectors: SectorSet::Ranges(vec![(1, 3)]) }])),
        Err(CrashError::BadSectors(_))
    ));
}

#[test]
fn corrupt_durable_block_is_reported_on_read() {
    let mut d = disk(64);
    write_done(&mut d, 8, &pattern(1, 8), false);
    flush_done(&mut d);
    d.durable_store_mut().inject_corruption(1, 17, 0x80).unwrap();
    let mut b = vec![0u8; SECTOR_SIZE];
    assert!(matches!(d.peek(8, &mut b), Err(DiskError::Store(StoreError::CorruptBlock { block: 1, .. }))));
    assert!(matches!(d.read(8, SECTOR_SIZE), Err(DiskError::Store(StoreError::CorruptBlock { .. }))));
    assert!(d.write(9, &pattern(2, 1), false).is_err());
    assert_eq!(d.volatile_writes().count(), 0, "failed write must not enter the log");
}

#[test]
fn empty_and_out_of_range_requests() {
    let mut d = disk(16);
    assert!(matches!(d.write(0, &[], false), Err(DiskError::Empty(_))));
    assert!(matches!(d.read(0, 0), Err(DiskError::Empty(_))));
    assert!(matches!(d.write(16, &pattern(1, 1), false), Err(DiskError::Store(StoreError::OutOfRange { .. }))));
    assert_eq!(d.outstanding().count(), 0);
}
