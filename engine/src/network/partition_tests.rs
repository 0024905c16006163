use super::*;
use std::collections::BTreeSet;

/// Who `i` can talk to under `p` (itself included), both ways.
fn sees(p: &Partition, n: u16, i: u16) -> BTreeSet<u16> {
    let id = |k: u16| NodeId::new(k).unwrap();
    (1..=n).filter(|&j| j == i || (!p.blocks(id(i), id(j)) && !p.blocks(id(j), id(i)))).collect()
}

fn draw(shape: PartitionShape, n: u16, seed: u64) -> Partition {
    shaped_partition(&mut simrng::seeded(seed), n, shape)
}

#[test]
fn majorities_ring_every_node_sees_a_majority_and_no_two_the_same() {
    for n in [4u16, 5, 6, 7, 9] {
        for seed in 0..20 {
            let p = draw(PartitionShape::MajoritiesRing, n, seed);
            let views: Vec<BTreeSet<u16>> = (1..=n).map(|i| sees(&p, n, i)).collect();
            for (i, v) in views.iter().enumerate() {
                assert!(v.len() > usize::from(n) / 2, "n={n}: node {} sees {v:?}", i + 1);
                assert!(v.len() < usize::from(n), "n={n}: node {} sees everyone", i + 1);
            }
            let distinct: BTreeSet<&BTreeSet<u16>> = views.iter().collect();
            assert_eq!(distinct.len(), views.len(), "n={n}: two nodes see the same majority");
        }
    }
}

#[test]
fn bridge_joins_two_halves_through_one_node() {
    for n in [3u16, 5, 6] {
        let p = draw(PartitionShape::Bridge, n, 4);
        let views: Vec<BTreeSet<u16>> = (1..=n).map(|i| sees(&p, n, i)).collect();
        let bridges: Vec<usize> = (0..views.len()).filter(|&i| views[i].len() == usize::from(n)).collect();
        assert_eq!(bridges.len(), 1, "n={n}: one node sees everyone: {views:?}");
        assert!(views.iter().all(|v| v.len() > 1), "nobody is alone");
    }
}

#[test]
fn halves_isolate_one_and_one_way() {
    let n = 5;
    let p = draw(PartitionShape::Halves, n, 1);
    let sizes: BTreeSet<usize> = (1..=n).map(|i| sees(&p, n, i).len()).collect();
    assert_eq!(sizes, BTreeSet::from([2, 3]));
    let p = draw(PartitionShape::IsolateOne, n, 1);
    assert_eq!((1..=n).filter(|&i| sees(&p, n, i).len() == 1).count(), 1);
    let Partition::OneWay { from, to } = draw(PartitionShape::OneWay, n, 1) else { panic!("one way") };
    assert_eq!((from.len(), to.len()), (1, 4));
}

#[test]
fn focus_puts_the_role_holder_where_the_partition_singles_out_a_node() {
    let id = |k: u16| NodeId::new(k).unwrap();
    let set = |v: &[u16]| v.iter().map(|&k| id(k)).collect::<BTreeSet<_>>();
    // Isolating n1 becomes isolating n3; a node already singled out stays.
    assert_eq!(focus(&Partition::isolate(id(1)), id(3)), Partition::isolate(id(3)));
    assert_eq!(focus(&Partition::isolate(id(3)), id(3)), Partition::isolate(id(3)));
    // Halves: the holder lands in the smaller half (split from the majority).
    let halves = Partition::symmetric([vec![id(1), id(2)], vec![id(3), id(4), id(5)]]);
    let Partition::Symmetric { groups } = focus(&halves, id(4)) else { panic!() };
    assert_eq!(groups, vec![set(&[2, 4]), set(&[1, 3, 5])]);
    // One way: the holder's frames are the ones cut.
    let Partition::OneWay { from, to } = focus(&Partition::one_way([id(2)], [id(1), id(3)]), id(3)) else { panic!() };
    assert_eq!((from, to), (set(&[3]), set(&[1, 2])));
    // Links: the node with the most cut links (n3: two) trades with n1.
    let links = Partition::links([(id(1), id(3)), (id(2), id(3))]);
    assert_eq!(focus(&links, id(1)), Partition::links([(id(3), id(1)), (id(2), id(1))]));
    for n in [3u16, 5] {
        for seed in 0..10 {
            for shape in [PartitionShape::IsolateOne, PartitionShape::Halves, PartitionShape::OneWay] {
                let p = focus(&draw(shape, n, seed), id(2));
                assert!(sees(&p, n, 2).len() <= usize::from(n) / 2, "{shape:?} n={n}: {p:?}");
            }
        }
    }
}

#[test]
fn shapes_are_drawn_from_the_list_only() {
    let mut rng = simrng::seeded(9);
    for _ in 0..50 {
        let p = random_partition(&mut rng, 5, Some(&[PartitionShape::MajoritiesRing]));
        assert!(matches!(p, Partition::Links { .. }), "{p:?}");
    }
}
