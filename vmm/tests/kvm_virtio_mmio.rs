//! virtio-mmio transport driven by a real guest: MMIO exits decode the guest's loads
//! and stores, the driver init sequence reaches DRIVER_OK, a queue notification makes
//! the device signal, and the interrupt is injected and acknowledged.

mod kvm_common;

use kvm_common::{guest, kvm_available};
use vmm::kvm::virtio_mmio::{window_base, VirtioMmioTransport, WINDOW};
use vmm::kvm::{MicroVmBuilder, RunOutcome};
use vmm::virtio::{DeviceError, NoHook, Queues, VirtioDevice};

/// A device that answers every notification with a used-buffer interrupt.
struct Answering;

impl VirtioDevice for Answering {
    fn device_id(&self) -> u32 {
        0x1a
    }
    fn features(&self) -> u64 {
        0
    }
    fn ack_features(&mut self, _features: u64) {}
    fn config(&self) -> Vec<u8> {
        Vec::new()
    }
    fn queue_max_sizes(&self) -> &[u16] {
        &[16]
    }
    fn queue_notify(&mut self, _index: usize, _queues: &mut Queues) -> Result<bool, DeviceError> {
        Ok(true)
    }
    fn reset(&mut self) {}
}

#[test]
fn kvm_virtio_mmio_guest_init_notify_interrupt() {
    if !kvm_available() {
        return;
    }
    let mut vm = MicroVmBuilder::new().memory_mib(8).image(&guest("virtio")).build().unwrap();
    let t = VirtioMmioTransport::new(Answering, NoHook::default(), vm.memory().clone(), 0x31);
    assert!(vm.mmio_mut().attach(window_base(0), WINDOW, Box::new(t)));
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
