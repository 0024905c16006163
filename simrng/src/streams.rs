//! Every stream of a run and its constant.
//!
//! A stream is `Xoshiro256PlusPlus::seed_from_u64(seed ^ STREAM)` ([`stream`]),
//! where `seed` is the execution's seed unless the stream says otherwise.
//! The constants are ASCII names, so they are distinct from each other and
//! easy to recognise in a debugger; each must stay distinct from every
//! other (a test below checks). Changing one changes every trace that
//! draws from it: the golden hashes (tests/golden.rs) would show it.

use rand_core::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// The generator every stream is: Xoshiro256++.
pub type Rng = Xoshiro256PlusPlus;

/// The generator of stream `stream` of seed `seed`.
pub fn stream(seed: u64, stream: u64) -> Rng {
    seeded(seed ^ stream)
}

/// The generator of a seed already derived for one use: a device's seed
/// (engine::seeds, with [`ENTROPY`] or [`READ_FAULT`]), a calm
/// continuation's seed, or a test's literal. Every generator in the
/// workspace is made here or by [`stream`].
pub fn seeded(seed: u64) -> Rng {
    Xoshiro256PlusPlus::seed_from_u64(seed)
}

/// The generator of execution `execution` of a seeded strategy whose seed
/// is `seed`: both mixed ([`crate::splitmix64`]), the execution's index
/// offset by [`STRATEGY_EXECUTION`].
pub fn strategy_execution(seed: u64, execution: u64) -> Rng {
    use crate::mix::splitmix64;
    seeded(splitmix64(seed) ^ splitmix64(execution.wrapping_add(STRATEGY_EXECUTION)))
}

// --- The run -----------------------------------------------------------

/// The boot seed of a warm-start run, from the run's seed ("bootseed").
pub const BOOT: u64 = 0x626f_6f74_7365_6564;
/// The seed of each dfs round, from the run's seed ("dfs").
pub const DFS_ROUND: u64 = 0x0064_6673;

// --- An execution's engine ----------------------------------------------

/// The order of events due together during a warm-start boot, from the
/// boot seed ("bootpick").
pub const BOOT_CHOICE: u64 = 0x626f_6f74_7069_636b;
/// netsim: latencies, loss, duplication, reordering.
pub const NETWORK: u64 = 0x6e65_7473_696d_0001;
/// The random partitions: when, how long, which shape.
pub const PARTITIONS: u64 = 0x6661_756c_7473_0002;
/// The host-side client's TCP stack (its initial sequence numbers).
pub const HOST_CLIENT: u64 = 0x686f_7374_636c_0003;
/// When crashes become possible, drawn when the faults begin ("crasht").
pub const CRASH_TIME: u64 = 0x6372_6173_6874;
/// Pauses: which node, when, how long ("pause").
pub const PAUSE: u64 = 0x0070_6175_7365;
/// Clock jumps and strobes ("clock").
pub const CLOCK: u64 = 0x0063_6c6f_636b;
/// Each node's clock offset at boot ("offset").
pub const CLOCK_OFFSET: u64 = 0x6f66_6673_6574;
/// Each node's clock drift ("drift").
pub const CLOCK_DRIFT: u64 = 0x0064_7269_6674;
/// `[faults.kill]`: when kills become possible, their restart delays ("kill").
pub const KILL: u64 = 0x0000_6b69_6c6c;
/// `[faults.crash] restart_after` as a range: each crash's restart delay
/// ("restart").
pub const RESTART_AFTER: u64 = 0x0072_6573_7461_7274;
/// `[faults.connection]`: when resets and stalls become possible, a
/// stall's direction and length ("connflt").
pub const CONNECTION: u64 = 0x0063_6f6e_6e66_6c74;
/// `[faults.disk] lost_flush` ("diskfaul").
pub const DISK_LOST_FLUSH: u64 = 0x6469_736b_6661_756c;
/// `[faults.disk] write_error` ("wrt_err").
pub const DISK_WRITE_ERROR: u64 = 0x0077_7274_5f65_7272;
/// `[faults.disk] misdirect` ("misdirr").
pub const DISK_MISDIRECT: u64 = 0x006d_6973_6469_7272;
/// The disk state a power loss leaves, XORed with the crash's number
/// shifted left by 40 ([`crash_state`]) ("disk").
pub const CRASH_STATE: u64 = 0x6469_736b;

// --- Devices (seeds, not generators: see engine::seeds) -----------------

/// Each node's entropy device (virtio-rng), per boot ("entropy").
pub const ENTROPY: u64 = 0x0065_6e74_726f_7079;
/// Each node's data disk's read faults, per boot ("rdfault").
pub const READ_FAULT: u64 = 0x0072_6466_6175_6c74;

// --- Strategies -----------------------------------------------------------

/// coverage's plans: fresh or from which corpus entry, where to cut
/// ("coverage").
pub const COVERAGE_PLAN: u64 = 0x636f_7665_7261_6765;
/// dfs's (hybrid's) prefix length of each round ("dfs\0").
pub const DFS_PREFIX: u64 = 0x6466_7300;
/// A seeded strategy's generator of one execution, added to the
/// execution's index before mixing.
pub const STRATEGY_EXECUTION: u64 = 0x5157;
/// The random walks of a critical-transition search ("crit").
pub const CRITICAL_WALK: u64 = 0x6372_6974;

/// Every constant above, for the distinctness test.
pub const ALL: [u64; 24] = [
    BOOT,
    DFS_ROUND,
    BOOT_CHOICE,
    NETWORK,
    PARTITIONS,
    HOST_CLIENT,
    CRASH_TIME,
    PAUSE,
    CLOCK,
    CLOCK_OFFSET,
    CLOCK_DRIFT,
    DISK_LOST_FLUSH,
    DISK_WRITE_ERROR,
    DISK_MISDIRECT,
    CRASH_STATE,
    ENTROPY,
    READ_FAULT,
    COVERAGE_PLAN,
    DFS_PREFIX,
    STRATEGY_EXECUTION,
    CRITICAL_WALK,
    CONNECTION,
    KILL,
    RESTART_AFTER,
];

/// The generator of the disk state crash number `crash` (1-based) leaves.
pub fn crash_state(seed: u64, crash: u32) -> Rng {
    stream(seed, CRASH_STATE ^ (u64::from(crash) << 40))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stream_constant_is_distinct() {
        let mut seen = std::collections::BTreeSet::new();
        for c in ALL {
            assert!(seen.insert(c), "{c:#x} is used twice");
        }
    }
}
