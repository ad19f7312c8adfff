//! The combining tree: a binomial tree over ranks whose every subtree is a contiguous run
//! of ranks, so combining children in order keeps rank order (scans need only
//! associativity). Rooted at rank 0 for combines; rotated for a broadcast from any root.

/// One member's place in a tree of `size` members rooted at `root`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Place {
    pub parent: Option<usize>,
    /// In increasing rank order (relative to the root), so their subtrees follow one
    /// another and follow this member.
    pub children: Vec<usize>,
}

impl Place {
    pub fn new(rank: usize, size: usize, root: usize) -> Place {
        let rel = (rank + size - root) % size;
        let abs = |r: usize| (r + root) % size;
        // A member's subtree spans [rel, rel + lowbit(rel)); the root's spans everything.
        let span = if rel == 0 {
            size.next_power_of_two()
        } else {
            1 << rel.trailing_zeros()
        };
        let mut children = Vec::new();
        let mut step = 1;
        while step < span && rel + step < size {
            children.push(abs(rel + step));
            step <<= 1;
        }
        let parent = (rel != 0).then(|| abs(rel - (1 << rel.trailing_zeros())));
        Place { parent, children }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_member_but_the_root_has_one_parent_that_lists_it() {
        for size in 1..40 {
            for root in [0, size / 2, size - 1] {
                let places: Vec<Place> = (0..size).map(|r| Place::new(r, size, root)).collect();
                assert_eq!(places[root].parent, None);
                for (r, p) in places.iter().enumerate() {
                    if r != root {
                        let parent = p.parent.expect("a non-root member has a parent");
                        assert!(places[parent].children.contains(&r));
                    }
                }
                let edges: usize = places.iter().map(|p| p.children.len()).sum();
                assert_eq!(edges, size - 1);
            }
        }
    }

    #[test]
    fn subtrees_are_contiguous_in_rank_order() {
        // Collect each subtree in the order the combine visits it: the member, then its
        // children's subtrees in order. For root 0 that must be the ranks in order.
        fn visit(r: usize, size: usize, out: &mut Vec<usize>) {
            out.push(r);
            for c in Place::new(r, size, 0).children {
                visit(c, size, out);
            }
        }
        for size in 1..70 {
            let mut order = Vec::new();
            visit(0, size, &mut order);
            assert_eq!(order, (0..size).collect::<Vec<_>>());
        }
    }
}
