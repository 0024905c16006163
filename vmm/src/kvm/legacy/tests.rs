use super::*;

/// Virtual time `ns` after the boot.
fn at(ns: u64) -> VirtualTime {
    VirtualTime::from_ns(ns)
}

/// Linux's init_8259A: ICW1-4 on both chips, then masks.
fn linux_pic() -> Pic {
    let mut p = Pic::default();
    for (port, v) in [(0x20, 0x11), (0x21, 0x30), (0x21, 0x04), (0x21, 0x01)] {
        p.write(port, v);
    }
    for (port, v) in [(0xa0, 0x11), (0xa1, 0x38), (0xa1, 0x02), (0xa1, 0x01)] {
        p.write(port, v);
    }
    p.write(0x21, 0xfb); // all masked but the cascade
    p.write(0xa1, 0xff);
    p
}

#[test]
fn probe_reads_back_the_mask() {
    let mut p = Pic::default();
    p.write(0x21, 0xff);
    assert_eq!(p.read(0x21), 0xff);
    p.write(0x21, 0x5a);
    assert_eq!(p.read(0x21), 0x5a);
}

#[test]
fn masked_lines_wait_and_priority_and_eoi_order_delivery() {
    let mut p = linux_pic();
    p.raise(0);
    assert!(!p.has_pending(), "IRQ 0 is masked");
    p.write(0x21, 0xfa); // unmask IRQ 0
    p.raise(5);
    p.write(0x21, 0xda); // and IRQ 5
    assert_eq!(p.ack(), Some(0x30));
    assert!(!p.has_pending(), "IRQ 5 waits while IRQ 0 is in service");
    p.write(0x20, 0x20); // non-specific EOI
    assert_eq!(p.ack(), Some(0x35));
    p.write(0x20, 0x65); // specific EOI 5
    assert_eq!(p.ack(), None);
    // OCW3 reads.
    p.raise(5);
    p.write(0x20, 0x0a);
    assert_eq!(p.read(0x20), 0x20);
    p.write(0x20, 0x0b);
    assert_eq!(p.read(0x20), 0);
}

#[test]
fn slave_lines_cascade_through_irq2() {
    let mut p = linux_pic();
    p.write(0xa1, 0xfe); // unmask IRQ 8
    p.raise(8);
    assert!(p.has_pending());
    assert_eq!(p.ack(), Some(0x38));
}

#[test]
fn periodic_channel_0_interrupts_every_period() {
    let mut t = Pit::default();
    t.write(at(1_000), 0x43, 0x34); // ch0, lo/hi, mode 2
    t.write(at(1_000), 0x40, 0x9c); // 11932 = 0x2e9c: 100 Hz
    t.write(at(1_000), 0x40, 0x2e);
    let period = ticks_to_ns(11_932);
    assert!((period as i64 - 10_000_000).abs() < 1_000, "{period}");
    assert_eq!(t.deadline(), Some(at(1_000 + period)));
    t.fire(at(1_000 + period));
    assert_eq!(t.deadline(), Some(at(1_000 + ticks_to_ns(2 * 11_932))));
    // Late by three periods: one interrupt, then back on the grid.
    t.fire(at(1_000 + ticks_to_ns(5 * 11_932) + 5));
    assert_eq!(t.deadline(), Some(at(1_000 + ticks_to_ns(6 * 11_932))));
}

#[test]
fn one_shot_fires_once_and_latched_count_reads() {
    let mut t = Pit::default();
    t.write(at(0), 0x43, 0x30); // ch0, lo/hi, mode 0
    t.write(at(0), 0x40, 0xe8);
    t.write(at(0), 0x40, 0x03); // 1000 ticks
    assert_eq!(t.deadline(), Some(at(ticks_to_ns(1000))));
    t.write(at(ticks_to_ns(100)), 0x43, 0x00); // latch
    let lo = t.read(at(ticks_to_ns(500)), 0x40);
    let hi = t.read(at(ticks_to_ns(500)), 0x40);
    assert_eq!(u16::from(lo) | u16::from(hi) << 8, 900, "the latched count, not the live one");
    t.fire(at(ticks_to_ns(1000)));
    assert_eq!(t.deadline(), None);
}

#[test]
fn channel_2_output_on_port_61_for_calibration() {
    let mut t = Pit::default();
    t.write(at(0), 0x61, 0x01); // gate on, speaker off
    t.write(at(0), 0x43, 0xb0); // ch2, lo/hi, mode 0
    t.write(at(0), 0x42, 0xff);
    t.write(at(0), 0x42, 0xff);
    assert_eq!(t.read(at(1_000), 0x61) & 0x20, 0);
    assert_eq!(t.read(at(ticks_to_ns(0xffff)), 0x61) & 0x20, 0x20);
    assert_eq!(t.deadline(), None, "channel 2 raises no interrupt");
}

#[test]
fn rtc_reads_the_engine_date_plus_virtual_time() {
    // 2026-01-01T00:00:00Z, the engine's guest epoch; 90061 s later.
    let mut r = Rtc { epoch_ns: 1_767_225_600 * 1_000_000_000, index: 0 };
    let now = at(90_061 * 1_000_000_000 + 5);
    let reg = |r: &mut Rtc, i: u8| {
        r.write(0x70, 0x80 | i);
        r.read(now, 0x71)
    };
    assert_eq!(reg(&mut r, 0x00), 0x01);
    assert_eq!(reg(&mut r, 0x02), 0x01);
    assert_eq!(reg(&mut r, 0x04), 0x01);
    assert_eq!(reg(&mut r, 0x07), 0x02);
    assert_eq!(reg(&mut r, 0x08), 0x01);
    assert_eq!(reg(&mut r, 0x09), 0x26);
    assert_eq!(reg(&mut r, 0x32), 0x20);
    assert_eq!(reg(&mut r, 0x06), 0x06, "2026-01-02 is a Friday");
    assert_eq!(reg(&mut r, 0x0a) & 0x80, 0, "never update-in-progress");
    assert_eq!(civil_from_days(0), (1970, 1, 1));
    assert_eq!(civil_from_days(11_016), (2000, 2, 29));
}

#[test]
fn state_survives_save_and_restore() {
    let mut p = linux_pic();
    p.raise(3);
    let mut q = Pic::default();
    q.restore(&p.save()).unwrap();
    assert_eq!(p, q);
    let mut t = Pit::default();
    t.write(at(7), 0x43, 0x34);
    t.write(at(7), 0x40, 0x10);
    let mut u = Pit::default();
    u.restore(&t.save()).unwrap();
    assert_eq!(t, u);
    let mut r = Rtc { epoch_ns: 42, index: 0 };
    r.write(0x70, 0x09);
    let mut q = Rtc::default();
    q.restore(&r.save()).unwrap();
    assert_eq!(r, q);
}
