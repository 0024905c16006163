//! The deterministic run loop of a [`MicroVm`] (see the determinism
//! contract in [`super`]): entering the vCPU, decoding and accounting each
//! exit, injecting interrupts, and moving virtual time while the guest is
//! halted.

use kvm_bindings::{kvm_guest_debug, kvm_interrupt, KVM_GUESTDBG_ENABLE, KVM_GUESTDBG_SINGLESTEP};
use kvm_ioctls::VcpuExit;
use simtime::VirtualTime;
use vm_memory::{Bytes, GuestAddress};

use super::{Ev, MicroVm, RunLimits, RunOutcome};
use crate::kvm::devices::DeviceEvent;
use crate::kvm::error::{ioctl, KvmError, Result};

vmm_sys_util::ioctl_iow_nr!(KVM_INTERRUPT, kvm_bindings::KVMIO, 0x86, kvm_interrupt);

/// What one KVM_RUN returned, copied out of the kvm_run page.
enum Exit {
    Io,
    Hlt,
    IrqWindow,
    Shutdown,
    Power(u32),
    Internal(u32),
    FailEntry(u64),
    Other(String),
    /// A single step (KVM_GUESTDBG_SINGLESTEP) ended; only ever asked for by
    /// [`MicroVm::settle_window`].
    Debug,
    /// KVM_RUN was interrupted (EINTR, EAGAIN) before the guest exited, by a
    /// host signal at a host-timed point: enter again.
    Reenter,
}

impl MicroVm {
    /// Moves a due timer and interrupts raised by MMIO devices into the pending set.
    fn collect_interrupts(&mut self) {
        if let Some(d) = self.bus.clock.deadline() {
            if d <= self.clock.now() {
                let v = self.bus.clock.fire();
                self.pending.set(v);
            }
        }
        if let Some(d) = self.bus.pit.deadline() {
            if d <= self.clock.now() {
                self.bus.pit.fire(self.clock.now());
                self.bus.pic.raise(0);
            }
        }
        for v in self.mmio.take_interrupts() {
            self.pending.set(v);
        }
    }

    /// An interrupt waits for the vCPU: a vector raised directly, or one the PIC
    /// would deliver.
    fn has_interrupt(&self) -> bool {
        !self.pending.is_empty() || self.bus.pic.has_pending()
    }

    /// Moves a due timer into the pending interrupt, then injects the pending interrupt
    /// if the vCPU can take it, or asks KVM for an interrupt-window exit.
    fn deliver_interrupts(&mut self) -> Result<()> {
        self.collect_interrupts();
        if !self.has_interrupt() {
            self.vcpu.get_kvm_run().request_interrupt_window = 0;
            return Ok(());
        }
        // Readiness comes from the vCPU state itself (IF set, no STI/MOV-SS shadow), not
        // from kvm_run's flags: those are only written at exits, so they would be stale
        // after a restore or a snapshot's immediate-exit run and make the injection path
        // depend on where snapshots were taken.
        let if_set = self.vcpu.get_regs().map_err(ioctl("KVM_GET_REGS"))?.rflags & 0x200 != 0;
        let shadow = if if_set {
            self.vcpu.get_vcpu_events().map_err(ioctl("KVM_GET_VCPU_EVENTS"))?.interrupt.shadow
        } else {
            0
        };
        if if_set && shadow == 0 {
            self.vcpu.get_kvm_run().request_interrupt_window = 0;
            // Directly raised vectors first, then the PIC's (acknowledged only now,
            // when the CPU takes it).
            let vector = match self.pending.highest() {
                Some(v) => {
                    self.pending.clear(v);
                    v
                }
                None => self.bus.pic.ack().expect("the PIC has an interrupt pending"),
            };
            let irq = kvm_interrupt { irq: u32::from(vector) };
            // SAFETY: KVM_INTERRUPT reads one kvm_interrupt; `irq` outlives the call.
            let ret = unsafe { vmm_sys_util::ioctl::ioctl_with_ref(&self.vcpu, KVM_INTERRUPT(), &irq) };
            if ret < 0 {
                return Err(KvmError::Ioctl { op: "KVM_INTERRUPT", source: kvm_ioctls::Error::last() });
            }
            self.stats.injected += 1;
            self.record(Ev::Inject, u64::from(vector), &[]);
        } else {
            // VMX/SVM report the window at the exact instruction that opens it. PVM
            // reports it at whatever exit comes next, including exits for host
            // interrupts that otherwise never reach userspace: the injection point would
            // follow host timing (seen under load as an extra IrqWindowOpen exit). There
            // the interrupt waits for the guest's next own exit with IF=1 instead.
            self.vcpu.get_kvm_run().request_interrupt_window = u8::from(self.host.hardware_virt);
        }
        Ok(())
    }

    /// The vCPU executed `hlt`: wake it with a pending interrupt, or move time to the
    /// timer deadline (bounded by `limits.until`). Returns `Some(outcome)` when the
    /// guest stays halted (it remains so on the next [`MicroVm::run`]).
    fn wait_halted(&mut self, limits: &RunLimits) -> Result<Option<RunOutcome>> {
        self.collect_interrupts();
        if !self.has_interrupt() {
            let rflags = self.vcpu.get_regs().map_err(ioctl("KVM_GET_REGS"))?.rflags;
            let deadline = self.bus.next_deadline().filter(|_| rflags & 0x200 != 0);
            let Some(deadline) = deadline else {
                // Interrupts off, or nothing that could raise one: halted for good
                // (until a device interrupt is raised from outside).
                return Ok(Some(RunOutcome::Halted));
            };
            if let Some(until) = limits.until.filter(|&u| deadline > u) {
                if self.clock.now() < until {
                    self.clock.jump_to(until);
                    self.record(Ev::TimerJump, until.as_ns(), &[]);
                }
                return Ok(Some(RunOutcome::TimeLimit));
            }
            self.clock.jump_to(deadline);
            self.record(Ev::TimerJump, deadline.as_ns(), &[]);
        }
        self.halted = false;
        Ok(None)
    }

    /// For a halted vCPU: whether an interrupt can wake it at the current time (one is
    /// pending, or the timer is due). Moves a due timer into the pending set.
    pub fn wake_due(&mut self) -> bool {
        self.collect_interrupts();
        self.has_interrupt()
    }

    /// The armed timer's deadline, if any.
    pub fn timer_deadline(&self) -> Option<VirtualTime> {
        self.bus.next_deadline()
    }

    /// Moves the clock of a halted vCPU forward to `t` (recorded like a timer jump),
    /// also past an armed timer, which then fires late, at `t`: the engine granted the
    /// node later than it asked, or an outside event reaches it. A running (not
    /// halted) vCPU's clock only moves by its exits. Returns the clock.
    pub fn advance_halted(&mut self, t: VirtualTime) -> VirtualTime {
        if self.halted && t > self.clock.now() {
            self.clock.jump_to(t);
            self.record(Ev::TimerJump, t.as_ns(), &[]);
        }
        self.clock.now()
    }

    /// The wall-clock time (ns since the Unix epoch) the guest's CMOS clock shows at
    /// virtual time 0.
    pub fn set_time_of_day(&mut self, epoch_ns: u64) {
        self.bus.rtc.epoch_ns = epoch_ns;
    }

    /// Starts the clock of a VM that has not run yet at `t` (a node booted, or booted
    /// again after a crash, at engine time `t`).
    pub fn start_clock_at(&mut self, t: VirtualTime) {
        if self.stats.exits == 0 && t > self.clock.now() {
            self.clock.jump_to(t);
        }
    }

    /// Whether the vCPU is halted, waiting for an interrupt.
    pub fn is_halted(&self) -> bool {
        self.halted
    }

    /// Runs the guest until it halts for good, powers off, or a limit is reached.
    pub fn run(&mut self, limits: RunLimits) -> Result<RunOutcome> {
        let mut reenter = false;
        loop {
            if limits.max_exits.is_some_and(|m| self.stats.exits >= m) {
                return Ok(RunOutcome::ExitLimit);
            }
            if limits.until.is_some_and(|t| self.clock.now() >= t) {
                return Ok(RunOutcome::TimeLimit);
            }
            if self.stop.swap(false, std::sync::atomic::Ordering::SeqCst) {
                return Ok(RunOutcome::Interrupted);
            }
            if self.halted {
                if let Some(outcome) = self.wait_halted(&limits)? {
                    return Ok(outcome);
                }
            }
            // After an interrupted KVM_RUN (a host signal, a host-timed point) nothing
            // may be injected: re-enter as if the exit never happened.
            if !std::mem::take(&mut reenter) {
                self.deliver_interrupts()?;
            }
            let mut exit = self.enter()?;
            if matches!(exit, Exit::IrqWindow) && self.host.hardware_virt {
                exit = self.settle_window()?;
            }
            if let Exit::Reenter = exit {
                if self.stop.swap(false, std::sync::atomic::Ordering::SeqCst) {
                    return Ok(RunOutcome::Interrupted);
                }
                reenter = true;
                continue;
            }
            self.stats.exits += 1;
            if let Some(outcome) = self.account(exit)? {
                return Ok(outcome);
            }
        }
    }

    /// Enters the vCPU once and decodes its exit. I/O exits are handled here, while the
    /// kvm_run page holds their data: they charge the clock first (devices see the time
    /// after the exit's cost) and are recorded.
    fn enter(&mut self) -> Result<Exit> {
        Ok(match self.vcpu.run() {
            Ok(VcpuExit::IoOut(port, data)) => {
                let now = self.clock.tick();
                self.stats.io_out += 1;
                let ev = self.bus.write(now, port, data);
                let (p, d) = (u64::from(port), data.to_vec());
                self.record(Ev::IoOut, p, &d);
                match ev {
                    DeviceEvent::PowerOff(code) => Exit::Power(code),
                    DeviceEvent::None => Exit::Io,
                }
            }
            Ok(VcpuExit::IoIn(port, data)) => {
                let now = self.clock.tick();
                self.stats.io_in += 1;
                self.bus.read(now, port, data);
                let (p, d) = (u64::from(port), data.to_vec());
                self.record(Ev::IoIn, p, &d);
                Exit::Io
            }
            Ok(VcpuExit::MmioWrite(addr, data)) => {
                let now = self.clock.tick();
                self.stats.mmio += 1;
                self.mmio.write(now, addr, data);
                let d = data.to_vec();
                self.record(Ev::MmioWrite, addr, &d);
                Exit::Io
            }
            Ok(VcpuExit::MmioRead(addr, data)) => {
                let now = self.clock.tick();
                self.stats.mmio += 1;
                self.mmio.read(now, addr, data);
                let d = data.to_vec();
                self.record(Ev::MmioRead, addr, &d);
                Exit::Io
            }
            Ok(VcpuExit::Debug(_)) => Exit::Debug,
            Ok(VcpuExit::Hlt) => Exit::Hlt,
            Ok(VcpuExit::IrqWindowOpen) => Exit::IrqWindow,
            Ok(VcpuExit::Shutdown) => Exit::Shutdown,
            Ok(VcpuExit::InternalError) => {
                // SAFETY: exit_reason is KVM_EXIT_INTERNAL_ERROR, so `internal` is the
                // active union member.
                let sub = unsafe { self.vcpu.get_kvm_run().__bindgen_anon_1.internal.suberror };
                Exit::Internal(sub)
            }
            Ok(VcpuExit::FailEntry(reason, _)) => Exit::FailEntry(reason),
            Ok(other) => Exit::Other(format!("{other:?}")),
            Err(e) if e.errno() == libc::EINTR || e.errno() == libc::EAGAIN => Exit::Reenter,
            Err(e) => return Err(KvmError::Ioctl { op: "KVM_RUN", source: e }),
        })
    }

    /// Accounts one exit the guest took: HLT and interrupt-window exits charge the
    /// clock here (I/O exits did in [`Self::enter`]). Returns the outcome when the run
    /// ends with it.
    fn account(&mut self, exit: Exit) -> Result<Option<RunOutcome>> {
        match exit {
            Exit::Io | Exit::Reenter => {}
            Exit::Power(code) => return Ok(Some(RunOutcome::PoweredOff(code))),
            Exit::IrqWindow => {
                self.clock.tick();
                self.stats.irq_window += 1;
                self.record(Ev::IrqWindow, 0, &[]);
            }
            Exit::Hlt => {
                self.clock.tick();
                self.stats.hlt += 1;
                self.record(Ev::Hlt, 0, &[]);
                self.halted = true;
            }
            Exit::Shutdown => return Ok(Some(RunOutcome::Shutdown)),
            Exit::Internal(suberror) => {
                let rip = self.vcpu.get_regs().map(|r| r.rip).unwrap_or(u64::MAX);
                return Err(KvmError::InternalError { suberror, rip });
            }
            Exit::FailEntry(reason) => return Err(KvmError::FailEntry { reason }),
            Exit::Debug => return Err(KvmError::UnhandledExit("a single-step exit nobody asked for".into())),
            Exit::Other(s) => return Err(KvmError::UnhandledExit(s)),
        }
        Ok(None)
    }

    /// An interrupt-window exit must come where the guest opens the window: after
    /// the instruction that sets IF (POPF, IRET), or after the one that follows STI
    /// (STI blocks interrupts for one more instruction, the "STI shadow"). KVM also
    /// reports the window at any exit of its own (a host interrupt, a nested page
    /// fault) where it sees IF set and no shadow, and under nested SVM emulation the
    /// shadow can be lost at such an exit: the window then shows up right after the
    /// STI, at a host-timed moment (seen: one run in five of examples/reorder, the
    /// window at `sti`+1 in `uart_port_unlock_irqrestore` instead of after the next
    /// instruction). So a window exit right after an STI byte (0xfb) is carried one
    /// instruction on by a single step, with no window requested, and the exit that
    /// ends the step stands for it: the same place as the exit that came on time.
    /// An instruction after STI that exits by itself (I/O, HLT; `sti; hlt` is the
    /// idle loop) ends the step with its own exit, which then stands as usual. The
    /// rule depends only on guest code, so it applies the same in every run
    /// (bounded, for `sti; sti; ...`).
    fn settle_window(&mut self) -> Result<Exit> {
        const MAX_STEPS: u32 = 4;
        for _ in 0..MAX_STEPS {
            if !self.after_sti()? {
                return Ok(Exit::IrqWindow);
            }
            match self.step_one()? {
                Exit::Debug => continue,
                other => return Ok(other),
            }
        }
        Ok(Exit::IrqWindow)
    }

    /// Whether the byte before rip is STI's opcode (0xfb). False where rip - 1 does
    /// not translate (nothing mapped there: no STI either).
    fn after_sti(&self) -> Result<bool> {
        let rip = self.vcpu.get_regs().map_err(ioctl("KVM_GET_REGS"))?.rip;
        let t = self.vcpu.translate_gva(rip.wrapping_sub(1)).map_err(ioctl("KVM_TRANSLATE"))?;
        if t.valid == 0 {
            return Ok(false);
        }
        let mut byte = [0u8; 1];
        Ok(self.mem.read_slice(&mut byte, GuestAddress(t.physical_address)).is_ok() && byte[0] == 0xfb)
    }

    /// Executes one guest instruction (KVM_GUESTDBG_SINGLESTEP, no interrupt window
    /// asked for) and returns the exit that ended it: [`Exit::Debug`], or the
    /// instruction's own exit (handled by [`Self::enter`] as always). An interrupted
    /// KVM_RUN re-enters, unless the stop flag is up: then [`Exit::Reenter`] goes back
    /// to [`Self::run`], which stops.
    fn step_one(&mut self) -> Result<Exit> {
        let set = |vm: &Self, control: u32| {
            let dbg = kvm_guest_debug { control, ..Default::default() };
            vm.vcpu.set_guest_debug(&dbg).map_err(ioctl("KVM_SET_GUEST_DEBUG"))
        };
        self.vcpu.get_kvm_run().request_interrupt_window = 0;
        set(self, KVM_GUESTDBG_ENABLE | KVM_GUESTDBG_SINGLESTEP)?;
        let exit = loop {
            match self.enter() {
                Ok(Exit::Reenter) if !self.stop.load(std::sync::atomic::Ordering::SeqCst) => continue,
                other => break other,
            }
        };
        set(self, 0)?;
        exit
    }

    /// Runs until the guest halts or powers off; fails on any other outcome within
    /// `max_exits` (a convenience for tests).
    pub fn run_to_end(&mut self, max_exits: u64) -> Result<RunOutcome> {
        self.run(RunLimits { max_exits: Some(self.stats.exits + max_exits), until: None })
    }
}
