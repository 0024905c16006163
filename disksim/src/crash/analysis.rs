//! Analysis of a write log for crash-state purposes: which volatile writes are
//! live, their effective sectors, and the *atoms* (maximal sector ranges covered
//! by the same set of live writes).

use crate::disk::{Disk, RequestId, WriteState};
use crate::sectors::{Ranges, SectorSet};

use super::{CrashState, Persist, StateCount};

/// A fixed-size bitset over atoms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Bits(Vec<u64>);

impl Bits {
    pub fn new(n: usize) -> Self {
        Bits(vec![0; n.div_ceil(64)])
    }
    pub fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
    pub fn or_assign(&mut self, o: &Bits) {
        self.0.iter_mut().zip(&o.0).for_each(|(a, b)| *a |= b);
    }
    /// Whether `self` has a bit that `covered` lacks.
    pub fn has_outside(&self, covered: &Bits) -> bool {
        self.0.iter().zip(&covered.0).any(|(a, b)| a & !b != 0)
    }
}

/// A volatile write that can still show through on some sector.
#[derive(Clone, Debug)]
pub(crate) struct LiveWrite {
    pub id: RequestId,
    pub sector: u64,
    pub len: u32,
    /// Atoms this write covers with its effective sectors (never empty).
    pub cover: Bits,
}

/// Invariants: `writes` is in issue order; `atoms` are sorted, disjoint, each
/// covered by at least one live write; `atom_writers[a]` lists (in issue order)
/// the indices into `writes` of the writes covering atom `a`.
#[derive(Clone, Debug)]
pub(crate) struct Analysis {
    pub writes: Vec<LiveWrite>,
    pub atoms: Vec<(u64, u64)>,
    pub atom_writers: Vec<Vec<u32>>,
}

impl Analysis {
    pub fn new(disk: &Disk) -> Self {
        // Effective sectors: a write's sectors minus those of later durable writes.
        let mut durable_after = Ranges::default();
        // (id, first sector, sectors, effective ranges)
        type Live = (RequestId, u64, u32, Vec<(u64, u64)>);
        let mut live: Vec<Live> = Vec::new();
        for w in disk.log.iter().rev() {
            if w.state == WriteState::Durable {
                durable_after.insert(w.sector, w.end());
            } else {
                let eff = durable_after.subtract_from(w.sector, w.end());
                if !eff.is_empty() {
                    live.push((w.id, w.sector, w.sectors() as u32, eff));
                }
            }
        }
        live.reverse();

        let mut bounds: Vec<u64> = live.iter().flat_map(|l| l.3.iter().flat_map(|&(s, e)| [s, e])).collect();
        bounds.sort_unstable();
        bounds.dedup();
        // Candidate atoms are consecutive boundary pairs; keep those covered.
        let ncand = bounds.len().saturating_sub(1);
        let mut cand_writers: Vec<Vec<u32>> = vec![Vec::new(); ncand];
        for (i, l) in live.iter().enumerate() {
            for &(s, e) in &l.3 {
                let a = bounds.binary_search(&s).expect("s is a bound");
                let b = bounds.binary_search(&e).expect("e is a bound");
                for c in &mut cand_writers[a..b] {
                    c.push(i as u32);
                }
            }
        }
        let mut atoms = Vec::new();
        let mut atom_writers = Vec::new();
        for (c, ws) in cand_writers.into_iter().enumerate() {
            if !ws.is_empty() {
                atoms.push((bounds[c], bounds[c + 1]));
                atom_writers.push(ws);
            }
        }
        let mut writes: Vec<LiveWrite> = live
            .into_iter()
            .map(|(id, sector, len, _)| LiveWrite { id, sector, len, cover: Bits::new(atoms.len()) })
            .collect();
        for (a, ws) in atom_writers.iter().enumerate() {
            for &w in ws {
                writes[w as usize].cover.set(a);
            }
        }
        Analysis { writes, atoms, atom_writers }
    }

    /// For each live sector, in ascending order, how many writes may supply it.
    pub fn sector_candidates(&self) -> impl Iterator<Item = u32> + '_ {
        self.atoms
            .iter()
            .zip(&self.atom_writers)
            .flat_map(|(&(s, e), ws)| std::iter::repeat(ws.len() as u32).take((e - s) as usize))
    }

    /// Torn model: the product over live sectors of (1 + candidate writes).
    pub fn count_torn(&self) -> StateCount {
        let mut n: u128 = 1;
        for (&(s, e), ws) in self.atoms.iter().zip(&self.atom_writers) {
            let base = ws.len() as u128 + 1;
            for _ in s..e {
                match n.checked_mul(base) {
                    Some(m) => n = m,
                    None => return StateCount::AtLeast(u128::MAX),
                }
            }
        }
        StateCount::Exact(n)
    }

    /// Atomic model: the number of canonical subsets, the product over
    /// components of writes linked by shared atoms. Each component is counted by
    /// a depth-first search bounded by `budget` nodes in all; past it the result
    /// is a lower bound.
    pub fn count_atomic(&self, mut budget: u64) -> StateCount {
        let n = self.writes.len();
        let mut parent: Vec<usize> = (0..n).collect();
        fn find(p: &mut [usize], mut x: usize) -> usize {
            while p[x] != x {
                p[x] = p[p[x]];
                x = p[x];
            }
            x
        }
        for ws in &self.atom_writers {
            let r0 = find(&mut parent, ws[0] as usize);
            for &w in &ws[1..] {
                let r = find(&mut parent, w as usize);
                parent[r] = r0;
            }
        }
        let mut comps: std::collections::BTreeMap<usize, Vec<usize>> = std::collections::BTreeMap::new();
        for i in 0..n {
            let r = find(&mut parent, i);
            comps.entry(r).or_default().push(i);
        }
        let mut total: u128 = 1;
        let mut exact = true;
        for comp in comps.values() {
            let c = if comp.len() == 1 {
                2
            } else {
                let mut covered = Bits::new(self.atoms.len());
                // Latest-issued first: a write can join only if later chosen
                // writes leave one of its atoms uncovered.
                let order: Vec<usize> = comp.iter().rev().copied().collect();
                let (c, ok) = self.count_dfs(&order, &mut covered, &mut budget);
                exact &= ok;
                c
            };
            total = match total.checked_mul(c) {
                Some(t) => t,
                None => return StateCount::AtLeast(u128::MAX),
            };
        }
        if exact {
            StateCount::Exact(total)
        } else {
            StateCount::AtLeast(total)
        }
    }

    /// Counts canonical subsets of `order` given `covered`; returns the count (a
    /// lower bound when the budget runs out) and whether it is exact.
    fn count_dfs(&self, order: &[usize], covered: &mut Bits, budget: &mut u64) -> (u128, bool) {
        let Some((&w, rest)) = order.split_first() else {
            return (1, true);
        };
        if *budget == 0 {
            return (1, false);
        }
        *budget -= 1;
        let (mut n, mut ok) = self.count_dfs(rest, covered, budget);
        if self.writes[w].cover.has_outside(covered) {
            let saved = covered.clone();
            covered.or_assign(&self.writes[w].cover);
            let (m, ok2) = self.count_dfs(rest, covered, budget);
            *covered = saved;
            n = n.saturating_add(m);
            ok &= ok2;
        }
        (n, ok)
    }

    /// The atomic-model state persisting the writes with `chosen[i]`.
    pub fn atomic_state(&self, chosen: &[bool]) -> CrashState {
        CrashState {
            persisted: self
                .writes
                .iter()
                .zip(chosen)
                .filter(|(_, &c)| c)
                .map(|(w, _)| Persist { write: w.id, sectors: SectorSet::All })
                .collect(),
        }
    }

    /// The torn-model state where live sector `i` (in ascending order) holds
    /// the data of candidate `digits[i]` (0: durable data; `j`: the `j`-th
    /// write covering it in issue order).
    pub fn torn_state(&self, digits: &[u32]) -> CrashState {
        let mut offsets: Vec<Vec<u32>> = vec![Vec::new(); self.writes.len()];
        let mut d = digits.iter();
        for (&(s, e), ws) in self.atoms.iter().zip(&self.atom_writers) {
            for sector in s..e {
                let j = *d.next().expect("one digit per live sector");
                if j > 0 {
                    let wi = ws[j as usize - 1] as usize;
                    offsets[wi].push((sector - self.writes[wi].sector) as u32);
                }
            }
        }
        CrashState {
            persisted: self
                .writes
                .iter()
                .zip(offsets)
                .filter(|(_, o)| !o.is_empty())
                .map(|(w, o)| Persist { write: w.id, sectors: SectorSet::from_offsets(&o, w.len) })
                .collect(),
        }
    }
}
