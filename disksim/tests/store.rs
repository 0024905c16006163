use disksim::{BlockStore, StoreError, BLOCK_SIZE, SECTOR_SIZE};
use std::io::Write;

#[test]
fn zeros_read_back_writes_across_blocks() {
    let mut s = BlockStore::zeros(64);
    let data: Vec<u8> = (0..3 * SECTOR_SIZE).map(|i| (i % 251) as u8).collect();
    s.write(7, &data).unwrap(); // sectors 7..10 straddle blocks 0 and 1
    let mut b = vec![0u8; 3 * SECTOR_SIZE];
    s.read(7, &mut b).unwrap();
    assert_eq!(b, data);
    let mut z = vec![1u8; SECTOR_SIZE];
    s.read(6, &mut z).unwrap();
    assert!(z.iter().all(|&x| x == 0));
    assert_eq!(s.overlay_blocks(), 2);
    assert!(s.overlay_bytes() >= 2 * BLOCK_SIZE as u64);
}

#[test]
fn crc_detects_flipped_byte() {
    let mut s = BlockStore::zeros(64);
    s.write(8, &vec![0xAB; SECTOR_SIZE]).unwrap();
    s.inject_corruption(1, 100, 0x01).unwrap();
    let mut b = vec![0u8; SECTOR_SIZE];
    match s.read(8, &mut b) {
        Err(StoreError::CorruptBlock { block: 1, expected, found }) => assert_ne!(expected, found),
        other => panic!("expected CorruptBlock, got {other:?}"),
    }
    // Other blocks are unaffected.
    s.read(0, &mut b).unwrap();
    // Flipping it back heals it.
    s.inject_corruption(1, 100, 0x01).unwrap();
    s.read(8, &mut b).unwrap();
}

#[test]
fn range_and_alignment_errors() {
    let mut s = BlockStore::zeros(16);
    assert!(matches!(s.write(15, &[0u8; 1024]), Err(StoreError::OutOfRange { .. })));
    assert!(matches!(s.write(u64::MAX, &[0u8; 512]), Err(StoreError::OutOfRange { .. })));
    assert!(matches!(s.write(0, &[0u8; 100]), Err(StoreError::Misaligned { len: 100 })));
}

#[test]
fn base_image_is_read_and_checked() {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    // 9 sectors: the second block is partial.
    let img: Vec<u8> = (0..9 * SECTOR_SIZE).map(|i| (i * 7 % 256) as u8).collect();
    f.write_all(&img).unwrap();
    f.flush().unwrap();
    let mut s = BlockStore::open_image(f.path()).unwrap();
    assert_eq!(s.capacity_sectors(), 9);
    let mut b = vec![0u8; 9 * SECTOR_SIZE];
    s.read(0, &mut b).unwrap();
    assert_eq!(b, img);
    // Overlay write leaves the file untouched.
    s.write(8, &vec![0u8; SECTOR_SIZE]).unwrap();
    assert_eq!(std::fs::read(f.path()).unwrap(), img);
    // Changing the image under the store is caught.
    let mut img2 = img.clone();
    img2[5] ^= 0xff;
    std::fs::write(f.path(), &img2).unwrap();
    assert!(matches!(s.read(0, &mut b[..SECTOR_SIZE]), Err(StoreError::CorruptBlock { block: 0, .. })));
}

#[test]
fn misaligned_image_is_rejected() {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(&[0u8; 700]).unwrap();
    assert!(matches!(BlockStore::open_image(f.path()), Err(StoreError::Misaligned { len: 700 })));
}
