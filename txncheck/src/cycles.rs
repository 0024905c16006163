//! Finding and classifying dependency cycles, as Elle does.
//!
//! The graph is searched in three nested "universes" of edge kinds: data edges
//! only (ww, wr, rw); plus process edges; plus realtime edges. In each universe,
//! every strongly connected component of two or more transactions is searched
//! for up to four cycle shapes, each a cycle whose edges are, apart from the
//! universe's extra kinds (which count as ww):
//!
//! - G0: ww only;
//! - G1c: ww and wr, at least one wr;
//! - G-single (Elle's G-single-item): ww and wr plus exactly one rw (an rw edge
//!   A -> B with a ww/wr path B -> A);
//! - G-nonadjacent (Elle's G-nonadjacent-item): two or more rw, no two of them
//!   adjacent (the long fork snapshot isolation forbids);
//! - G2-item: two or more rw, two of them adjacent (write skew).
//!
//! A shape already found in a smaller universe inside the component is not
//! searched again, so a shape found in a larger universe needs one of its extra
//! edges: it is reported with the suffix of the extra kinds it uses
//! (`-realtime` if any realtime edge, else `-process`).
//!
//! Exactness: G0, G1c and G-single are found whenever they exist (the first two
//! by sub-components, the last by one BFS per rw edge, pruned by sub-component
//! order) unless the budget of a G-single search runs out, which is counted in
//! `truncated`. A component without a G-single is searched for a G-nonadjacent
//! by one search per rw seed over (node, last edge rw, rw seen) states, so one
//! is found whenever it exists, within the same budget as G0 and G1c. The
//! shortest cycles through rw seeds over every edge kind are classified by
//! their rw edges: two adjacent make G2-item, none adjacent G-nonadjacent, one
//! a G-single (found here only when the G-single search ran out of budget).
//! Counts are one per component per shape.
//! Among the cycles found for a shape, the shortest are kept.

use crate::graph::{Bfs, Exhausted, Graph, Tarjan, DATA, PROCESS, REALTIME, RW, WR, WW};
use crate::model::*;
use std::collections::BTreeMap;

/// Cycles kept per anomaly name (the count stays exact).
pub(crate) const MAX_REPORTED: usize = 8;
/// Seeds tried per shape and component, to pick a short cycle.
const TRIES: usize = 8;

const M_G0: u8 = 1;
const M_G1C: u8 = 2;
const M_SINGLE: u8 = 4;
const M_ANY_RW: u8 = 8;
const M_NONADJACENT: u8 = 16;

#[derive(Default)]
pub(crate) struct Found {
    pub count: usize,
    /// Edge indices of each cycle, in order; shortest first.
    pub cycles: Vec<Vec<usize>>,
}

#[derive(Default)]
pub(crate) struct CycleSearch {
    pub found: BTreeMap<&'static str, Found>,
    /// Components where the G-single search ran out of budget: a G-single may
    /// have been missed there.
    pub truncated: usize,
}

#[derive(Clone, Copy)]
enum Shape {
    G0,
    G1c,
    Single,
    Nonadjacent,
    G2,
}

pub(crate) fn search(g: &Graph) -> CycleSearch {
    let n = g.nodes();
    let all: Vec<u32> = (0..n as u32).collect();
    let mut s = Searcher { g, tarjan: Tarjan::new(n), bfs: Bfs::new(n), out: CycleSearch::default() };
    let mut marks = vec![0u8; n];
    let mut ucomp = vec![u32::MAX; n];
    for (mask, extra) in [(DATA, 0), (DATA | PROCESS, PROCESS), (DATA | PROCESS | REALTIME, PROCESS | REALTIME)] {
        let comps = s.tarjan.run(g, &all, mask, |_| true);
        for (ci, c) in comps.iter().enumerate() {
            c.iter().for_each(|&v| ucomp[v as usize] = ci as u32);
        }
        for (ci, c) in comps.iter().enumerate() {
            let skip = c.iter().fold(0, |acc, &v| acc | marks[v as usize]);
            let ucomp = &ucomp;
            let bits = s.component(c, mask, extra, skip, move |v| ucomp[v as usize] == ci as u32);
            c.iter().for_each(|&v| marks[v as usize] |= bits);
        }
        comps.iter().flatten().for_each(|&v| ucomp[v as usize] = u32::MAX);
    }
    s.out
}

struct Searcher<'g> {
    g: &'g Graph,
    tarjan: Tarjan,
    bfs: Bfs,
    out: CycleSearch,
}

impl Searcher<'_> {
    /// Searches one component `c` of the universe `mask`; returns the shapes found.
    fn component<S: Fn(u32) -> bool + Copy>(&mut self, c: &[u32], mask: u8, extra: u8, skip: u8, scope: S) -> u8 {
        let g = self.g;
        let size: u64 = c.iter().map(|&v| g.out(v).len() as u64).sum();
        let ww_like = WW | extra;
        let mut bits = 0;
        // Edges of kind `kinds` inside the component, as indices.
        let seeds = |kinds: u8| -> Vec<usize> {
            c.iter().flat_map(|&v| g.range(v)).filter(|&i| g.edge(i).kind & kinds != 0 && scope(g.edge(i).to)).collect()
        };

        if skip & M_G0 == 0 && !self.tarjan.run(g, c, ww_like, scope).is_empty() {
            let t = &self.tarjan;
            let inside: Vec<usize> =
                seeds(ww_like).into_iter().filter(|&i| t.comp_of(g.edge(i).from) == t.comp_of(g.edge(i).to)).collect();
            if self.shortest(&inside, ww_like, Shape::G0, scope, size) {
                bits |= M_G0;
            }
        }
        let no_rw = ww_like | WR;
        let subs = self.tarjan.run(g, c, no_rw, scope);
        if skip & M_G1C == 0 && !subs.is_empty() {
            let t = &self.tarjan;
            let inside: Vec<usize> =
                seeds(WR).into_iter().filter(|&i| t.comp_of(g.edge(i).from) == t.comp_of(g.edge(i).to)).collect();
            if self.shortest(&inside, no_rw, Shape::G1c, scope, size) {
                bits |= M_G1C;
            }
        }
        let rw_seeds = seeds(RW);
        if skip & M_SINGLE == 0 && !rw_seeds.is_empty() {
            // With the tarjan run on ww/wr/extra still current: an rw edge A -> B
            // closes a cycle iff B reaches A, certain when they share a
            // sub-component, impossible when B's comes earlier in topological order.
            let t = &self.tarjan;
            let (a_of, b_of) = (|i: usize| t.comp_of(g.edge(i).from), |i: usize| t.comp_of(g.edge(i).to));
            let sure: Vec<usize> = rw_seeds.iter().copied().filter(|&i| a_of(i) == b_of(i)).collect();
            let maybe: Vec<(usize, u32)> =
                rw_seeds.iter().copied().filter(|&i| b_of(i) > a_of(i)).map(|i| (i, a_of(i))).collect();
            if self.shortest(&sure, no_rw, Shape::Single, scope, size) || self.single_maybe(&maybe, no_rw, scope, size)
            {
                bits |= M_SINGLE;
            }
        }
        if skip & M_ANY_RW == 0 && !rw_seeds.is_empty() {
            bits |= M_ANY_RW | self.any_rw(&rw_seeds, mask, bits & M_SINGLE != 0, scope, size);
        }
        // A G-single already rules out every model a G-nonadjacent does.
        if (skip | bits) & (M_SINGLE | M_NONADJACENT) == 0
            && !rw_seeds.is_empty()
            && self.shortest(&rw_seeds, mask, Shape::Nonadjacent, scope, size)
        {
            bits |= M_NONADJACENT;
        }
        bits
    }

    /// Tries up to [`TRIES`] seed edges A -> B, each closed by a shortest path
    /// B -> A over `mask` (for [`Shape::Nonadjacent`], rw edges in it, none
    /// next to another or to the seed: [`Bfs::nonadjacent_path`]); records the
    /// shortest cycle. The budget allows that many full searches of the
    /// component (of its four states per node for a G-nonadjacent), so a seed
    /// known to lie on a cycle is always closed.
    fn shortest<S: Fn(u32) -> bool + Copy>(
        &mut self,
        seeds: &[usize],
        mask: u8,
        shape: Shape,
        scope: S,
        size: u64,
    ) -> bool {
        let nonadjacent = matches!(shape, Shape::Nonadjacent);
        let mut budget = if nonadjacent { 4 } else { 1 } * (TRIES as u64 + 1) * (size + 1);
        let mut best: Option<Vec<usize>> = None;
        for &seed in seeds.iter().take(TRIES) {
            let e = *self.g.edge(seed);
            let found = if nonadjacent {
                self.bfs.nonadjacent_path(self.g, e.to, e.from, mask, scope, &mut budget)
            } else {
                self.bfs.path(self.g, e.to, e.from, mask, scope, &mut budget)
            };
            match found {
                Ok(Some(path)) => keep_shorter(&mut best, seed, path),
                Ok(None) => {}
                Err(Exhausted) => break,
            }
        }
        best.map(|cycle| self.record(shape, cycle)).is_some()
    }

    /// G-single through rw edges whose ends are in different sub-components:
    /// one pruned BFS each (a path B -> A only visits sub-components numbered at
    /// least A's), under a budget of 64 searches of the component.
    fn single_maybe<S: Fn(u32) -> bool + Copy>(
        &mut self,
        seeds: &[(usize, u32)],
        mask: u8,
        scope: S,
        size: u64,
    ) -> bool {
        let mut budget = 64 * (size + 1) + (1 << 20);
        let mut best: Option<Vec<usize>> = None;
        let mut tries = 0;
        for &(seed, a_comp) in seeds {
            let e = *self.g.edge(seed);
            let t = &self.tarjan;
            let pruned = move |v: u32| scope(v) && t.comp_of(v) >= a_comp;
            match self.bfs.path(self.g, e.to, e.from, mask, pruned, &mut budget) {
                Ok(Some(path)) => {
                    keep_shorter(&mut best, seed, path);
                    tries += 1;
                }
                Ok(None) => {}
                Err(Exhausted) => {
                    if best.is_none() {
                        self.out.truncated += 1;
                    }
                    break;
                }
            }
            if tries == TRIES {
                break;
            }
        }
        best.map(|cycle| self.record(Shape::Single, cycle)).is_some()
    }

    /// Cycles through rw edges over every kind of the universe: recorded as
    /// G2-item when they have two adjacent rw edges, as G-nonadjacent when they
    /// have two or more and none adjacent, as G-single when they have one and
    /// the G-single search found none (it ran out of budget).
    fn any_rw<S: Fn(u32) -> bool + Copy>(
        &mut self,
        seeds: &[usize],
        mask: u8,
        has_single: bool,
        scope: S,
        size: u64,
    ) -> u8 {
        let mut budget = (TRIES as u64 + 1) * (size + 1);
        let (mut multi, mut single): (Option<Vec<usize>>, Option<Vec<usize>>) = (None, None);
        for &seed in seeds.iter().take(TRIES) {
            let e = *self.g.edge(seed);
            match self.bfs.path(self.g, e.to, e.from, mask, scope, &mut budget) {
                Ok(Some(path)) => {
                    let rws = path.iter().filter(|&&i| self.g.edge(i).kind == RW).count() + 1;
                    keep_shorter(if rws >= 2 { &mut multi } else { &mut single }, seed, path);
                }
                Ok(None) => {}
                Err(Exhausted) => break,
            }
        }
        let mut bits = 0;
        if let Some(cycle) = multi {
            if self.rw_adjacent(&cycle) {
                self.record(Shape::G2, cycle);
            } else {
                self.record(Shape::Nonadjacent, cycle);
                bits |= M_NONADJACENT;
            }
        }
        if let (Some(cycle), false) = (single, has_single) {
            self.record(Shape::Single, cycle);
            bits |= M_SINGLE;
        }
        bits
    }

    /// Whether two consecutive edges of `cycle` (the last and the first too) are rw.
    fn rw_adjacent(&self, cycle: &[usize]) -> bool {
        let rw = |k: usize| self.g.edge(cycle[k % cycle.len()]).kind == RW;
        (0..cycle.len()).any(|k| rw(k) && rw(k + 1))
    }

    fn record(&mut self, shape: Shape, mut cycle: Vec<usize>) {
        let g = self.g;
        let kinds = cycle.iter().fold(0, |acc, &i| acc | g.edge(i).kind);
        let name = name(shape, kinds);
        // Start at the smallest transaction, so that a cycle reads the same
        // whichever seed found it.
        if let Some(start) = (0..cycle.len()).min_by_key(|&k| g.edge(cycle[k]).from) {
            cycle.rotate_left(start);
        }
        let found = self.out.found.entry(name).or_default();
        found.count += 1;
        let at = found.cycles.iter().position(|c| c.len() > cycle.len()).unwrap_or(found.cycles.len());
        if at < MAX_REPORTED {
            found.cycles.insert(at, cycle);
            found.cycles.truncate(MAX_REPORTED);
        }
    }
}

/// `seed` followed by `path` is a cycle; keeps it if shorter than `best`.
fn keep_shorter(best: &mut Option<Vec<usize>>, seed: usize, path: Vec<usize>) {
    if best.as_ref().is_none_or(|b| b.len() > path.len() + 1) {
        let mut cycle = Vec::with_capacity(path.len() + 1);
        cycle.push(seed);
        cycle.extend(path);
        *best = Some(cycle);
    }
}

fn name(shape: Shape, kinds: u8) -> &'static str {
    let suffix = if kinds & REALTIME != 0 {
        2
    } else if kinds & PROCESS != 0 {
        1
    } else {
        0
    };
    let names = match shape {
        Shape::G0 => [G0, G0_PROCESS, G0_REALTIME],
        Shape::G1c => [G1C, G1C_PROCESS, G1C_REALTIME],
        Shape::Single => [G_SINGLE, G_SINGLE_PROCESS, G_SINGLE_REALTIME],
        Shape::Nonadjacent => [G_NONADJACENT, G_NONADJACENT_PROCESS, G_NONADJACENT_REALTIME],
        Shape::G2 => [G2_ITEM, G2_ITEM_PROCESS, G2_ITEM_REALTIME],
    };
    names[suffix]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{GEdge, NO_MOP};

    fn edge(from: u32, to: u32, kind: u8) -> GEdge {
        GEdge { from, to, kind, from_mop: NO_MOP, to_mop: NO_MOP }
    }

    fn names(edges: Vec<GEdge>, n: usize) -> Vec<(&'static str, usize)> {
        let s = search(&Graph::build(n, edges));
        s.found.iter().map(|(k, f)| (*k, f.count)).collect()
    }

    #[test]
    fn shapes_are_told_apart() {
        assert_eq!(names(vec![edge(0, 1, WW), edge(1, 0, WW)], 2), [(G0, 1)]);
        assert_eq!(names(vec![edge(0, 1, WW), edge(1, 0, WR)], 2), [(G1C, 1)]);
        assert_eq!(names(vec![edge(0, 1, WR), edge(1, 0, RW)], 2), [(G_SINGLE, 1)]);
        assert_eq!(names(vec![edge(0, 1, RW), edge(1, 0, RW)], 2), [(G2_ITEM, 1)]);
        assert_eq!(names(vec![edge(0, 1, PROCESS), edge(1, 0, RW)], 2), [(G_SINGLE_PROCESS, 1)]);
        assert_eq!(names(vec![edge(0, 1, REALTIME), edge(1, 0, WW)], 2), [(G0_REALTIME, 1)]);
        // Two rw edges, apart: a long fork; together: write skew.
        let fork = vec![edge(0, 1, RW), edge(1, 2, WR), edge(2, 3, RW), edge(3, 0, WR)];
        assert_eq!(names(fork, 4), [(G_NONADJACENT, 1)]);
        assert_eq!(names(vec![edge(0, 1, RW), edge(1, 2, RW), edge(2, 0, WR)], 3), [(G2_ITEM, 1)]);
        // The long fork found by its own search when the shortest rw cycle is write skew.
        let both = vec![edge(0, 1, RW), edge(1, 0, RW), edge(1, 2, WR), edge(2, 3, RW), edge(3, 0, WR)];
        assert_eq!(names(both, 4), [(G_NONADJACENT, 1), (G2_ITEM, 1)]);
        // Two separate write cycles: counted once each.
        assert_eq!(names(vec![edge(0, 1, WW), edge(1, 0, WW), edge(2, 3, WW), edge(3, 2, WW)], 4), [(G0, 2)]);
    }

    /// The G-single search must find a single-rw cycle whose rw edge joins two
    /// different ww/wr components, not just call it G2-item.
    #[test]
    fn g_single_across_subcomponents_is_found() {
        // 0 -rw-> 1 -wr-> 2 -wr-> 0 has one rw; 1 -rw-> 0 adds a two-rw route.
        let edges = vec![edge(0, 1, RW), edge(1, 2, WR), edge(2, 0, WR), edge(1, 0, RW)];
        let found = names(edges, 3);
        assert!(found.contains(&(G_SINGLE, 1)), "{found:?}");
    }

    #[test]
    fn a_long_cycle_is_found_and_kept_whole() {
        let n = 100_000u32;
        let s = search(&Graph::build(n as usize, (0..n).map(|i| edge(i, (i + 1) % n, WW)).collect()));
        assert_eq!(s.found[G0].count, 1);
        assert_eq!(s.found[G0].cycles[0].len(), n as usize);
    }
}
