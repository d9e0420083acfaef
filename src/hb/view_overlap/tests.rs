//! The overlap decisions on the layouts views come in (interleaved, shifted, column slices, complex parts,
//! channels, expanded dimensions, a 1 GiB tensor), and against a byte-by-byte enumeration on random small views.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use super::*;
use crate::model::{ElementDim, StridedView, ViewBytes};
use crate::synth::Rng;

/// A view of `element_size`-byte elements at `start`, sizes and strides in elements, outermost first.
struct View {
    start: u64,
    bytes: ViewBytes,
}

fn view(start: u64, element_size: u64, shape: &[(u64, u64)]) -> View {
    let shape: Vec<ElementDim> = shape.iter().map(|&(size, stride)| ElementDim { size, stride }).collect();
    View { start, bytes: StridedView::new(element_size, &shape).expect("a valid view") }
}

impl View {
    fn placed(&self) -> Placed<'_> {
        match &self.bytes {
            ViewBytes::Empty => Placed::range(self.start, 0),
            ViewBytes::Contiguous { len } => Placed::range(self.start, *len),
            ViewBytes::Strided(v) => Placed { start: self.start as i128, run: v.run, dims: &v.dims },
        }
    }
}

fn meet(a: &View, b: &View) -> bool {
    let mut budget = Budget::new(OVERLAP_STEP_CAP);
    let answer = patterns_meet(a.placed(), b.placed(), &mut budget);
    assert!(!budget.exhausted, "the budget ran out");
    let mut reverse = Budget::new(OVERLAP_STEP_CAP);
    assert_eq!(patterns_meet(b.placed(), a.placed(), &mut reverse), answer, "not symmetric");
    answer
}

#[test]
fn interleaved_even_and_odd_elements_are_disjoint() {
    // x[0::2] and x[1::2] of 1024 floats.
    let even = view(0x1000, 4, &[(512, 2)]);
    let odd = view(0x1004, 4, &[(512, 2)]);
    assert!(!meet(&even, &odd));
    assert!(meet(&even, &view(0x1000, 4, &[(1024, 1)])), "each meets the whole tensor");
}

#[test]
fn shifted_views_overlap() {
    // x[0::2] and x[2::2]: every element but the first is shared.
    assert!(meet(&view(0x1000, 4, &[(512, 2)]), &view(0x1008, 4, &[(511, 2)])));
    // x[0:512] and x[256:768].
    assert!(meet(&view(0x1000, 4, &[(512, 1)]), &view(0x1400, 4, &[(512, 1)])));
}

#[test]
fn column_slices_of_a_row_major_matrix() {
    // A 64 x 32 float matrix: x[:, 3], x[:, 4], x[:, 0:16], x[:, 16:32].
    let column = |j: u64| view(0x1000 + 4 * j, 4, &[(64, 32)]);
    let left = view(0x1000, 4, &[(64, 32), (16, 1)]);
    let right = view(0x1000 + 64, 4, &[(64, 32), (16, 1)]);
    assert!(!meet(&column(3), &column(4)));
    assert!(meet(&column(3), &column(3)));
    assert!(!meet(&left, &right));
    assert!(meet(&left, &column(15)) && !meet(&left, &column(16)));
    // A row (x[5, :]) meets every column.
    assert!(meet(&view(0x1000 + 5 * 128, 4, &[(32, 1)]), &column(7)));
}

#[test]
fn real_and_imaginary_parts_are_disjoint() {
    // torch.view_as_real(z)[..., 0] and [..., 1] of 1000 complex64 numbers.
    let real = view(0x2000, 4, &[(1000, 2)]);
    let imag = view(0x2004, 4, &[(1000, 2)]);
    assert!(!meet(&real, &imag));
    assert!(meet(&real, &view(0x2000, 8, &[(1000, 1)])));
}

#[test]
fn nhwc_channel_split() {
    // An N=2, H=8, W=8, C=6 half tensor in NHWC: x[..., 0:3] and x[..., 3:6].
    let shape = |c: u64| [(2, 8 * 8 * 6), (8, 8 * 6), (8, 6), (c, 1)];
    let first = view(0x3000, 2, &shape(3));
    let second = view(0x3000 + 6, 2, &shape(3));
    assert!(!meet(&first, &second));
    // x[..., 2:5] shares channel 2 with the first half and 3, 4 with the second.
    let middle = view(0x3000 + 4, 2, &shape(3));
    assert!(meet(&first, &middle) && meet(&second, &middle));
}

#[test]
fn expanded_dims_cover_the_same_bytes_again() {
    // A bias row expanded over 128 rows (stride 0) against the even elements of that row.
    let expanded = view(0x4000, 4, &[(128, 0), (64, 1)]);
    assert!(matches!(expanded.bytes, ViewBytes::Contiguous { len: 256 }));
    let expanded_odd = view(0x4004, 4, &[(128, 0), (32, 2)]);
    assert!(!meet(&view(0x4000, 4, &[(32, 2)]), &expanded_odd));
    assert!(meet(&view(0x4004, 4, &[(32, 2)]), &expanded_odd));
}

#[test]
fn a_one_gib_every_other_column_view_costs_what_a_range_costs() {
    // 16384 x 16384 floats (1 GiB): x[:, ::2] against the whole tensor, against x[:, 1::2], and x[:, 0::4]
    // against x[:, 2::4] (two dimensions each, rows of the same stride).
    let (rows, columns) = (16384u64, 16384u64);
    let every_other =
        |first: u64, step: u64| view(0x10_0000_0000 + 4 * first, 4, &[(rows, columns), (columns / step, step)]);
    let whole = view(0x10_0000_0000, 4, &[(rows * columns, 1)]);
    let started = Instant::now();
    assert!(meet(&every_other(0, 2), &whole));
    assert!(!meet(&every_other(0, 2), &every_other(1, 2)));
    assert!(!meet(&every_other(0, 4), &every_other(2, 4)));
    assert!(meet(&every_other(0, 4), &every_other(0, 2)));
    assert!(started.elapsed() < Duration::from_millis(50), "took {:?}", started.elapsed());
}

/// The bytes a view covers, one by one.
fn bytes_of(v: &View) -> HashSet<i128> {
    let p = v.placed();
    let mut out = HashSet::new();
    let mut index = vec![0u64; p.dims.len()];
    loop {
        let base = p.start + p.dims.iter().zip(&index).map(|(d, i)| (*i * d.stride) as i128).sum::<i128>();
        out.extend((0..p.run as i128).map(|b| base + b));
        let Some(k) = (0..index.len()).find(|&k| index[k] + 1 < p.dims[k].count) else { break };
        index[k] += 1;
        index[..k].iter_mut().for_each(|i| *i = 0);
    }
    out
}

#[test]
fn random_small_views_agree_with_enumeration() {
    let mut rng = Rng(7);
    for _ in 0..20_000 {
        let random_view = |rng: &mut Rng| {
            let dims = 1 + rng.below(3) as usize;
            let shape: Vec<(u64, u64)> = (0..dims).map(|_| (1 + rng.below(5), rng.below(12))).collect();
            view(rng.below(64), 1 + rng.below(4), &shape)
        };
        let (a, b) = (random_view(&mut rng), random_view(&mut rng));
        let expected = !bytes_of(&a).is_disjoint(&bytes_of(&b));
        assert_eq!(meet(&a, &b), expected, "{:?} at {} vs {:?} at {}", a.bytes, a.start, b.bytes, b.start);
    }
}

#[test]
fn a_question_past_the_budget_is_answered_overlap() {
    let a = view(0, 1, &[(1000, 7), (3, 2)]);
    let b = view(1, 1, &[(1000, 11), (2, 3)]);
    let mut budget = Budget::new(3);
    assert!(patterns_meet(a.placed(), b.placed(), &mut budget));
    assert!(budget.exhausted);
}
