//! The dependency graph between transactions, its strongly connected
//! components (iterative Tarjan) and shortest paths (BFS).
//!
//! Nodes are positions in `History::txns`. Edges carry one kind each (bit
//! flags, so a search can allow a set of kinds) and the two micro-ops that
//! justify them, for the report. No recursion anywhere: a history of 100k
//! transactions can form one long chain.

use std::collections::VecDeque;

pub(crate) const WW: u8 = 1;
pub(crate) const WR: u8 = 2;
pub(crate) const RW: u8 = 4;
pub(crate) const PROCESS: u8 = 8;
pub(crate) const REALTIME: u8 = 16;
pub(crate) const DATA: u8 = WW | WR | RW;

/// `from_mop` / `to_mop`: index of the justifying micro-op in each transaction
/// (`NO_MOP` for process and realtime edges, which need none).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct GEdge {
    pub from: u32,
    pub to: u32,
    pub kind: u8,
    pub from_mop: u32,
    pub to_mop: u32,
}

pub(crate) const NO_MOP: u32 = u32::MAX;

/// Adjacency in compressed form: the edges of node `v` are
/// `edges[offsets[v]..offsets[v + 1]]`, sorted by (to, kind), at most one edge
/// per (from, to, kind), no self-loops.
pub(crate) struct Graph {
    offsets: Vec<usize>,
    edges: Vec<GEdge>,
}

impl Graph {
    /// Sorting the whole tuple keeps the result independent of the order edges
    /// were found in: of duplicates, the one with the smallest mops stays.
    pub fn build(n: usize, mut edges: Vec<GEdge>) -> Graph {
        edges.retain(|e| e.from != e.to && (e.from as usize) < n && (e.to as usize) < n);
        edges.sort_unstable();
        edges.dedup_by(|b, a| (a.from, a.to, a.kind) == (b.from, b.to, b.kind));
        let mut offsets = vec![0usize; n + 1];
        for e in &edges {
            offsets[e.from as usize + 1] += 1;
        }
        for i in 0..n {
            offsets[i + 1] += offsets[i];
        }
        Graph { offsets, edges }
    }

    pub fn nodes(&self) -> usize {
        self.offsets.len() - 1
    }

    pub fn range(&self, v: u32) -> std::ops::Range<usize> {
        self.offsets[v as usize]..self.offsets[v as usize + 1]
    }

    pub fn out(&self, v: u32) -> &[GEdge] {
        &self.edges[self.range(v)]
    }

    pub fn edge(&self, i: usize) -> &GEdge {
        &self.edges[i]
    }

    /// Number of edges of each kind, in bit order (ww, wr, rw, process, realtime).
    pub fn count_by_kind(&self) -> [usize; 5] {
        let mut counts = [0; 5];
        for e in &self.edges {
            counts[e.kind.trailing_zeros() as usize] += 1;
        }
        counts
    }
}

const UNSEEN: u32 = u32::MAX;

/// Tarjan's algorithm with an explicit stack, with scratch arrays kept between
/// runs so that many small runs (one per component) cost only their own size.
pub(crate) struct Tarjan {
    index: Vec<u32>,
    low: Vec<u32>,
    on_stack: Vec<bool>,
    comp: Vec<u32>,
    stack: Vec<u32>,
    calls: Vec<(u32, usize)>,
}

impl Tarjan {
    pub fn new(n: usize) -> Tarjan {
        Tarjan {
            index: vec![UNSEEN; n],
            low: vec![0; n],
            on_stack: vec![false; n],
            comp: vec![UNSEEN; n],
            stack: Vec::new(),
            calls: Vec::new(),
        }
    }

    /// Strongly connected components of the subgraph on `nodes` whose edges
    /// have a kind in `mask` and lead to a node where `scope` holds (`scope`
    /// must hold exactly on `nodes`). Returns the components of two or more
    /// nodes. Afterwards [`Tarjan::comp_of`] numbers every node of `nodes` by its
    /// component, in reverse topological order: an edge u -> v of the subgraph
    /// has `comp_of(u) >= comp_of(v)`.
    pub fn run(&mut self, g: &Graph, nodes: &[u32], mask: u8, scope: impl Fn(u32) -> bool) -> Vec<Vec<u32>> {
        let mut counter = 0u32;
        let mut comps = 0u32;
        let mut found = Vec::new();
        for &root in nodes {
            if self.index[root as usize] != UNSEEN {
                continue;
            }
            self.visit(root, &mut counter, g);
            while let Some(&mut (v, ref mut pos)) = self.calls.last_mut() {
                let end = g.range(v).end;
                let mut next = None;
                while *pos < end {
                    let e = *g.edge(*pos);
                    *pos += 1;
                    if e.kind & mask == 0 || !scope(e.to) {
                        continue;
                    }
                    let w = e.to as usize;
                    if self.index[w] == UNSEEN {
                        next = Some(e.to);
                        break;
                    } else if self.on_stack[w] {
                        self.low[v as usize] = self.low[v as usize].min(self.index[w]);
                    }
                }
                if let Some(w) = next {
                    self.visit(w, &mut counter, g);
                    continue;
                }
                self.calls.pop();
                let (vi, low_v) = (v as usize, self.low[v as usize]);
                if let Some(&(u, _)) = self.calls.last() {
                    self.low[u as usize] = self.low[u as usize].min(low_v);
                }
                if low_v == self.index[vi] {
                    let mut members = Vec::new();
                    while let Some(w) = self.stack.pop() {
                        self.on_stack[w as usize] = false;
                        self.comp[w as usize] = comps;
                        members.push(w);
                        if w == v {
                            break;
                        }
                    }
                    comps += 1;
                    if members.len() > 1 {
                        members.sort_unstable();
                        found.push(members);
                    }
                }
            }
        }
        for &v in nodes {
            self.index[v as usize] = UNSEEN;
        }
        found
    }

    fn visit(&mut self, v: u32, counter: &mut u32, g: &Graph) {
        self.index[v as usize] = *counter;
        self.low[v as usize] = *counter;
        *counter += 1;
        self.stack.push(v);
        self.on_stack[v as usize] = true;
        self.calls.push((v, g.range(v).start));
    }

    pub fn comp_of(&self, v: u32) -> u32 {
        self.comp[v as usize]
    }
}

/// Breadth-first search with reusable scratch arrays (an epoch per search
/// instead of clearing).
pub(crate) struct Bfs {
    seen: Vec<u32>,
    parent: Vec<usize>,
    epoch: u32,
    queue: VecDeque<u32>,
    /// For [`Bfs::nonadjacent_path`]: four states per node, allocated on first use.
    states: Vec<(u32, usize, u32)>,
}

/// The search used up its budget before an answer.
pub(crate) struct Exhausted;

impl Bfs {
    pub fn new(n: usize) -> Bfs {
        Bfs { seen: vec![0; n], parent: vec![0; n], epoch: 0, queue: VecDeque::new(), states: Vec::new() }
    }

    fn next_epoch(&mut self) {
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.seen.iter_mut().for_each(|s| *s = 0);
            self.states.iter_mut().for_each(|s| s.0 = 0);
            self.epoch = 1;
        }
        self.queue.clear();
    }

    /// A shortest path from `from` to `to` that closes a cycle with an rw edge
    /// `to -> from` into a G-nonadjacent: at least one rw edge on the path, no
    /// two rw edges in a row, neither its first nor its last edge rw (they
    /// would sit next to the closing one). Same `mask`, `scope` and `budget`
    /// as [`Bfs::path`]. A search over the states (node, last edge was rw,
    /// an rw edge seen): four per node, so still linear.
    pub fn nonadjacent_path(
        &mut self,
        g: &Graph,
        from: u32,
        to: u32,
        mask: u8,
        scope: impl Fn(u32) -> bool,
        budget: &mut u64,
    ) -> Result<Option<Vec<usize>>, Exhausted> {
        const AFTER_RW: u32 = 2;
        const SAW_RW: u32 = 1;
        if self.states.len() < 4 * self.seen.len() {
            self.states = vec![(0, 0, 0); 4 * self.seen.len()];
        }
        self.next_epoch();
        // The closing rw edge comes just before `from`.
        let start = from * 4 + AFTER_RW;
        let goal = to * 4 + SAW_RW;
        self.states[start as usize].0 = self.epoch;
        self.queue.push_back(start);
        while let Some(s) = self.queue.pop_front() {
            let (v, flags) = (s / 4, s % 4);
            for i in g.range(v) {
                if *budget == 0 {
                    return Err(Exhausted);
                }
                *budget -= 1;
                let e = g.edge(i);
                let rw = e.kind == RW;
                if e.kind & mask == 0 || (rw && flags & AFTER_RW != 0) || !scope(e.to) {
                    continue;
                }
                let next = e.to * 4 + if rw { AFTER_RW | SAW_RW } else { flags & SAW_RW };
                if self.states[next as usize].0 == self.epoch {
                    continue;
                }
                self.states[next as usize] = (self.epoch, i, s);
                if next == goal {
                    let mut path = Vec::new();
                    let mut at = next;
                    while at != start {
                        let (_, edge, prev) = self.states[at as usize];
                        path.push(edge);
                        at = prev;
                    }
                    path.reverse();
                    return Ok(Some(path));
                }
                self.queue.push_back(next);
            }
        }
        Ok(None)
    }

    /// A shortest path from `from` to `to` over edges whose kind is in `mask` and
    /// whose target satisfies `scope`, as edge indices in order. `Ok(None)`: no
    /// path. Every edge looked at costs one unit of `budget`.
    pub fn path(
        &mut self,
        g: &Graph,
        from: u32,
        to: u32,
        mask: u8,
        scope: impl Fn(u32) -> bool,
        budget: &mut u64,
    ) -> Result<Option<Vec<usize>>, Exhausted> {
        if from == to {
            return Ok(Some(Vec::new()));
        }
        self.next_epoch();
        self.seen[from as usize] = self.epoch;
        self.queue.push_back(from);
        while let Some(v) = self.queue.pop_front() {
            for i in g.range(v) {
                if *budget == 0 {
                    return Err(Exhausted);
                }
                *budget -= 1;
                let e = g.edge(i);
                let w = e.to as usize;
                if e.kind & mask == 0 || self.seen[w] == self.epoch || !scope(e.to) {
                    continue;
                }
                self.seen[w] = self.epoch;
                self.parent[w] = i;
                if e.to == to {
                    let mut path = vec![i];
                    let mut at = g.edge(i).from;
                    while at != from {
                        let p = self.parent[at as usize];
                        path.push(p);
                        at = g.edge(p).from;
                    }
                    path.reverse();
                    return Ok(Some(path));
                }
                self.queue.push_back(e.to);
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(from: u32, to: u32, kind: u8) -> GEdge {
        GEdge { from, to, kind, from_mop: NO_MOP, to_mop: NO_MOP }
    }

    #[test]
    fn tarjan_needs_no_recursion_for_a_long_cycle() {
        let n = 300_000u32;
        let g = Graph::build(n as usize, (0..n).map(|i| edge(i, (i + 1) % n, WW)).collect());
        let all: Vec<u32> = (0..n).collect();
        let comps = Tarjan::new(n as usize).run(&g, &all, WW, |_| true);
        assert_eq!(comps.len(), 1);
        assert_eq!(comps[0].len(), n as usize);
        // The wrong kind of edge: no component.
        assert!(Tarjan::new(n as usize).run(&g, &all, RW, |_| true).is_empty());
    }

    #[test]
    fn tarjan_numbers_components_in_reverse_topological_order() {
        // 0 -> {1, 2} (a cycle) -> 3
        let g = Graph::build(4, vec![edge(0, 1, WW), edge(1, 2, WW), edge(2, 1, WR), edge(2, 3, WW)]);
        let mut t = Tarjan::new(4);
        let comps = t.run(&g, &[0, 1, 2, 3], WW | WR, |_| true);
        assert_eq!(comps, vec![vec![1, 2]]);
        assert!(t.comp_of(0) > t.comp_of(1) && t.comp_of(1) == t.comp_of(2) && t.comp_of(2) > t.comp_of(3));
        // Scratch state is reset: a second run on a subset works.
        assert!(t.run(&g, &[1, 2], WW, |v| v == 1 || v == 2).is_empty());
    }

    #[test]
    fn build_dedups_and_drops_self_loops() {
        let g = Graph::build(2, vec![edge(0, 1, WW), edge(0, 1, WW), edge(0, 1, RW), edge(1, 1, WW)]);
        assert_eq!(g.out(0).len(), 2);
        assert!(g.out(1).is_empty());
        assert_eq!(g.count_by_kind(), [1, 0, 1, 0, 0]);
    }

    #[test]
    fn bfs_finds_a_shortest_path_within_budget() {
        // 0 -> 1 -> 2 -> 3 and a shortcut 0 -> 3 of another kind.
        let g = Graph::build(4, vec![edge(0, 1, WW), edge(1, 2, WW), edge(2, 3, WW), edge(0, 3, RW)]);
        let mut bfs = Bfs::new(4);
        let mut budget = 100;
        let path = bfs.path(&g, 0, 3, WW, |_| true, &mut budget).ok().flatten().expect("a path");
        assert_eq!(path.iter().map(|&i| g.edge(i).to).collect::<Vec<_>>(), [1, 2, 3]);
        let path = bfs.path(&g, 0, 3, WW | RW, |_| true, &mut budget).ok().flatten().expect("a path");
        assert_eq!(path.len(), 1);
        assert!(matches!(bfs.path(&g, 3, 0, DATA, |_| true, &mut budget), Ok(None)));
        let mut tiny = 1;
        assert!(bfs.path(&g, 0, 3, WW, |_| true, &mut tiny).is_err());
    }
}
