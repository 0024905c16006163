//! The legacy PC interrupt controller and timer a stock Linux kernel needs for its
//! tick when it boots with `noapic nolapic`: a pair of 8259A PICs (ports 0x20-0x21,
//! 0xa0-0xa1) and an 8254 PIT (ports 0x40-0x43, with port 0x61 for channel 2's gate
//! and output). Both are driven by virtual time only: the PIT counts from the
//! virtual clock, and its channel-0 interrupt (IRQ 0) is due at a virtual deadline
//! that the run loop treats like the paravirtual timer's (it jumps there when the
//! guest halts). Guests that never touch these ports see no difference.
//!
//! Subset, by design: edge-triggered IRQs, fully nested priority (IRQ 0 highest),
//! non-specific and specific EOI, auto-EOI, OCW3 IRR/ISR reads; PIT modes 0 (one
//! shot), 2 and 3 (periodic; mode 3's output is modelled as mode 2's interrupt
//! timing), counter latch and lobyte/hibyte access, channel 2 gated by port 0x61.
//! No special mask mode, rotation, polling, or PIT read-back command.
//!
//! Also the CMOS real-time clock (ports 0x70-0x71, [`Rtc`]): the guest's wall-clock
//! time at boot, as the engine gives it ([`nodeapi::NodeRuntime::grant`]'s
//! `time_of_day`) plus virtual time; BCD, 24-hour, never "update in progress".

use std::time::Duration;

use simtime::{span_ns, VirtualTime};

use super::error::{KvmError, Result};

/// PIT input clock, Hz.
pub const PIT_HZ: u64 = 1_193_182;

fn ns_to_ticks(ns: u64) -> u64 {
    (u128::from(ns) * u128::from(PIT_HZ) / 1_000_000_000) as u64
}

/// Virtual ns of `ticks` PIT ticks, rounded up (the tick has happened by then).
fn ticks_to_ns(ticks: u64) -> u64 {
    (u128::from(ticks) * 1_000_000_000).div_ceil(u128::from(PIT_HZ)) as u64
}

/// Whole PIT ticks from `start` to `now` (none if `now` is earlier).
fn ticks_since(now: VirtualTime, start: VirtualTime) -> u64 {
    ns_to_ticks(span_ns(now.saturating_duration_since(start)))
}

/// `ticks` PIT ticks as a span of virtual time.
fn ticks_span(ticks: u64) -> Duration {
    Duration::from_nanos(ticks_to_ns(ticks))
}

/// One 8259A.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Chip {
    irr: u8,
    isr: u8,
    imr: u8,
    base: u8,
    /// Next initialization word expected (2, 3, 4), 0 when initialized.
    icw: u8,
    icw4: bool,
    single: bool,
    auto_eoi: bool,
    read_isr: bool,
}

impl Chip {
    fn write_cmd(&mut self, v: u8) {
        if v & 0x10 != 0 {
            // ICW1: start initialization.
            *self = Chip { base: self.base, icw: 2, icw4: v & 1 != 0, single: v & 2 != 0, ..Chip::default() };
        } else if v & 0x08 != 0 {
            // OCW3.
            match v & 3 {
                2 => self.read_isr = false,
                3 => self.read_isr = true,
                _ => {}
            }
        } else {
            // OCW2: EOI.
            match v & 0xe0 {
                0x20 => self.isr &= self.isr.wrapping_sub(1), // the highest priority in service
                0x60 => self.isr &= !(1 << (v & 7)),
                _ => {}
            }
        }
    }

    fn write_data(&mut self, v: u8) {
        match self.icw {
            2 => {
                self.base = v & 0xf8;
                self.icw = if !self.single {
                    3
                } else if self.icw4 {
                    4
                } else {
                    0
                };
            }
            3 => self.icw = if self.icw4 { 4 } else { 0 },
            4 => {
                self.auto_eoi = v & 2 != 0;
                self.icw = 0;
            }
            _ => self.imr = v,
        }
    }

    fn read_cmd(&self) -> u8 {
        if self.read_isr {
            self.isr
        } else {
            self.irr
        }
    }

    /// The highest-priority requested, unmasked line that beats everything in service.
    fn pending(&self) -> Option<u8> {
        let req = self.irr & !self.imr;
        if req == 0 {
            return None;
        }
        let line = req.trailing_zeros() as u8;
        let in_service = if self.isr == 0 { 8 } else { self.isr.trailing_zeros() as u8 };
        (line < in_service).then_some(line)
    }

    fn ack(&mut self, line: u8) -> u8 {
        self.irr &= !(1 << line);
        if !self.auto_eoi {
            self.isr |= 1 << line;
        }
        self.base + line
    }

    fn save(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&[
            self.irr,
            self.isr,
            self.imr,
            self.base,
            self.icw,
            u8::from(self.icw4),
            u8::from(self.single),
            u8::from(self.auto_eoi),
            u8::from(self.read_isr),
        ]);
    }

    fn restore(b: &[u8]) -> Chip {
        Chip {
            irr: b[0],
            isr: b[1],
            imr: b[2],
            base: b[3],
            icw: b[4],
            icw4: b[5] != 0,
            single: b[6] != 0,
            auto_eoi: b[7] != 0,
            read_isr: b[8] != 0,
        }
    }
}

/// Master and slave 8259A (the slave cascades on the master's IRQ 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pic {
    chips: [Chip; 2],
}

impl Default for Pic {
    /// Power-on state: everything masked, Linux's vector bases (0x30, 0x38) until the
    /// guest programs its own.
    fn default() -> Self {
        let chip = |base| Chip { imr: 0xff, base, ..Chip::default() };
        Pic { chips: [chip(0x30), chip(0x38)] }
    }
}

impl Pic {
    /// An edge on line `irq` (0-15).
    pub fn raise(&mut self, irq: u8) {
        let (c, line) = ((irq / 8) as usize, irq % 8);
        self.chips[c].irr |= 1 << line;
    }

    /// Port access: `port` is 0x20, 0x21, 0xa0 or 0xa1.
    pub fn write(&mut self, port: u16, v: u8) {
        let c = usize::from(port >= 0xa0);
        if port & 1 == 0 {
            self.chips[c].write_cmd(v);
        } else {
            self.chips[c].write_data(v);
        }
    }

    /// Port read: 0x20 and 0xa0 give the IRR, or the ISR once OCW3 asked
    /// for it; 0x21 and 0xa1 give the interrupt mask.
    pub fn read(&self, port: u16) -> u8 {
        let c = usize::from(port >= 0xa0);
        if port & 1 == 0 {
            self.chips[c].read_cmd()
        } else {
            self.chips[c].imr
        }
    }

    /// The slave's request as seen on the master's IRQ 2.
    fn master_view(&self) -> Chip {
        let mut m = self.chips[0];
        if self.chips[1].pending().is_some() {
            m.irr |= 1 << 2;
        }
        m
    }

    /// Whether an interrupt would be delivered to a CPU that accepts one.
    pub fn has_pending(&self) -> bool {
        self.master_view().pending().is_some()
    }

    /// The CPU accepts the pending interrupt: its vector (moved to in-service).
    pub fn ack(&mut self) -> Option<u8> {
        let line = self.master_view().pending()?;
        if line == 2 && self.chips[0].irr & 4 == 0 {
            let s = self.chips[1].pending().expect("the slave requests");
            self.chips[0].ack(2);
            return Some(self.chips[1].ack(s));
        }
        Some(self.chips[0].ack(line))
    }

    /// The state for a snapshot: 18 bytes, 9 per chip.
    pub fn save(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(18);
        self.chips[0].save(&mut v);
        self.chips[1].save(&mut v);
        v
    }

    /// Restores what [`Pic::save`] produced; a [`KvmError::Config`] if `b`
    /// is not 18 bytes.
    pub fn restore(&mut self, b: &[u8]) -> Result<()> {
        if b.len() != 18 {
            return Err(KvmError::Config(format!("pic: saved state has {} bytes, wrong size", b.len())));
        }
        self.chips = [Chip::restore(&b[..9]), Chip::restore(&b[9..])];
        Ok(())
    }
}

/// One PIT channel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Channel {
    mode: u8,
    /// Access mode: 1 lobyte, 2 hibyte, 3 lobyte then hibyte.
    access: u8,
    reload: u16,
    /// The low byte of a lo/hi write in progress.
    low: Option<u8>,
    /// Virtual time at which counting started (the count was loaded); `None`: idle.
    start: Option<VirtualTime>,
    latched: Option<u16>,
    /// Next byte of a lo/hi read is the high byte.
    read_high: bool,
    /// Channel 0: interrupts delivered since `start` (periodic modes), or 1 once the
    /// one-shot fired.
    fired: u64,
}

impl Channel {
    fn period_ticks(&self) -> u64 {
        if self.reload == 0 {
            0x1_0000
        } else {
            u64::from(self.reload)
        }
    }

    fn periodic(&self) -> bool {
        matches!(self.mode, 2 | 3 | 6 | 7)
    }

    /// The count at `now`.
    fn count(&self, now: VirtualTime) -> u16 {
        let Some(start) = self.start else { return self.reload };
        let p = self.period_ticks();
        let t = ticks_since(now, start);
        if self.periodic() {
            (p - t % p) as u16
        } else {
            p.saturating_sub(t) as u16
        }
    }

    /// Output of a mode-0 channel (high once the count reached zero).
    fn out(&self, now: VirtualTime) -> bool {
        match self.start {
            None => true,
            Some(start) if !self.periodic() => now >= start + ticks_span(self.period_ticks()),
            Some(start) => ticks_since(now, start) % self.period_ticks() != self.period_ticks() - 1,
        }
    }

    /// The virtual time of the next interrupt (channel 0).
    fn next_irq(&self) -> Option<VirtualTime> {
        let start = self.start?;
        if !self.periodic() && self.fired > 0 {
            return None;
        }
        Some(start + ticks_span(self.period_ticks() * (self.fired + 1)))
    }

    fn write_count(&mut self, now: VirtualTime, v: u8) {
        let value = match self.access {
            1 => Some(u16::from(v)),
            2 => Some(u16::from(v) << 8),
            _ => match self.low.take() {
                None => {
                    self.low = Some(v);
                    None
                }
                Some(lo) => Some(u16::from(lo) | u16::from(v) << 8),
            },
        };
        if let Some(value) = value {
            self.reload = value;
            self.start = Some(now);
            self.fired = 0;
        }
    }

    fn read_count(&mut self, now: VirtualTime) -> u8 {
        let c = self.latched.unwrap_or_else(|| self.count(now));
        let byte = match self.access {
            1 => c as u8,
            2 => (c >> 8) as u8,
            _ => {
                self.read_high = !self.read_high;
                if self.read_high {
                    c as u8
                } else {
                    (c >> 8) as u8
                }
            }
        };
        if self.access != 3 || !self.read_high {
            self.latched = None;
        }
        byte
    }

    fn save(&self, out: &mut Vec<u8>) {
        out.push(self.mode);
        out.push(self.access);
        out.extend_from_slice(&self.reload.to_le_bytes());
        out.push(self.low.map_or(0, |_| 1));
        out.push(self.low.unwrap_or(0));
        out.push(u8::from(self.start.is_some()));
        out.extend_from_slice(&self.start.map_or(0, VirtualTime::as_ns).to_le_bytes());
        out.push(u8::from(self.latched.is_some()));
        out.extend_from_slice(&self.latched.unwrap_or(0).to_le_bytes());
        out.push(u8::from(self.read_high));
        out.extend_from_slice(&self.fired.to_le_bytes());
    }

    const SAVED: usize = 27;

    fn restore(b: &[u8]) -> Channel {
        Channel {
            mode: b[0],
            access: b[1],
            reload: u16::from_le_bytes([b[2], b[3]]),
            low: (b[4] != 0).then_some(b[5]),
            start: (b[6] != 0).then(|| VirtualTime::from_ns(u64::from_le_bytes(b[7..15].try_into().unwrap()))),
            latched: (b[15] != 0).then(|| u16::from_le_bytes([b[16], b[17]])),
            read_high: b[18] != 0,
            fired: u64::from_le_bytes(b[19..27].try_into().unwrap()),
        }
    }
}

/// The 8254 PIT (channels 0 and 2; channel 1, DRAM refresh, is ignored) and port 0x61.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pit {
    ch: [Channel; 3],
    /// Port 0x61 bits 0 (channel 2 gate) and 1 (speaker data).
    port61: u8,
}

impl Pit {
    /// Port access: 0x40-0x43, 0x61.
    pub fn write(&mut self, now: VirtualTime, port: u16, v: u8) {
        match port {
            0x40..=0x42 => self.ch[usize::from(port - 0x40)].write_count(now, v),
            0x43 => {
                let c = usize::from(v >> 6);
                if c == 3 {
                    return; // read-back: not modelled
                }
                let access = (v >> 4) & 3;
                if access == 0 {
                    let count = self.ch[c].count(now);
                    self.ch[c].latched.get_or_insert(count);
                    return;
                }
                self.ch[c] = Channel { mode: (v >> 1) & 7, access, ..Channel::default() };
            }
            0x61 => {
                let was = self.port61 & 1;
                self.port61 = v & 3;
                if was == 0 && v & 1 != 0 {
                    // Rising gate: channel 2 restarts its count.
                    if self.ch[2].start.is_some() {
                        self.ch[2].start = Some(now);
                    }
                }
            }
            _ => {}
        }
    }

    /// Port read at virtual time `now`: a channel's count (or latched
    /// count) at 0x40-0x42, port 0x61 with channel 2's output in bit 5;
    /// 0xff elsewhere.
    pub fn read(&mut self, now: VirtualTime, port: u16) -> u8 {
        match port {
            0x40..=0x42 => self.ch[usize::from(port - 0x40)].read_count(now),
            0x61 => {
                let out2 = self.port61 & 1 != 0 && self.ch[2].out(now);
                self.port61 | (u8::from(out2) << 5)
            }
            _ => 0xff,
        }
    }

    /// When channel 0 next interrupts (IRQ 0), if it is programmed.
    pub fn deadline(&self) -> Option<VirtualTime> {
        self.ch[0].next_irq()
    }

    /// Called by the run loop when `now` reached [`Pit::deadline`]: counts the
    /// interrupt (one per call, even if several periods passed: a late tick is
    /// delivered once, as lost ticks are on real hardware).
    pub fn fire(&mut self, now: VirtualTime) {
        let c = &mut self.ch[0];
        let Some(start) = c.start else { return };
        if c.periodic() {
            let p = c.period_ticks();
            let elapsed = ticks_since(now, start) / p;
            c.fired = elapsed.max(c.fired + 1);
        } else {
            c.fired = 1;
        }
    }

    /// The state for a snapshot: 27 bytes per channel (all three), then
    /// port 0x61.
    pub fn save(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(3 * Channel::SAVED + 1);
        for c in &self.ch {
            c.save(&mut v);
        }
        v.push(self.port61);
        v
    }

    /// Restores what [`Pit::save`] produced; a [`KvmError::Config`] if `b`
    /// has the wrong size.
    pub fn restore(&mut self, b: &[u8]) -> Result<()> {
        if b.len() != 3 * Channel::SAVED + 1 {
            return Err(KvmError::Config(format!("pit: saved state has {} bytes, wrong size", b.len())));
        }
        for (i, c) in self.ch.iter_mut().enumerate() {
            *c = Channel::restore(&b[i * Channel::SAVED..]);
        }
        self.port61 = b[3 * Channel::SAVED];
        Ok(())
    }
}

/// The MC146818 CMOS clock, read-only: date and time from virtual time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rtc {
    /// Wall-clock time (ns since the Unix epoch) at virtual time 0.
    pub epoch_ns: u64,
    index: u8,
}

/// (year, month 1-12, day 1-31) of a day count since 1970-01-01 (proleptic
/// Gregorian; Howard Hinnant's civil_from_days).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn bcd(v: u32) -> u8 {
    ((v / 10) << 4 | (v % 10)) as u8
}

impl Rtc {
    /// Port write: 0x70 selects the register read next (bit 7, the NMI
    /// mask, is dropped); writes to 0x71 are ignored (read-only clock).
    pub fn write(&mut self, port: u16, v: u8) {
        if port == 0x70 {
            self.index = v & 0x7f; // bit 7 masks NMI
        }
    }

    /// Port read at virtual time `now`: at 0x71 the selected register
    /// (time and date in BCD, 24-hour; fixed status registers), 0xff at any
    /// other port.
    pub fn read(&self, now: VirtualTime, port: u16) -> u8 {
        if port != 0x71 {
            return 0xff;
        }
        let secs = (self.epoch_ns.saturating_add(now.as_ns()) / 1_000_000_000) as i64;
        let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400) as u32);
        let (y, m, d) = civil_from_days(days);
        match self.index {
            0x00 => bcd(rem % 60),
            0x02 => bcd(rem / 60 % 60),
            0x04 => bcd(rem / 3600),
            0x06 => bcd(((days + 4).rem_euclid(7) + 1) as u32), // 1 = Sunday
            0x07 => bcd(d),
            0x08 => bcd(m),
            0x09 => bcd((y % 100) as u32),
            0x32 => bcd((y / 100) as u32),
            0x0a => 0x26, // divider on, 1024 Hz, update not in progress
            0x0b => 0x02, // 24-hour, BCD, no interrupts
            0x0c => 0x00,
            0x0d => 0x80, // battery good
            _ => 0x00,
        }
    }

    /// The state for a snapshot: 9 bytes, `epoch_ns` (little-endian) and
    /// the selected register.
    pub fn save(&self) -> Vec<u8> {
        let mut v = self.epoch_ns.to_le_bytes().to_vec();
        v.push(self.index);
        v
    }

    /// Restores what [`Rtc::save`] produced; a [`KvmError::Config`] if `b`
    /// is not 9 bytes.
    pub fn restore(&mut self, b: &[u8]) -> Result<()> {
        if b.len() != 9 {
            return Err(KvmError::Config(format!("rtc: saved state has {} bytes, wrong size", b.len())));
        }
        self.epoch_ns = u64::from_le_bytes(b[..8].try_into().unwrap());
        self.index = b[8];
        Ok(())
    }
}

#[cfg(test)]
mod tests;
