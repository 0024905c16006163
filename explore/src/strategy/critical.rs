//! MaceMC's critical transition (Killian et al., NSDI 2007).
//!
//! A liveness failure is a long random walk that ends in a "dead" state: no
//! random walk from there reaches a live state any more. The critical
//! transition is the step that moved the system from a state from which live
//! states were still reachable to one from which they are not; it is usually
//! where the bug is, far before the end of the walk.
//!
//! `live_from(n)` replays the first `n` transitions of the path and answers
//! whether random walks from there still reach a live state. Search:
//! exponential (n = 1, 2, 4, ...) until a dead prefix, then binary search
//! between the last live and first dead prefix. Cost: about 2 log2(c) probes
//! for a critical transition at index c. The probe is probabilistic in
//! practice; the answer is always a boundary the probe itself reported
//! (prefix `index` live, prefix `index + 1` dead).

/// The result: step `index` of the path is the critical transition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CriticalTransition {
    /// 0-based index of the transition in the path: the prefix of `index`
    /// transitions is live, the prefix of `index + 1` is dead.
    pub index: usize,
    /// How many times the probe was called.
    pub probes: u64,
}

/// Why the path has no critical transition.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CriticalError {
    /// The probe says the empty prefix is already dead.
    #[error("the initial state is already dead: no live state is reachable even before the first transition")]
    InitialDead,
    /// The probe says the whole path is still live; carries its length
    /// (transitions).
    #[error("the end of the path (after {0} transitions) can still reach a live state: not a liveness failure")]
    EndLive(usize),
}

/// `steps`: the length of the path (the failing execution's step count;
/// only its length matters, so a folded step log serves as well as a list
/// of every step).
pub fn find_critical_transition(
    steps: usize,
    mut live_from: impl FnMut(usize) -> bool,
) -> Result<CriticalTransition, CriticalError> {
    let n = steps;
    let mut probes = 0u64;
    let mut probe = |k: usize| {
        probes += 1;
        live_from(k)
    };
    if !probe(0) {
        return Err(CriticalError::InitialDead);
    }
    // Exponential phase: lo is live, find a dead hi.
    let mut lo = 0usize;
    let mut step = 1usize;
    let hi = loop {
        let k = (lo + step).min(n);
        if k == lo {
            return Err(CriticalError::EndLive(n)); // n == 0, or lo == n was live
        }
        if !probe(k) {
            break k;
        }
        if k == n {
            return Err(CriticalError::EndLive(n));
        }
        lo = k;
        step *= 2;
    };
    // Binary phase: invariant live(lo), !live(hi).
    let mut hi = hi;
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if probe(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(CriticalTransition { index: lo, probes })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_boundary_everywhere() {
        let path = 1000;
        for c in [0usize, 1, 2, 3, 7, 100, 511, 512, 998, 999] {
            let mut calls = 0;
            let r = find_critical_transition(path, |k| {
                calls += 1;
                k <= c
            })
            .unwrap();
            assert_eq!(r.index, c, "critical at {c}");
            assert_eq!(r.probes, calls);
            let bound = 2 * (usize::BITS - (c + 1).leading_zeros()) as u64 + 2;
            assert!(r.probes <= bound, "c={c}: {} probes > {bound}", r.probes);
        }
    }

    #[test]
    fn early_critical_transition_is_cheap_on_a_long_path() {
        let r = find_critical_transition(1_000_000, |k| k <= 5).unwrap();
        assert_eq!(r.index, 5);
        assert!(r.probes <= 8, "{r:?}");
    }

    #[test]
    fn errors() {
        assert_eq!(find_critical_transition(3, |_| false), Err(CriticalError::InitialDead));
        assert_eq!(find_critical_transition(3, |_| true), Err(CriticalError::EndLive(3)));
        assert_eq!(find_critical_transition(0, |_| true), Err(CriticalError::EndLive(0)));
    }

    #[test]
    fn non_monotone_probe_still_gives_a_reported_boundary() {
        // Live at 0..=3, dead at 4, "live" again at 5..=9 (a lucky random
        // walk), dead from 10. Any boundary the probe reported is acceptable.
        let live = |k: usize| k <= 3 || (5..=9).contains(&k);
        let r = find_critical_transition(64, live).unwrap();
        assert!(live(r.index) && !live(r.index + 1), "{r:?}");
    }
}
