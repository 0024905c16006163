//! The execution's seeds: each execution's own ([`execution_seed`]) and
//! the per-node, per-boot device streams ([`entropy_seed`],
//! [`read_fault_seed`]).

use simrng::streams::{BOOT as BOOT_STREAM, ENTROPY as ENTROPY_STREAM, READ_FAULT as READ_FAULT_STREAM};

use crate::NodeId;

/// Derives the seed of execution `index` of a run, so any execution can be
/// replayed alone (SplitMix64 over seed and index).
pub fn execution_seed(run_seed: u64, index: u64) -> u64 {
    simrng::finalise(run_seed ^ index.wrapping_mul(simrng::mix::GAMMA).wrapping_add(0x632b_e59b_d9b4_e019))
}

/// The boot seed of a warm-start run with seed `run_seed`
/// ([`crate::ExecutionSpec::boot_seed`]): one for every execution of the
/// run, apart from each execution's own seed.
pub fn boot_seed(run_seed: u64) -> u64 {
    execution_seed(run_seed ^ BOOT_STREAM, u64::MAX)
}

/// `mix(mix(mix(execution_seed ^ stream) ^ index) ^ boot)`, where `mix` is
/// SplitMix64's finaliser and `index` the node's 0-based index: the seed of
/// one node's device stream in one boot.
fn node_stream_seed(stream: u64, execution_seed: u64, node: NodeId, boot: u32) -> u64 {
    use simrng::finalise as mix;
    let index = node.index() as u64;
    mix(mix(mix(execution_seed ^ stream) ^ index) ^ u64::from(boot))
}

/// The seed of the entropy device (virtio-rng) of `node` in its
/// `boot`-th boot (0 the first, 1 after the first crash, ...) of the
/// execution with seed `execution_seed`:
/// `mix(mix(mix(execution_seed ^ ENTROPY_STREAM) ^ index) ^ boot)`, where
/// `mix` is SplitMix64's finaliser and `index` the node's 0-based index.
///
/// A pure function of its arguments, drawn from no PRNG: giving guests
/// entropy shifts no other draw of the execution (scheduling, netsim,
/// crashes), and replaying an execution gives every guest the same bytes.
/// `mix` is a bijection, so within one execution distinct nodes get
/// distinct seeds and a node's boots get distinct seeds (a restarted node
/// does not see its previous boot's random numbers again).
pub fn entropy_seed(execution_seed: u64, node: NodeId, boot: u32) -> u64 {
    node_stream_seed(ENTROPY_STREAM, execution_seed, node, boot)
}

/// The seed of the read-fault stream (`[faults.disk] corrupt_read`) of the
/// data disk of `node` in its `boot`-th boot, derived like
/// [`entropy_seed`] with its own stream constant.
///
/// Why a device stream and not the engine's: a read is answered inside the
/// guest's kick, while the guest is blocked and the engine is not choosing
/// anything, so the draw must happen in the device. Its place in the
/// device's stream is fixed by the order of the node's reads since boot,
/// which the engine's schedule fixes; no other stream moves when reads are
/// corrupted or not, and a restarted node draws afresh.
pub fn read_fault_seed(execution_seed: u64, node: NodeId, boot: u32) -> u64 {
    node_stream_seed(READ_FAULT_STREAM, execution_seed, node, boot)
}

#[cfg(test)]
mod tests {
    use super::entropy_seed;
    use crate::NodeId;

    fn n(i: usize) -> NodeId {
        NodeId::at(i)
    }

    #[test]
    fn entropy_seeds_are_fixed_and_distinct_per_node_and_boot() {
        // A fixed derivation: replays and failure files depend on it, so a
        // change must show here (values computed independently, in Python,
        // from the formula in the doc comment).
        assert_eq!(entropy_seed(1, n(0), 0), 0xd037_606f_e0be_dbba);
        assert_eq!(entropy_seed(1, n(2), 1), 0xc8e0_bccb_cc45_0bbf);
        let mut seen = std::collections::BTreeSet::new();
        for seed in [0u64, 1, 2, u64::MAX] {
            for node in NodeId::first(8) {
                for boot in 0..4u32 {
                    assert!(seen.insert(entropy_seed(seed, node, boot)), "{seed} {node} {boot}");
                }
            }
        }
        // Not the execution seed itself, nor the execution seed of a
        // neighbouring run index.
        assert_ne!(entropy_seed(5, n(0), 0), 5);
        assert_ne!(entropy_seed(5, n(0), 0), super::execution_seed(5, 0));
    }

    #[test]
    fn read_fault_seeds_are_fixed_and_apart_from_entropy() {
        use super::read_fault_seed;
        // Values computed independently, in Python, from the formula.
        assert_eq!(read_fault_seed(1, n(0), 0), 0xfa31_e446_5713_ceec);
        assert_eq!(read_fault_seed(1, n(2), 1), 0x0994_0a72_7f8f_52d3);
        for seed in [0u64, 1, u64::MAX] {
            for node in NodeId::first(4) {
                for boot in 0..3u32 {
                    let r = read_fault_seed(seed, node, boot);
                    assert_ne!(r, entropy_seed(seed, node, boot));
                    assert_ne!(r, read_fault_seed(seed, node, boot + 1));
                    assert_ne!(r, read_fault_seed(seed, n(node.index() + 1), boot));
                }
            }
        }
    }
}
