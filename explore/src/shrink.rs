//! Shrinking a failing action list: Zeller & Hildebrandt's ddmin, preceded by
//! a cheap pass that cuts actions off the end.
//!
//! The oracle `still_fails(actions)` replays a candidate list and says whether
//! the failure still shows. It is called on sublists that keep the original
//! relative order. Results are cached by the set of kept indices, so the
//! oracle is never asked the same question twice; [`ShrinkStats::oracle_calls`]
//! counts real calls.
//!
//! Guarantee: the returned list still fails (the oracle said so), and it is
//! 1-minimal: removing any single action makes the oracle say it passes (or
//! the list is empty). The oracle should be deterministic; if it is not, the
//! result is still a list the oracle reported failing, but minimality is only
//! relative to the answers given.

/// The oracle's memo is only looked up, never iterated, so its order cannot
/// leak (clippy.toml's determinism guard).
#[allow(clippy::disallowed_types)]
type LookupMap<K, V> = std::collections::HashMap<K, V>;

/// Counters for one shrink.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShrinkStats {
    /// Real oracle invocations (cache hits excluded).
    pub oracle_calls: u64,
    /// Oracle answers served from the cache.
    pub cache_hits: u64,
    /// Length of the list given to shrink.
    pub initial_len: usize,
    /// Length after the tail-cutting pass.
    pub after_tail_len: usize,
    /// Length of the list returned.
    pub final_len: usize,
}

/// Why a list could not be shrunk.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ShrinkError {
    /// The oracle says the whole list does not fail; carries its length.
    #[error("the oracle says the unshrunk list of {0} actions does not fail; nothing to shrink")]
    InputPasses(usize),
}

/// Runs the tail pass then ddmin. Returns the 1-minimal failing list.
pub fn shrink<A: Clone>(
    actions: &[A],
    still_fails: impl FnMut(&[A]) -> bool,
) -> Result<(Vec<A>, ShrinkStats), ShrinkError> {
    let mut o = Oracle::new(actions, still_fails);
    if !o.test(&(0..actions.len()).collect::<Vec<_>>()) {
        return Err(ShrinkError::InputPasses(actions.len()));
    }
    let kept = trim_tail_indices(&mut o, actions.len());
    let after_tail_len = kept.len();
    let kept = ddmin_indices(&mut o, kept);
    let stats = ShrinkStats {
        oracle_calls: o.calls,
        cache_hits: o.hits,
        initial_len: actions.len(),
        after_tail_len,
        final_len: kept.len(),
    };
    Ok((kept.iter().map(|&i| actions[i].clone()).collect(), stats))
}

/// [`shrink`], trying the `core` actions alone first.
///
/// Why: a failure found by a random walk carries thousands of scheduling
/// decisions and a handful of faults, and it usually needs only the
/// faults. ddmin halves its list at each step, so it would spend its
/// budget on halves that drop a needed fault; one call on the core
/// instead removes every other action at once. When the core alone still
/// fails, the tail pass and ddmin run on it; otherwise the plain
/// [`shrink`] runs on the whole list.
pub fn shrink_core_first<A: Clone>(
    actions: &[A],
    core: impl Fn(&A) -> bool,
    still_fails: impl FnMut(&[A]) -> bool,
) -> Result<(Vec<A>, ShrinkStats), ShrinkError> {
    let mut o = Oracle::new(actions, still_fails);
    let all: Vec<usize> = (0..actions.len()).collect();
    if !o.test(&all) {
        return Err(ShrinkError::InputPasses(actions.len()));
    }
    let core: Vec<usize> = all.iter().copied().filter(|&i| core(&actions[i])).collect();
    let start = if core.len() < all.len() && o.test(&core) { core } else { all };
    let kept = trim_tail_of(&mut o, start);
    let after_tail_len = kept.len();
    let kept = ddmin_indices(&mut o, kept);
    let stats = ShrinkStats {
        oracle_calls: o.calls,
        cache_hits: o.hits,
        initial_len: actions.len(),
        after_tail_len,
        final_len: kept.len(),
    };
    Ok((kept.iter().map(|&i| actions[i].clone()).collect(), stats))
}

/// ddmin alone (no tail pass).
pub fn ddmin<A: Clone>(
    actions: &[A],
    still_fails: impl FnMut(&[A]) -> bool,
) -> Result<(Vec<A>, ShrinkStats), ShrinkError> {
    let mut o = Oracle::new(actions, still_fails);
    let all: Vec<usize> = (0..actions.len()).collect();
    if !o.test(&all) {
        return Err(ShrinkError::InputPasses(actions.len()));
    }
    let kept = ddmin_indices(&mut o, all);
    let stats = ShrinkStats {
        oracle_calls: o.calls,
        cache_hits: o.hits,
        initial_len: actions.len(),
        after_tail_len: actions.len(),
        final_len: kept.len(),
    };
    Ok((kept.iter().map(|&i| actions[i].clone()).collect(), stats))
}

/// The tail pass alone: the shortest failing prefix reachable by cutting from
/// the end, galloping (cut 1, 2, 4, ... while it still fails, halving the cut
/// when it stops failing) so a long irrelevant tail costs O(log n) calls.
/// Ends when cutting one more action makes it pass.
pub fn trim_tail<A: Clone>(
    actions: &[A],
    still_fails: impl FnMut(&[A]) -> bool,
) -> Result<(Vec<A>, ShrinkStats), ShrinkError> {
    let mut o = Oracle::new(actions, still_fails);
    if !o.test(&(0..actions.len()).collect::<Vec<_>>()) {
        return Err(ShrinkError::InputPasses(actions.len()));
    }
    let kept = trim_tail_indices(&mut o, actions.len());
    let stats = ShrinkStats {
        oracle_calls: o.calls,
        cache_hits: o.hits,
        initial_len: actions.len(),
        after_tail_len: kept.len(),
        final_len: kept.len(),
    };
    Ok((kept.iter().map(|&i| actions[i].clone()).collect(), stats))
}

struct Oracle<'a, A, F> {
    actions: &'a [A],
    f: F,
    cache: LookupMap<Vec<usize>, bool>,
    calls: u64,
    hits: u64,
    buf: Vec<A>,
}

impl<'a, A: Clone, F: FnMut(&[A]) -> bool> Oracle<'a, A, F> {
    fn new(actions: &'a [A], f: F) -> Self {
        Oracle { actions, f, cache: LookupMap::new(), calls: 0, hits: 0, buf: Vec::new() }
    }

    /// `kept`: strictly increasing indices into the original list.
    fn test(&mut self, kept: &[usize]) -> bool {
        if let Some(&r) = self.cache.get(kept) {
            self.hits += 1;
            return r;
        }
        self.buf.clear();
        self.buf.extend(kept.iter().map(|&i| self.actions[i].clone()));
        self.calls += 1;
        let r = (self.f)(&self.buf);
        self.cache.insert(kept.to_vec(), r);
        r
    }
}

fn trim_tail_indices<A: Clone, F: FnMut(&[A]) -> bool>(o: &mut Oracle<'_, A, F>, n: usize) -> Vec<usize> {
    trim_tail_of(o, (0..n).collect())
}

/// The tail pass over a failing index list `kept`: its shortest failing
/// prefix reachable by galloping cuts from the end.
fn trim_tail_of<A: Clone, F: FnMut(&[A]) -> bool>(o: &mut Oracle<'_, A, F>, mut kept: Vec<usize>) -> Vec<usize> {
    let mut cut = 1usize;
    while cut >= 1 {
        if cut <= kept.len() && o.test(&kept[..kept.len() - cut]) {
            kept.truncate(kept.len() - cut);
            cut *= 2;
        } else {
            cut /= 2;
        }
    }
    kept
}

/// Zeller's ddmin over index lists. Invariant: `c` fails.
fn ddmin_indices<A: Clone, F: FnMut(&[A]) -> bool>(o: &mut Oracle<'_, A, F>, mut c: Vec<usize>) -> Vec<usize> {
    let mut n = 2usize;
    while c.len() >= 2 {
        let chunks = split(&c, n);
        // Reduce to a subset.
        if let Some(sub) = chunks.iter().find(|d| o.test(d)) {
            c = sub.clone();
            n = 2;
            continue;
        }
        // Reduce to a complement (with n == 2 the complements are the subsets).
        let mut reduced = false;
        if n > 2 {
            for i in 0..chunks.len() {
                let comp: Vec<usize> =
                    chunks.iter().enumerate().filter(|&(j, _)| j != i).flat_map(|(_, d)| d.iter().copied()).collect();
                if o.test(&comp) {
                    c = comp;
                    n = (n - 1).max(2);
                    reduced = true;
                    break;
                }
            }
        }
        if reduced {
            continue;
        }
        if n >= c.len() {
            break; // every single-element complement passes: 1-minimal
        }
        n = (2 * n).min(c.len());
    }
    if c.len() == 1 && o.test(&[]) {
        c.clear();
    }
    c
}

/// Splits into `n` contiguous chunks of near-equal size (first ones larger).
fn split(c: &[usize], n: usize) -> Vec<Vec<usize>> {
    let n = n.min(c.len());
    let (q, r) = (c.len() / n, c.len() % n);
    let mut out = Vec::with_capacity(n);
    let mut at = 0;
    for i in 0..n {
        let len = q + usize::from(i < r);
        out.push(c[at..at + len].to_vec());
        at += len;
    }
    out
}

#[cfg(test)]
mod tests {

    #[test]
    fn core_first_drops_everything_but_the_needed_core_in_few_calls() {
        // 1000 scheduling actions (even) and four faults (odd, below 100):
        // the failure needs faults 3 and 7 only.
        let actions: Vec<u32> = (0..1000).map(|i| if i < 8 { i } else { i * 2 }).collect();
        let fails = |c: &[u32]| c.contains(&3) && c.contains(&7);
        let (kept, stats) = shrink_core_first(&actions, |a| a % 2 == 1, fails).unwrap();
        assert_eq!(kept, vec![3, 7]);
        assert!(stats.oracle_calls < 12, "{stats:?}");
        // The plain shrink needs far more calls for the same answer.
        let (plain, plain_stats) = shrink(&actions, fails).unwrap();
        assert_eq!(plain, vec![3, 7]);
        assert!(plain_stats.oracle_calls > stats.oracle_calls, "{plain_stats:?} vs {stats:?}");
    }

    #[test]
    fn core_first_falls_back_when_the_core_alone_passes() {
        let actions: Vec<u32> = (0..64).collect();
        // Needs an even action too: the odd core alone passes.
        let fails = |c: &[u32]| c.contains(&3) && c.contains(&40);
        let (kept, _) = shrink_core_first(&actions, |a| a % 2 == 1, fails).unwrap();
        assert_eq!(kept, vec![3, 40]);
    }
    use super::*;

    /// Fails iff `a` occurs before `b` (not necessarily adjacent).
    fn in_order(a: u32, b: u32) -> impl FnMut(&[u32]) -> bool {
        move |xs: &[u32]| {
            let pa = xs.iter().position(|&x| x == a);
            let pb = xs.iter().rposition(|&x| x == b);
            matches!((pa, pb), (Some(i), Some(j)) if i < j)
        }
    }

    fn assert_one_minimal(result: &[u32], mut oracle: impl FnMut(&[u32]) -> bool) {
        assert!(oracle(result), "result must still fail");
        for i in 0..result.len() {
            let mut r = result.to_vec();
            r.remove(i);
            assert!(!oracle(&r), "removing {} from {result:?} still fails: not 1-minimal", result[i]);
        }
    }

    #[test]
    fn finds_3_before_7() {
        let input: Vec<u32> = (0..20).collect();
        let (out, stats) = shrink(&input, in_order(3, 7)).unwrap();
        assert_eq!(out, vec![3, 7]);
        assert!(out.len() < input.len());
        assert_eq!(stats.initial_len, 20);
        assert_eq!(stats.after_tail_len, 8, "tail pass cuts 8..20");
        assert_eq!(stats.final_len, 2);
        assert!(stats.oracle_calls > 0 && stats.oracle_calls < 60, "{stats:?}");
        assert_one_minimal(&out, in_order(3, 7));
    }

    #[test]
    fn order_matters() {
        // 7 appears before 3 too, but only the 3..7 pair fails.
        let input = vec![7, 1, 2, 3, 4, 5, 6, 7, 8, 9];
        let (out, _) = shrink(&input, in_order(3, 7)).unwrap();
        assert_eq!(out, vec![3, 7]);
    }

    #[test]
    fn ddmin_alone_is_one_minimal_on_a_set_oracle() {
        // Fails iff the sum of kept items is at least 30: many 1-minimal answers.
        let input: Vec<u32> = (1..=12).collect();
        let oracle = |xs: &[u32]| xs.iter().sum::<u32>() >= 30;
        let (out, stats) = ddmin(&input, oracle).unwrap();
        assert!(out.len() < input.len());
        assert_one_minimal(&out, oracle);
        assert_eq!(stats.after_tail_len, 12);
    }

    #[test]
    fn three_scattered_actions() {
        let input: Vec<u32> = (0..100).collect();
        let oracle = |xs: &[u32]| [5, 50, 95].iter().all(|v| xs.contains(v));
        let (out, stats) = shrink(&input, oracle).unwrap();
        assert_eq!(out, vec![5, 50, 95]);
        assert_one_minimal(&out, oracle);
        assert!(stats.oracle_calls < 200, "{stats:?}");
    }

    #[test]
    fn tail_pass_is_cheap_and_exact() {
        let input: Vec<u32> = (0..10_000).collect();
        let mut calls = 0;
        let (out, stats) = trim_tail(&input, |xs| {
            calls += 1;
            xs.contains(&1234)
        })
        .unwrap();
        assert_eq!(out.len(), 1235);
        assert_eq!(stats.oracle_calls, calls);
        assert!(calls < 40, "galloping should need O(log n) calls, used {calls}");
    }

    #[test]
    fn empty_list_when_failure_needs_no_action() {
        let (out, _) = shrink(&[1, 2, 3], |_| true).unwrap();
        assert!(out.is_empty());
    }

    #[test]
    fn single_needed_action() {
        let (out, _) = shrink(&[1, 2, 3, 4], |xs: &[i32]| xs.contains(&2)).unwrap();
        assert_eq!(out, vec![2]);
    }

    #[test]
    fn passing_input_is_an_error() {
        let err = shrink(&[1, 2, 3], |_| false).unwrap_err();
        assert_eq!(err, ShrinkError::InputPasses(3));
        assert!(err.to_string().contains("3 actions"));
    }

    #[test]
    fn oracle_never_asked_twice() {
        let mut seen = std::collections::BTreeSet::new();
        let input: Vec<u32> = (0..40).collect();
        let (_, stats) = shrink(&input, |xs: &[u32]| {
            assert!(seen.insert(xs.to_vec()), "asked twice about {xs:?}");
            xs.contains(&3) && xs.contains(&17) && xs.contains(&31)
        })
        .unwrap();
        assert_eq!(stats.oracle_calls as usize, seen.len());
    }
}
