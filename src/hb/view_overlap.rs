//! Whether two strided byte patterns share a byte, or a pattern meets a range, decided exactly on the bytes
//! covered and without listing them (DESIGN.md, access tier T2).
//!
//! A pattern is a run of bytes repeated along dimensions ([`crate::model::StridedView`], normalized). Two
//! one-dimensional patterns are arithmetic progressions of runs: they meet exactly when some difference of their
//! offsets, a multiple of the gcd of their periods, falls within the runs' reach, and that multiple is reached by
//! indices inside both counts (a linear Diophantine equation). Patterns with more dimensions are peeled one outer
//! dimension at a time: two that step by the same outer stride compare only the few relative shifts that can
//! bring their inner parts together; otherwise the outer indices that can reach the other pattern are visited.
//! Every step costs one unit of a [`Budget`]; a question that runs past it is answered "they overlap", which can
//! report a race that is not one but never hides one, and the budget says so.

use crate::model::{Access, ByteDim, StridedView};

/// Steps one overlap question may take before it is answered conservatively.
pub const OVERLAP_STEP_CAP: u64 = 1 << 20;

/// The work left for one overlap question, and whether it ran out.
#[derive(Debug)]
pub struct Budget {
    steps_left: u64,
    /// Set when an answer was given as "overlap" because the budget (or 128-bit arithmetic) ran out.
    pub exhausted: bool,
}

impl Budget {
    pub fn new(steps: u64) -> Budget {
        Budget { steps_left: steps, exhausted: false }
    }

    /// Takes one step; false when none is left (the caller then answers "overlap").
    fn step(&mut self) -> bool {
        if self.steps_left == 0 {
            self.exhausted = true;
            return false;
        }
        self.steps_left -= 1;
        true
    }

    /// An answer that could not be computed: conservatively, they overlap.
    fn give_up(&mut self) -> bool {
        self.exhausted = true;
        true
    }
}

/// A pattern at its place: `run` bytes at `start + Σ index_k * stride_k`, for every index below each count.
/// `dims` is innermost first. Addresses are 128-bit so that shifted copies never wrap.
#[derive(Copy, Clone, Debug)]
pub struct Placed<'a> {
    pub start: i128,
    pub run: u64,
    pub dims: &'a [ByteDim],
}

impl<'a> Placed<'a> {
    /// A contiguous range `[start, start + len)`.
    pub fn range(start: u64, len: u64) -> Placed<'static> {
        Placed { start: start as i128, run: len, dims: &[] }
    }

    /// A strided view's pattern from `start`.
    pub fn view(start: u64, view: &'a StridedView) -> Placed<'a> {
        Placed { start: start as i128, run: view.run, dims: &view.dims }
    }

    /// One past the last byte.
    fn end(&self) -> i128 {
        self.start + self.span()
    }

    fn span(&self) -> i128 {
        self.dims.iter().fold(self.run as i128, |span, d| span + (d.count as i128 - 1) * d.stride as i128)
    }

    /// The outermost dimension and the pattern inside it, at this pattern's start.
    fn split_outer(&self) -> (ByteDim, Placed<'a>) {
        let (outer, inner) = self.dims.split_last().expect("split_outer of a pattern with dimensions");
        (*outer, Placed { start: self.start, run: self.run, dims: inner })
    }

    fn at(self, start: i128) -> Placed<'a> {
        Placed { start, ..self }
    }
}

fn div_floor(a: i128, b: i128) -> i128 {
    let q = a / b;
    if (a % b != 0) && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    }
}

fn div_ceil(a: i128, b: i128) -> i128 {
    -div_floor(-a, b)
}

fn gcd(mut a: i128, mut b: i128) -> i128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The inverse of `a` modulo `m` (they are coprime, m >= 1), in `[0, m)`.
fn inverse_mod(a: i128, m: i128) -> i128 {
    let (mut old_r, mut r) = (a.rem_euclid(m), m);
    let (mut old_s, mut s) = (1i128, 0i128);
    while r != 0 {
        let q = old_r / r;
        (old_r, r) = (r, old_r - q * r);
        (old_s, s) = (s, old_s - q * s);
    }
    old_s.rem_euclid(m)
}

/// Whether two accesses share a byte: on the bytes their views cover where they have views (a graph's nodes
/// are compared access by access, not through the shadow).
pub fn accesses_meet(a: &Access, b: &Access, budget: &mut Budget) -> bool {
    fn placed(x: &Access) -> Placed<'_> {
        match &x.view {
            Some(view) => Placed::view(x.range.start, view),
            None => Placed::range(x.range.start, x.range.len),
        }
    }
    patterns_meet(placed(a), placed(b), budget)
}

/// Whether the two patterns share a byte.
pub fn patterns_meet(a: Placed, b: Placed, budget: &mut Budget) -> bool {
    if a.start >= b.end() || b.start >= a.end() {
        return false;
    }
    if !budget.step() {
        return true;
    }
    match (a.dims.len(), b.dims.len()) {
        (0, 0) => true,
        (0, _) => pattern_meets_range(b, a.start, a.end(), budget),
        (_, 0) => pattern_meets_range(a, b.start, b.end(), budget),
        (1, 1) => progressions_meet(a, b, budget),
        _ => {
            let (outer_a, outer_b) = (a.split_outer().0, b.split_outer().0);
            if outer_a.stride == outer_b.stride {
                same_outer_stride_meet(a, b, budget)
            } else if outer_a.stride >= outer_b.stride {
                outer_indices_meet(a, b, budget)
            } else {
                outer_indices_meet(b, a, budget)
            }
        }
    }
}

/// Whether the pattern covers a byte of `[lo, hi)`.
pub fn pattern_meets_range(p: Placed, lo: i128, hi: i128, budget: &mut Budget) -> bool {
    if p.start >= hi || lo >= p.end() {
        return false;
    }
    if p.dims.is_empty() {
        return true;
    }
    let (outer, inner) = p.split_outer();
    let (count, stride) = (outer.count as i128, outer.stride as i128);
    // Every copy of the inner pattern covers its own first byte: one that starts inside the range meets it.
    let first_inside = div_ceil(lo - p.start, stride).max(0);
    if first_inside < count && p.start + first_inside * stride < hi {
        return true;
    }
    // Otherwise only copies that start before `lo` and reach past it can.
    let from = div_ceil(lo - p.start - inner.span() + 1, stride).max(0);
    let to = div_floor(lo - 1 - p.start, stride).min(count - 1);
    for index in from..=to {
        if !budget.step() {
            return true;
        }
        if pattern_meets_range(inner.at(p.start + index * stride), lo, hi, budget) {
            return true;
        }
    }
    false
}

/// Two one-dimensional patterns: runs of `a.run` bytes at `a.start + i * s1` (i < c1) and of `b.run` bytes at
/// `b.start + j * s2` (j < c2). They meet when `i * s1 - j * s2 = t` for some `t` with
/// `b.start - a.start - a.run < t < b.start - a.start + b.run`; only multiples of `g = gcd(s1, s2)` are reached,
/// and for each the solutions `(i, j)` form one line, checked against both counts.
fn progressions_meet(a: Placed, b: Placed, budget: &mut Budget) -> bool {
    let (da, db) = (a.dims[0], b.dims[0]);
    let (s1, s2) = (da.stride as i128, db.stride as i128);
    let (c1, c2) = (da.count as i128, db.count as i128);
    let g = gcd(s1, s2);
    let (s1g, s2g) = (s1 / g, s2 / g);
    let inverse = inverse_mod(s1g, s2g);
    let shift = b.start - a.start;
    let (lowest, highest) = (shift - a.run as i128 + 1, shift + b.run as i128 - 1);
    let mut t = div_ceil(lowest, g) * g;
    while t <= highest {
        if !budget.step() {
            return true;
        }
        // i * s1g ≡ t/g (mod s2g): the smallest non-negative i, then every s2g-th.
        let Some(i0) = ((t / g).rem_euclid(s2g)).checked_mul(inverse).map(|x| x.rem_euclid(s2g)) else {
            return budget.give_up();
        };
        let Some(j0_scaled) = i0.checked_mul(s1).map(|x| x - t) else { return budget.give_up() };
        let j0 = j0_scaled / s2;
        // i = i0 + k * s2g in [0, c1), j = j0 + k * s1g in [0, c2).
        let k_low = div_ceil(-i0, s2g).max(div_ceil(-j0, s1g));
        let k_high = div_floor(c1 - 1 - i0, s2g).min(div_floor(c2 - 1 - j0, s1g));
        if k_low <= k_high {
            return true;
        }
        t += g;
    }
    false
}

/// Both step by the same outer stride `s`: copy `i` of `a`'s inner part meets copy `j` of `b`'s exactly when
/// `a`'s inner part shifted by `(i - j) * s` meets `b`'s inner part in place, so only the shifts that bring the
/// two inner extents together are tried.
fn same_outer_stride_meet(a: Placed, b: Placed, budget: &mut Budget) -> bool {
    let (outer_a, inner_a) = a.split_outer();
    let (outer_b, inner_b) = b.split_outer();
    let stride = outer_a.stride as i128;
    let low = div_ceil(inner_b.start - inner_a.start - inner_a.span() + 1, stride).max(1 - outer_b.count as i128);
    let high = div_floor(inner_b.end() - 1 - inner_a.start, stride).min(outer_a.count as i128 - 1);
    for shift in low..=high {
        if !budget.step() {
            return true;
        }
        if patterns_meet(inner_a.at(inner_a.start + shift * stride), inner_b, budget) {
            return true;
        }
    }
    false
}

/// Visits the copies of `wide`'s inner part (along its outer dimension) that can reach `other`'s extent.
fn outer_indices_meet(wide: Placed, other: Placed, budget: &mut Budget) -> bool {
    let (outer, inner) = wide.split_outer();
    let stride = outer.stride as i128;
    let from = div_ceil(other.start - wide.start - inner.span() + 1, stride).max(0);
    let to = div_floor(other.end() - 1 - wide.start, stride).min(outer.count as i128 - 1);
    for index in from..=to {
        if !budget.step() {
            return true;
        }
        if patterns_meet(inner.at(wide.start + index * stride), other, budget) {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests;
