//! The queue layout virtio-net and virtio-console share (virtio 1.2,
//! sections 5.1.2 and 5.3.2, one console port): queue 0 receives (the
//! device fills buffers the guest posted), queue 1 transmits (the guest
//! hands the device buffers to read). Written once here so that the two
//! devices cannot disagree about it.

use super::{DeviceError, Queues};

/// The receive queue: bytes or frames to the guest.
pub const RX_QUEUE: usize = 0;
/// The transmit queue: bytes or frames from the guest.
pub const TX_QUEUE: usize = 1;
/// Entries offered per queue (user-mode Linux uses at most 256).
pub const QUEUE_SIZE: u16 = 256;
/// Both queues' maximum sizes, for `VirtioDevice::queue_max_sizes`.
pub const QUEUE_SIZES: [u16; 2] = [QUEUE_SIZE, QUEUE_SIZE];

/// `VirtioDevice::queue_notify` for this layout. A kick of the receive
/// queue (new buffers) needs nothing now: what waits for buffers is
/// handed over when the engine next delivers to the device, while the
/// guest is stopped. A kick of the transmit queue runs `drain_tx`. Any
/// other index names no queue of the device.
pub fn notify(
    index: usize,
    queues: &mut Queues,
    drain_tx: impl FnOnce(&mut Queues) -> Result<bool, DeviceError>,
) -> Result<bool, DeviceError> {
    match index {
        RX_QUEUE => Ok(false),
        TX_QUEUE => drain_tx(queues),
        _ => Err(DeviceError::QueueNotReady(index)),
    }
}
