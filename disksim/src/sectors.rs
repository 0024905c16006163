//! Sector sets: which sectors of a write reach the platter in a crash state.

use serde::{Deserialize, Serialize};

/// A set of sectors *relative to the start of one write* (offset 0 is the write's
/// first sector).
///
/// Invariant of canonical values (those disksim produces): `Ranges` holds sorted,
/// non-empty, non-overlapping, non-adjacent half-open ranges `[start, end)` and is
/// never the whole write (that is `All`) nor empty (an unpersisted write is simply
/// absent from the crash state). [`SectorSet::from_offsets`] builds canonical
/// values.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SectorSet {
    /// Every sector of the write.
    All,
    /// Only these sector ranges of the write: a torn write.
    Ranges(Vec<(u32, u32)>),
}

impl SectorSet {
    /// The canonical set of the given sorted, distinct offsets of a write of
    /// `len` sectors.
    pub fn from_offsets(offsets: &[u32], len: u32) -> Self {
        if offsets.len() as u32 == len {
            return SectorSet::All;
        }
        let mut ranges: Vec<(u32, u32)> = Vec::new();
        for &o in offsets {
            match ranges.last_mut() {
                Some(r) if r.1 == o => r.1 = o + 1,
                _ => ranges.push((o, o + 1)),
            }
        }
        SectorSet::Ranges(ranges)
    }

    /// Calls `f(start, end)` for each range, given the write's length in sectors.
    pub fn for_each_range(&self, len: u32, mut f: impl FnMut(u32, u32)) {
        match self {
            SectorSet::All => f(0, len),
            SectorSet::Ranges(rs) => rs.iter().for_each(|&(s, e)| f(s, e)),
        }
    }

    /// Whether every range lies inside a write of `len` sectors and is
    /// well-formed (non-empty, sorted, disjoint).
    pub fn is_valid_for(&self, len: u32) -> bool {
        match self {
            SectorSet::All => true,
            SectorSet::Ranges(rs) => {
                let mut prev_end = 0u32;
                for (i, &(s, e)) in rs.iter().enumerate() {
                    if s >= e || e > len || (i > 0 && s < prev_end) {
                        return false;
                    }
                    prev_end = e;
                }
                true
            }
        }
    }
}

/// A set of absolute sectors as sorted, disjoint, non-adjacent half-open ranges.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Ranges(pub Vec<(u64, u64)>);

impl Ranges {
    /// Adds `[s, e)`.
    pub fn insert(&mut self, s: u64, e: u64) {
        if s >= e {
            return;
        }
        let (mut ns, mut ne) = (s, e);
        let mut out = Vec::with_capacity(self.0.len() + 1);
        let mut placed = false;
        for &(a, b) in &self.0 {
            if b < ns {
                out.push((a, b));
            } else if a > ne {
                if !placed {
                    out.push((ns, ne));
                    placed = true;
                }
                out.push((a, b));
            } else {
                ns = ns.min(a);
                ne = ne.max(b);
            }
        }
        if !placed {
            out.push((ns, ne));
        }
        self.0 = out;
    }

    /// `[s, e)` minus this set, as ranges.
    pub fn subtract_from(&self, s: u64, e: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut cur = s;
        for &(a, b) in &self.0 {
            if b <= cur {
                continue;
            }
            if a >= e {
                break;
            }
            if a > cur {
                out.push((cur, a));
            }
            cur = cur.max(b);
            if cur >= e {
                break;
            }
        }
        if cur < e {
            out.push((cur, e));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_insert_merges_and_subtract() {
        let mut r = Ranges::default();
        r.insert(10, 20);
        r.insert(30, 40);
        r.insert(20, 25); // adjacent: merges
        assert_eq!(r.0, vec![(10, 25), (30, 40)]);
        assert_eq!(r.subtract_from(0, 50), vec![(0, 10), (25, 30), (40, 50)]);
        assert_eq!(r.subtract_from(12, 24), vec![]);
        r.insert(5, 35);
        assert_eq!(r.0, vec![(5, 40)]);
    }

    #[test]
    fn sector_set_canonical() {
        assert_eq!(SectorSet::from_offsets(&[0, 1, 2, 3], 4), SectorSet::All);
        assert_eq!(SectorSet::from_offsets(&[0, 1, 3], 4), SectorSet::Ranges(vec![(0, 2), (3, 4)]));
        assert!(SectorSet::Ranges(vec![(0, 2), (3, 4)]).is_valid_for(4));
        assert!(!SectorSet::Ranges(vec![(0, 2), (1, 4)]).is_valid_for(4));
        assert!(!SectorSet::Ranges(vec![(3, 5)]).is_valid_for(4));
    }
}
