//! virtio-mmio transport driven by a real guest: MMIO exits decode the guest's loads
//! and stores, the driver init sequence reaches DRIVER_OK, a queue notification makes
//! the device signal, and the interrupt is injected and acknowledged.

mod kvm_common;

use kvm_common::{guest, kvm_available};
use vm_memory::GuestMemoryMmap;
use vmm::kvm::virtio_mmio::{window_base, QueueConfig, Signal, VirtioDevice, VirtioMmioTransport, WINDOW};
use vmm::kvm::{MicroVmBuilder, RunOutcome};

struct Answering;

impl VirtioDevice for Answering {
    fn device_type(&self) -> u32 {
        0x1a
    }
    fn queue_max_sizes(&self) -> Vec<u16> {
        vec![16]
    }
    fn features(&self) -> u64 {
        0
    }
    fn read_config(&self, _offset: u64, data: &mut [u8]) {
        data.fill(0);
    }
    fn write_config(&mut self, _offset: u64, _data: &[u8]) {}
    fn activate(&mut self, _features: u64, _queues: &[QueueConfig]) {}
    fn notify(&mut self, _mem: &GuestMemoryMmap, _now: u64, _queue: u16) -> Signal {
        Signal { used_buffer: true, config_change: false }
    }
    fn reset(&mut self) {}
}

#[test]
fn kvm_virtio_mmio_guest_init_notify_interrupt() {
    if !kvm_available() {
        return;
    }
    let mut vm = MicroVmBuilder::new().memory_mib(8).image(&guest("virtio")).build().unwrap();
    assert!(vm.mmio_mut().attach(window_base(0), WINDOW, Box::new(VirtioMmioTransport::new(Answering, 0x31))));
    let out = vm.run_to_end(100_000).unwrap();
    let console = String::from_utf8_lossy(vm.console()).to_string();
    eprintln!("{console}stats {:?}", vm.stats());
    assert_eq!(out, RunOutcome::PoweredOff(0), "{console}");
    assert!(console.starts_with("0000000074726976 0000000000000002 000000000000001a\n"), "{console}");
    assert!(console.contains("irq status=0000000000000001\n"));
    assert!(console.ends_with("virtio ok\n"));
    assert_eq!(vm.stats().injected, 1);
    assert_eq!(vm.mmio_mut().unclaimed, 0);
}
