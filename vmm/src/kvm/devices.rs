//! Userspace devices on the x86 I/O port bus.
//!
//! Each device is small, owns only its registers, and is driven with the current virtual
//! time so that it never looks at host time. Device state is saved and restored as
//! opaque bytes for snapshots ([`PioDevice::save`], [`PioDevice::restore`]).
//!
//! Port map (fixed; the guest ABI of the microVM):
//!
//! | ports          | device        | what                                          |
//! |----------------|---------------|-----------------------------------------------|
//! | 0x3f8..=0x3ff  | [`Serial`]    | 8250 subset (COM1): THR captured, LSR ready   |
//! | 0x520..=0x53f  | [`PvClock`]   | virtual time (read) and one-shot timer (write)|
//! | 0x5f0..=0x5f3  | [`PowerPort`] | write a 32-bit status: the node powers off    |
//! | 0x20, 0x21, 0xa0, 0xa1 | [`Pic`] | 8259A pair (Linux's tick and legacy IRQs) |
//! | 0x40..=0x43, 0x61 | [`Pit`]    | 8254 timer, channel 2 gate/output          |
//! | 0x70, 0x71     | [`Rtc`]       | CMOS clock: boot date + virtual time          |
//!
//! COM1 raises IRQ 4 on the PIC when the guest enables its transmit interrupt
//! (transmission is instantaneous, so the holding register is always empty).
//!
//! Reads from unclaimed ports return all ones, writes are dropped (as on a PC bus).

use std::time::Duration;

use simtime::VirtualTime;

use super::error::{KvmError, Result};
pub use super::legacy::{Pic, Pit, Rtc};

/// What a device write asks of the run loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceEvent {
    /// Nothing beyond the register update.
    None,
    /// The guest asked to power off with this status.
    PowerOff(u32),
}

/// A device on the port I/O bus. Offsets are relative to the device's base port.
pub trait PioDevice {
    /// Short name for traces and errors.
    fn name(&self) -> &'static str;
    /// Guest `in`: fill `data` (1, 2 or 4 bytes).
    fn read(&mut self, now: VirtualTime, offset: u16, data: &mut [u8]);
    /// Guest `out` of `data`.
    fn write(&mut self, now: VirtualTime, offset: u16, data: &[u8]) -> DeviceEvent;
    /// Register state as bytes (for snapshots).
    fn save(&self) -> Vec<u8>;
    /// Inverse of [`PioDevice::save`].
    fn restore(&mut self, bytes: &[u8]) -> Result<()>;
}

fn le_value(data: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = data.len().min(8);
    b[..n].copy_from_slice(&data[..n]);
    u64::from_le_bytes(b)
}

fn fill_le(data: &mut [u8], v: u64) {
    let b = v.to_le_bytes();
    let n = data.len().min(8);
    data[..n].copy_from_slice(&b[..n]);
}

fn bad_state(dev: &str, len: usize) -> KvmError {
    KvmError::Config(format!("{dev}: saved state has {len} bytes, wrong size"))
}

/// COM1 base port.
pub const SERIAL_BASE: u16 = 0x3f8;
/// [`PvClock`] base port.
pub const PVCLOCK_BASE: u16 = 0x520;
/// [`PowerPort`] base port.
pub const POWER_BASE: u16 = 0x5f0;

/// A polled 8250 UART subset: what a guest's early console needs.
///
/// Transmit is instantaneous (LSR always reports THRE|TEMT); bytes written to THR are
/// appended to the console buffer. No receive path and no interrupts yet.
#[derive(Debug, Clone, Default)]
pub struct Serial {
    ier: u8,
    lcr: u8,
    mcr: u8,
    scr: u8,
    dll: u8,
    dlm: u8,
    /// Everything the guest transmitted.
    pub output: Vec<u8>,
}

impl Serial {
    const DLAB: u8 = 0x80;
    /// The guest enabled the transmit-holding-register-empty interrupt.
    pub fn thri_enabled(&self) -> bool {
        self.ier & 0x02 != 0
    }
    fn dlab(&self) -> bool {
        self.lcr & Self::DLAB != 0
    }
}

impl PioDevice for Serial {
    fn name(&self) -> &'static str {
        "serial"
    }
    fn read(&mut self, _now: VirtualTime, offset: u16, data: &mut [u8]) {
        let dlab = self.lcr & Self::DLAB != 0;
        let v = match offset {
            0 if dlab => self.dll,
            0 => 0, // RBR: nothing received
            1 if dlab => self.dlm,
            1 => self.ier,
            2 => 0x01, // IIR: no interrupt pending
            3 => self.lcr,
            4 => self.mcr,
            5 => 0x60, // LSR: THR empty, transmitter empty
            6 => 0xb0, // MSR: DCD, DSR, CTS
            7 => self.scr,
            _ => 0xff,
        };
        data.fill(0);
        data[0] = v;
    }
    fn write(&mut self, _now: VirtualTime, offset: u16, data: &[u8]) -> DeviceEvent {
        let v = data[0];
        let dlab = self.lcr & Self::DLAB != 0;
        match offset {
            0 if dlab => self.dll = v,
            0 => self.output.push(v),
            1 if dlab => self.dlm = v,
            1 => self.ier = v,
            3 => self.lcr = v,
            4 => self.mcr = v,
            7 => self.scr = v,
            _ => {}
        }
        DeviceEvent::None
    }
    fn save(&self) -> Vec<u8> {
        let mut v = vec![self.ier, self.lcr, self.mcr, self.scr, self.dll, self.dlm];
        v.extend_from_slice(&self.output);
        v
    }
    fn restore(&mut self, b: &[u8]) -> Result<()> {
        if b.len() < 6 {
            return Err(bad_state("serial", b.len()));
        }
        self.ier = b[0];
        self.lcr = b[1];
        self.mcr = b[2];
        self.scr = b[3];
        self.dll = b[4];
        self.dlm = b[5];
        self.output = b[6..].to_vec();
        Ok(())
    }
}

/// Paravirtual clock and one-shot timer, the only time source of the microVM.
///
/// Registers (32-bit accesses, offsets from [`PVCLOCK_BASE`]):
/// - `0x00` read: latch virtual time (ns), return its low half; `0x04` read: high half;
/// - `0x08` write: arm the timer `value` ns from now; read: 1 when armed;
/// - `0x0c` write: stage the low half of an absolute deadline; `0x10` write: high half,
///   arms the timer at that absolute time;
/// - `0x14` write: interrupt vector to deliver (default 0x20); read: the vector;
/// - `0x18` write: disarm.
///
/// Invariant: when the timer fires the run loop disarms it and injects `vector` once.
#[derive(Debug, Clone)]
pub struct PvClock {
    latched: VirtualTime,
    staged_low: u32,
    deadline: Option<VirtualTime>,
    vector: u8,
}

impl Default for PvClock {
    fn default() -> Self {
        PvClock { latched: VirtualTime::ZERO, staged_low: 0, deadline: None, vector: 0x20 }
    }
}

impl PvClock {
    /// The armed deadline, if any.
    pub fn deadline(&self) -> Option<VirtualTime> {
        self.deadline
    }
    /// The vector the timer delivers.
    pub fn vector(&self) -> u8 {
        self.vector
    }
    /// Called by the run loop when it delivers the timer: disarms it.
    pub fn fire(&mut self) -> u8 {
        self.deadline = None;
        self.vector
    }
}

impl PioDevice for PvClock {
    fn name(&self) -> &'static str {
        "pvclock"
    }
    fn read(&mut self, now: VirtualTime, offset: u16, data: &mut [u8]) {
        let v = match offset {
            0 => {
                self.latched = now;
                now.as_ns() & 0xffff_ffff
            }
            4 => self.latched.as_ns() >> 32,
            8 => u64::from(self.deadline.is_some()),
            0x14 => u64::from(self.vector),
            _ => u64::MAX,
        };
        fill_le(data, v);
    }
    fn write(&mut self, now: VirtualTime, offset: u16, data: &[u8]) -> DeviceEvent {
        let v = le_value(data);
        match offset {
            8 => self.deadline = Some(now.saturating_add(Duration::from_nanos(v & 0xffff_ffff))),
            0xc => self.staged_low = v as u32,
            0x10 => self.deadline = Some(VirtualTime::from_ns(((v & 0xffff_ffff) << 32) | u64::from(self.staged_low))),
            0x14 => self.vector = v as u8,
            0x18 => self.deadline = None,
            _ => {}
        }
        DeviceEvent::None
    }
    fn save(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(22);
        v.extend_from_slice(&self.latched.as_ns().to_le_bytes());
        v.extend_from_slice(&self.staged_low.to_le_bytes());
        v.extend_from_slice(&self.deadline.unwrap_or(VirtualTime::MAX).as_ns().to_le_bytes());
        v.push(u8::from(self.deadline.is_some()));
        v.push(self.vector);
        v
    }
    fn restore(&mut self, b: &[u8]) -> Result<()> {
        if b.len() != 22 {
            return Err(bad_state("pvclock", b.len()));
        }
        self.latched = VirtualTime::from_ns(u64::from_le_bytes(b[0..8].try_into().unwrap()));
        self.staged_low = u32::from_le_bytes(b[8..12].try_into().unwrap());
        let d = u64::from_le_bytes(b[12..20].try_into().unwrap());
        self.deadline = (b[20] != 0).then_some(VirtualTime::from_ns(d));
        self.vector = b[21];
        Ok(())
    }
}

/// Power-off port: the guest writes its exit status (like QEMU's isa-debug-exit).
#[derive(Debug, Clone, Default)]
pub struct PowerPort;

impl PioDevice for PowerPort {
    fn name(&self) -> &'static str {
        "power"
    }
    fn read(&mut self, _now: VirtualTime, _offset: u16, data: &mut [u8]) {
        data.fill(0);
    }
    fn write(&mut self, _now: VirtualTime, _offset: u16, data: &[u8]) -> DeviceEvent {
        DeviceEvent::PowerOff(le_value(data) as u32)
    }
    fn save(&self) -> Vec<u8> {
        Vec::new()
    }
    fn restore(&mut self, _b: &[u8]) -> Result<()> {
        Ok(())
    }
}

/// The fixed device set of a microVM and the port decoder.
#[derive(Debug, Clone, Default)]
pub struct PioBus {
    /// COM1.
    pub serial: Serial,
    /// Clock and timer.
    pub clock: PvClock,
    /// Power-off port.
    pub power: PowerPort,
    /// Legacy interrupt controllers.
    pub pic: Pic,
    /// Legacy timer.
    pub pit: Pit,
    /// CMOS clock.
    pub rtc: Rtc,
    /// COM1's THR-empty interrupt is owed (cleared by reading IIR).
    pub serial_thre: bool,
    /// Accesses to unclaimed ports (diagnostics; part of device state).
    pub unclaimed: u64,
}

impl PioBus {
    fn route(&mut self, port: u16) -> Option<(&mut dyn PioDevice, u16)> {
        match port {
            SERIAL_BASE..=0x3ff => Some((&mut self.serial, port - SERIAL_BASE)),
            PVCLOCK_BASE..=0x53f => Some((&mut self.clock, port - PVCLOCK_BASE)),
            POWER_BASE..=0x5f3 => Some((&mut self.power, port - POWER_BASE)),
            _ => None,
        }
    }

    /// The earliest virtual time a timer (paravirtual clock or PIT channel 0)
    /// interrupts.
    pub fn next_deadline(&self) -> Option<VirtualTime> {
        match (self.clock.deadline(), self.pit.deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Dispatches a guest `in`.
    pub fn read(&mut self, now: VirtualTime, port: u16, data: &mut [u8]) {
        match port {
            0x20 | 0x21 | 0xa0 | 0xa1 => {
                data.fill(0);
                data[0] = self.pic.read(port);
                return;
            }
            0x40..=0x43 | 0x61 => {
                data.fill(0);
                data[0] = self.pit.read(now, port);
                return;
            }
            0x70 | 0x71 => {
                data.fill(0);
                data[0] = self.rtc.read(now, port);
                return;
            }
            0x3fa if self.serial.thri_enabled() && self.serial_thre && !self.serial.dlab() => {
                self.serial_thre = false;
                data.fill(0);
                data[0] = 0x02; // IIR: THR empty
                return;
            }
            _ => {}
        }
        match self.route(port) {
            Some((d, off)) => d.read(now, off, data),
            None => {
                self.unclaimed += 1;
                data.fill(0xff);
            }
        }
    }

    /// Dispatches a guest `out`.
    pub fn write(&mut self, now: VirtualTime, port: u16, data: &[u8]) -> DeviceEvent {
        match port {
            0x20 | 0x21 | 0xa0 | 0xa1 => {
                self.pic.write(port, data[0]);
                return DeviceEvent::None;
            }
            0x40..=0x43 | 0x61 => {
                self.pit.write(now, port, data[0]);
                return DeviceEvent::None;
            }
            0x70 | 0x71 => {
                self.rtc.write(port, data[0]);
                return DeviceEvent::None;
            }
            0x3f8 | 0x3f9 if !self.serial.dlab() => {
                let was = self.serial.thri_enabled();
                self.serial.write(now, port - SERIAL_BASE, data);
                let thr = port == 0x3f8;
                if self.serial.thri_enabled() && (thr || !was) {
                    self.serial_thre = true;
                    self.pic.raise(4);
                }
                return DeviceEvent::None;
            }
            _ => {}
        }
        match self.route(port) {
            Some((d, off)) => d.write(now, off, data),
            None => {
                self.unclaimed += 1;
                DeviceEvent::None
            }
        }
    }

    /// All device state, length-prefixed per device.
    pub fn save(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let legacy = [vec![u8::from(self.serial_thre)], self.pic.save(), self.pit.save(), self.rtc.save()];
        for s in [self.serial.save(), self.clock.save(), self.power.save()].into_iter().chain(legacy) {
            out.extend_from_slice(&(s.len() as u64).to_le_bytes());
            out.extend_from_slice(&s);
        }
        out.extend_from_slice(&self.unclaimed.to_le_bytes());
        out
    }

    /// Inverse of [`PioBus::save`].
    pub fn restore(&mut self, mut b: &[u8]) -> Result<()> {
        let take = |b: &mut &[u8]| -> Result<Vec<u8>> {
            if b.len() < 8 {
                return Err(bad_state("pio bus", b.len()));
            }
            let n = u64::from_le_bytes(b[..8].try_into().unwrap()) as usize;
            if b.len() < 8 + n {
                return Err(bad_state("pio bus", b.len()));
            }
            let v = b[8..8 + n].to_vec();
            *b = &b[8 + n..];
            Ok(v)
        };
        let s = take(&mut b)?;
        let c = take(&mut b)?;
        let p = take(&mut b)?;
        self.serial.restore(&s)?;
        self.clock.restore(&c)?;
        self.power.restore(&p)?;
        let thre = take(&mut b)?;
        self.serial_thre = thre.first().is_some_and(|&t| t != 0);
        self.pic.restore(&take(&mut b)?)?;
        self.pit.restore(&take(&mut b)?)?;
        self.rtc.restore(&take(&mut b)?)?;
        if b.len() != 8 {
            return Err(bad_state("pio bus", b.len()));
        }
        self.unclaimed = u64::from_le_bytes(b.try_into().unwrap());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Virtual time `ns` after the boot.
    fn at(ns: u64) -> VirtualTime {
        VirtualTime::from_ns(ns)
    }

    #[test]
    fn serial_captures_thr_and_reports_ready() {
        let mut bus = PioBus::default();
        bus.write(at(0), 0x3f8, b"h");
        let mut lsr = [0u8];
        bus.read(at(0), 0x3fd, &mut lsr);
        assert_eq!(lsr[0] & 0x20, 0x20);
        // DLAB set: THR offset is the divisor latch.
        bus.write(at(0), 0x3fb, &[0x80]);
        bus.write(at(0), 0x3f8, &[1]);
        bus.write(at(0), 0x3fb, &[0x03]);
        bus.write(at(0), 0x3f8, b"i");
        assert_eq!(bus.serial.output, b"hi");
    }

    #[test]
    fn clock_latch_and_timer() {
        let mut bus = PioBus::default();
        let mut lo = [0u8; 4];
        let mut hi = [0u8; 4];
        let t = 0x1_2345_6789u64;
        bus.read(at(t), 0x520, &mut lo);
        bus.read(at(t + 99), 0x524, &mut hi);
        assert_eq!(u64::from(u32::from_le_bytes(hi)) << 32 | u64::from(u32::from_le_bytes(lo)), t);
        bus.write(at(100), 0x528, &1000u32.to_le_bytes());
        assert_eq!(bus.clock.deadline(), Some(at(1100)));
        bus.write(at(100), 0x52c, &5u32.to_le_bytes());
        bus.write(at(100), 0x530, &1u32.to_le_bytes());
        assert_eq!(bus.clock.deadline(), Some(at((1 << 32) | 5)));
        assert_eq!(bus.write(at(0), 0x5f0, &7u32.to_le_bytes()), DeviceEvent::PowerOff(7));
    }

    #[test]
    fn bus_state_roundtrip() {
        let mut bus = PioBus::default();
        bus.write(at(0), 0x3f8, b"abc");
        bus.write(at(0), 0x528, &10u32.to_le_bytes());
        bus.write(at(0), 0x80, &[1]);
        let saved = bus.save();
        let mut other = PioBus::default();
        other.restore(&saved).unwrap();
        assert_eq!(other.save(), saved);
        assert_eq!(other.clock.deadline(), Some(at(10)));
        assert_eq!(other.unclaimed, 1);
    }
}
