//! simcluster's randomness in one place.
//!
//! Everything a guest sees, and every choice the engine makes, is drawn
//! from the seed of the run. Three things make that reproducible on every
//! host, and live here:
//!
//! - [`streams`]: every stream of an execution and its constant. A stream
//!   is a Xoshiro256++ generator seeded with `seed ^ STREAM`, so that each
//!   concern (latency, partitions, crashes, pauses, disk faults, ...) draws
//!   from its own sequence, and turning one concern on or off moves no
//!   other's draws. A new stream gets a constant here, never a literal at
//!   its use.
//! - [`mix`]: SplitMix64, the bijective mixer that derives seeds from seeds
//!   (an execution's from the run's, a device's from the execution's).
//! - [`draw`]: draws from a generator with integer and IEEE-754 `+ - * /`
//!   arithmetic only (no `libm`), each consuming a fixed number of words,
//!   so the same seed gives the same values on every host and toolchain.
//!
//! Invariant: nothing here reads host time, host randomness or anything of
//! the host; changing a constant or a formula changes every trace hash.

#![deny(missing_docs)]

pub mod draw;
pub mod mix;
pub mod streams;

pub use draw::{below, bernoulli, between, portable_ln, shifted_exponential, uniform_inclusive, unit_f64};
pub use mix::{finalise, splitmix64};
pub use streams::{seeded, stream, Rng};
