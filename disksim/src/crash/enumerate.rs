//! Systematic enumeration of crash states, lazily, each state once.

use super::analysis::{Analysis, Bits};
use super::{CrashModel, CrashState};

/// Iterator over every crash state of a log (see [`crate::Disk::crash_states`]).
///
/// Atomic model: an odometer over the live writes from the latest-issued to the
/// earliest, where a write may be switched on only if the later writes already
/// on leave one of its atoms uncovered; only canonical sets are visited, so
/// there is no filtering and no duplicate. Torn model: a mixed-radix odometer
/// with one digit per live sector (radix 1 + the writes covering it).
/// The first state is always [`CrashState::none`].
#[derive(Clone, Debug)]
pub struct CrashStates {
    a: Analysis,
    inner: Inner,
}

#[derive(Clone, Debug)]
enum Inner {
    Atomic {
        /// `on[i]` for position `i` (write `n-1-i`), and `prefix[i]`: the atoms
        /// covered by positions `0..i` that are on.
        on: Vec<bool>,
        prefix: Vec<Bits>,
        started: bool,
    },
    Torn {
        digits: Vec<u32>,
        radix: Vec<u32>,
        started: bool,
    },
    Done,
}

impl CrashStates {
    pub(crate) fn new(a: Analysis, model: CrashModel) -> Self {
        let inner = if model.torn_writes {
            let radix: Vec<u32> = a.sector_candidates().map(|k| k + 1).collect();
            Inner::Torn { digits: vec![0; radix.len()], radix, started: false }
        } else {
            let n = a.writes.len();
            Inner::Atomic { on: vec![false; n], prefix: vec![Bits::new(a.atoms.len()); n + 1], started: false }
        };
        CrashStates { a, inner }
    }
}

impl Iterator for CrashStates {
    type Item = CrashState;

    fn next(&mut self) -> Option<CrashState> {
        let n = self.a.writes.len();
        match &mut self.inner {
            Inner::Done => None,
            Inner::Atomic { on, prefix, started } => {
                if *started {
                    let Some(i) =
                        (0..n).rev().find(|&i| !on[i] && self.a.writes[n - 1 - i].cover.has_outside(&prefix[i]))
                    else {
                        self.inner = Inner::Done;
                        return None;
                    };
                    on[i] = true;
                    let mut p = prefix[i].clone();
                    p.or_assign(&self.a.writes[n - 1 - i].cover);
                    for j in i + 1..n {
                        on[j] = false;
                        prefix[j] = p.clone();
                    }
                    prefix[n] = p;
                }
                *started = true;
                let chosen: Vec<bool> = (0..n).map(|w| on[n - 1 - w]).collect();
                Some(self.a.atomic_state(&chosen))
            }
            Inner::Torn { digits, radix, started } => {
                if *started {
                    let mut i = digits.len();
                    loop {
                        if i == 0 {
                            self.inner = Inner::Done;
                            return None;
                        }
                        i -= 1;
                        digits[i] += 1;
                        if digits[i] < radix[i] {
                            break;
                        }
                        digits[i] = 0;
                    }
                }
                *started = true;
                Some(self.a.torn_state(digits))
            }
        }
    }
}
