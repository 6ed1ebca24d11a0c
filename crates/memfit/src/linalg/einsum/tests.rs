use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;

fn random(shape: &[usize], rng: &mut ChaCha8Rng) -> Dense {
    let n = shape.iter().product();
    Dense { shape: shape.to_vec(), data: (0..n).map(|_| rng.random_range(-1.0..1.0)).collect() }
}

/// Nested loops over every label: out[o] += Π operands, in f64.
fn naive(sub: &Subscripts, ops: &[Dense]) -> Dense {
    let shapes: Vec<Vec<usize>> = ops.iter().map(|o| o.shape.clone()).collect();
    let sizes = label_sizes(sub, &shapes);
    let labels: Vec<u8> = sizes.keys().copied().collect();
    let dims: Vec<usize> = labels.iter().map(|l| sizes[l]).collect();
    let out_shape: Vec<usize> = sub.output.iter().map(|l| sizes[l]).collect();
    let mut out = vec![0.0; out_shape.iter().product()];
    let total: usize = dims.iter().product();
    let mut idx = vec![0usize; labels.len()];
    let at = |l: u8, idx: &[usize]| idx[labels.iter().position(|&x| x == l).unwrap()];
    for flat in 0..total {
        let mut r = flat;
        for d in (0..dims.len()).rev() {
            idx[d] = r % dims[d];
            r /= dims[d];
        }
        let mut p = 1.0;
        for (ls, op) in sub.inputs.iter().zip(ops) {
            let mut off = 0;
            for (&l, &e) in ls.iter().zip(&op.shape) {
                off = off * e + if e == 1 { 0 } else { at(l, &idx) };
            }
            p *= op.data[off];
        }
        let mut o = 0;
        for (&l, &e) in sub.output.iter().zip(&out_shape) {
            o = o * e + at(l, &idx);
        }
        out[o] += p;
    }
    Dense { shape: out_shape, data: out }
}

fn check(subscripts: &str, shapes: &[&[usize]]) {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let shapes: Vec<Vec<usize>> = shapes.iter().map(|s| s.to_vec()).collect();
    let ops: Vec<Dense> = shapes.iter().map(|s| random(s, &mut rng)).collect();
    let sub = parse(subscripts, &shapes).unwrap();
    let sizes = label_sizes(&sub, &shapes);
    let path = contraction_path(&sub, &sizes);
    let got = contract(&sub, &ops, &path);
    let want = naive(&sub, &ops);
    assert_eq!(got.shape, want.shape, "{subscripts}");
    let scale = want.data.iter().fold(1e-300f64, |m, v| m.max(v.abs()));
    for (g, w) in got.data.iter().zip(&want.data) {
        assert!((g - w).abs() <= 1e-12 * scale.max(w.abs()), "{subscripts}: {g} vs {w}");
    }
}

#[test]
fn einsum_contract_matches_naive() {
    check("ij,jk->ik", &[&[5, 7], &[7, 3]]);
    check("ij,jk->ik", &[&[37, 29], &[29, 41]]);
    check("ij,jk,ik->i", &[&[6, 5], &[5, 4], &[6, 4]]);
    check("ji,j,jk->ik", &[&[5, 3], &[5], &[5, 4]]);
    check("ii->i", &[&[4, 4]]);
    check("ii", &[&[4, 4]]);
    check("ij->", &[&[3, 5]]);
    check("ij->ji", &[&[3, 5]]);
    check("i,i->", &[&[9], &[9]]);
    check("i,j->ij", &[&[4], &[3]]);
    check("bij,bjk->bik", &[&[3, 4, 5], &[3, 5, 2]]);
    check("...ij,...jk->...ik", &[&[2, 1, 3, 4], &[5, 4, 2]]);
    check("...ij,...jk", &[&[3, 4], &[2, 4, 5]]);
    check("ij,ij->ij", &[&[3, 4], &[3, 4]]);
    check("ij,jk,kl,lm->im", &[&[3, 4], &[4, 5], &[5, 6], &[6, 2]]);
    check("ab,bc,cd,da->", &[&[3, 4], &[4, 5], &[5, 2], &[2, 3]]);
    check("iij,jk->ki", &[&[3, 3, 4], &[4, 2]]);
    check("ij,j->i", &[&[1, 4], &[4]]);
    check("i,i->i", &[&[1], &[5]]);
    check("ij,jk->ik", &[&[3, 0], &[0, 2]]);
    check("bik,bkj->bji", &[&[2, 13, 7], &[2, 7, 17]]);
    check("ijk,jl->kli", &[&[3, 4, 5], &[4, 6]]);
    check("a,b,c,d,e,f,g->gfedcba", &[&[2], &[1], &[3], &[2], &[2], &[1], &[2]]);
}

#[test]
fn einsum_parse() {
    let s = |x: &str, sh: &[&[usize]]| parse(x, &sh.iter().map(|v| v.to_vec()).collect::<Vec<_>>());
    let ok = |x: &str, sh: &[&[usize]]| s(x, sh).unwrap();
    let e = |x: &str, sh: &[&[usize]]| s(x, sh).unwrap_err();
    assert_eq!(
        ok("ij,jk->ik", &[&[2, 3], &[3, 4]]),
        Subscripts { inputs: vec![b"ij".to_vec(), b"jk".to_vec()], output: b"ik".to_vec() }
    );
    assert_eq!(ok("jk,ij", &[&[2, 3], &[3, 2]]).output, b"ik");
    assert_eq!(ok("ii", &[&[2, 2]]).output, b"");
    assert_eq!(ok(" i i -> i ", &[&[2, 2]]).output, b"i");
    assert_eq!(ok("ba", &[&[2, 2]]).output, b"ab");
    let el = ok("...ij,...jk", &[&[5, 1, 2, 3], &[7, 3, 4]]);
    assert_eq!(el.inputs, vec![vec![0x80, 0x81, b'i', b'j'], vec![0x81, b'j', b'k']]);
    assert_eq!(el.output, vec![0x80, 0x81, b'i', b'k']);
    let sz = label_sizes(&el, &[vec![5, 1, 2, 3], vec![7, 3, 4]]);
    assert_eq!(sz, BTreeMap::from([(0x80, 5), (0x81, 7), (b'i', 2), (b'j', 3), (b'k', 4)]));
    assert_eq!(ok("i...->...", &[&[2]]).output, b"");
    assert_eq!(ok("a...b,b->...a", &[&[2, 3, 4], &[4]]).output, vec![0x80, b'a']);
    assert_eq!(ok("i,i", &[&[1], &[5]]).output, b"");
    assert_eq!(e("ij", &[]), EinsumError::NoOperands);
    assert_eq!(e("ij,jk", &[&[2, 2]]), EinsumError::OperandCount { subscripts: 2, operands: 1 });
    assert_eq!(e("ij", &[&[2, 2], &[2]]), EinsumError::OperandCount { subscripts: 1, operands: 2 });
    assert_eq!(e("i1", &[&[2, 2]]), EinsumError::InvalidCharacter { character: '1' });
    assert_eq!(e("ij->é", &[&[2, 2]]), EinsumError::InvalidCharacter { character: 'é' });
    assert_eq!(e("i.j", &[&[2, 2]]), EinsumError::InvalidEllipsis { operand: Some(0) });
    assert_eq!(e("i,......", &[&[2], &[2]]), EinsumError::InvalidEllipsis { operand: Some(1) });
    assert_eq!(e("i->..", &[&[2]]), EinsumError::InvalidEllipsis { operand: None });
    assert_eq!(e("ijk", &[&[2, 2]]), EinsumError::DimensionCount { operand: 0, labels: 3, ndim: 2, ellipsis: false });
    assert_eq!(e("i", &[&[2, 2]]), EinsumError::DimensionCount { operand: 0, labels: 1, ndim: 2, ellipsis: false });
    assert_eq!(e("...ijk", &[&[2, 2]]), EinsumError::DimensionCount { operand: 0, labels: 3, ndim: 2, ellipsis: true });
    assert_eq!(e("...", &[&[1; 129]]), EinsumError::TooManyEllipsisDims { count: 129 });
    assert_eq!(e("ij->k", &[&[2, 2]]), EinsumError::OutputNotInInputs { label: 'k' });
    assert_eq!(e("ij->ii", &[&[2, 2]]), EinsumError::OutputRepeated { label: 'i' });
    assert_eq!(e("...i->i", &[&[3, 2]]), EinsumError::OutputMissingEllipsis { ndim: 1 });
    assert_eq!(e("ii", &[&[2, 3]]), EinsumError::DiagonalMismatch { label: 'i', operand: 0, first: 2, other: 3 });
    let remapped = |original: &[usize], remapped: &[Option<usize>]| RemappedShape {
        original: original.to_vec(),
        remapped: remapped.to_vec(),
    };
    assert_eq!(
        e("ij,jk", &[&[2, 4], &[3, 5]]),
        EinsumError::SizeMismatch {
            label: "j".into(),
            operand: 1,
            size: 3,
            previous: 4,
            operands: vec![remapped(&[2, 4], &[Some(2), None, Some(4)]), remapped(&[3, 5], &[None, Some(5), Some(3)])],
        }
    );
    assert!(matches!(
        e("...i,...i", &[&[2, 4], &[3, 4]]),
        EinsumError::SizeMismatch { label, operand: 1, size: 3, previous: 2, .. } if label == "...[0]"
    ));
    assert_eq!(e("i-j", &[&[2]]), EinsumError::StrayArrow);
}

/// The messages are NumPy's (`numpy.einsum`, NumPy 2), word for word.
#[test]
fn messages_are_numpys() {
    let e = |s: &str, shapes: &[&[usize]]| {
        parse(s, &shapes.iter().map(|x| x.to_vec()).collect::<Vec<_>>()).unwrap_err().to_string()
    };
    let broadcast = "operands could not be broadcast together with remapped shapes [original->remapped]: ";
    assert_eq!(e("ij,jk->ik", &[&[3, 4], &[5, 6]]), format!("{broadcast}(3,4)->(3,newaxis,4) (5,6)->(6,5) "));
    assert_eq!(e("ab,Ab->", &[&[2, 3], &[2, 4]]), format!("{broadcast}(2,3)->(2,3) (2,4)->(2,newaxis,4) "));
    assert_eq!(e("ii,i->i", &[&[2, 2], &[3]]), format!("{broadcast}(2,)->(2,) (3,)->(3,) "));
    assert_eq!(e("...i,...i->...i", &[&[2, 3], &[4, 3]]), format!("{broadcast}(2,3)->(2,3) (4,3)->(4,3) "));
    assert_eq!(
        e("ij,jk->ik", &[&[3, 4]]),
        "more operands provided to einstein sum function than specified in the subscripts string"
    );
    assert_eq!(
        e("i,j", &[&[3], &[4], &[5]]),
        "fewer operands provided to einstein sum function than specified in the subscripts string"
    );
    assert_eq!(
        e("ijk,jk->ik", &[&[3, 4], &[4, 5]]),
        "einstein sum subscripts string contains too many subscripts for operand 0"
    );
    assert_eq!(e("ij->iij", &[&[3, 4]]), "einstein sum subscripts string includes output subscript 'i' multiple times");
    assert_eq!(
        e("i$,j->ij", &[&[3, 4], &[4]]),
        "invalid subscript '$' in einstein sum subscripts string, subscripts must be letters"
    );
    assert_eq!(
        e("i.j", &[&[3, 4]]),
        "einstein sum subscripts string contains a '.' that is not part of an ellipsis ('...') in operand 0"
    );
    assert_eq!(
        e("ij->i.", &[&[3, 4]]),
        "einstein sum subscripts string contains a '.' that is not part of an ellipsis ('...') in the output"
    );
    assert_eq!(
        e("ij", &[&[3, 4, 5]]),
        "operand has more dimensions than subscripts given in einstein sum, but no '...' ellipsis provided to \
         broadcast the extra dimensions."
    );
    assert_eq!(
        e("...i,...i->i", &[&[2, 3], &[2, 3]]),
        "output has more dimensions than subscripts given in einstein sum, but no '...' ellipsis provided to \
         broadcast the extra dimensions."
    );
    assert_eq!(e("ii->i", &[&[3, 4]]), "dimensions in single operand for collapsing index 'i' don't match (3 != 4)");
    assert_eq!(e("i-j", &[&[3]]), "einstein sum subscript string does not contain proper '->' output specified");
    assert_eq!(
        e("ij->k", &[&[2, 2]]).to_string(),
        "einstein sum subscripts string included output subscript 'k' which never appeared in an input"
    );
    assert!(e("i", &[&[2, 2]]).to_string().contains("no '...' ellipsis provided"));
}

fn path_for(subscripts: &str, sizes: &[(u8, usize)]) -> (Subscripts, BTreeMap<u8, usize>, Path) {
    let sizes: BTreeMap<u8, usize> = sizes.iter().copied().collect();
    let terms = subscripts.split("->").next().unwrap().split(',');
    let shapes: Vec<Vec<usize>> = terms.map(|t| t.bytes().map(|l| sizes[&l]).collect()).collect();
    let sub = parse(subscripts, &shapes).unwrap();
    let path = contraction_path(&sub, &sizes);
    (sub, sizes, path)
}

#[test]
fn einsum_path_three_matrices() {
    // Every pairwise order must hold one 2-D intermediate at least: (ij,jk)->ik is
    // 1e6 elements; (ij,ik) or (jk,ik) keep j and k for the third operand: i*j*k.
    let (_, _, path) = path_for("ij,jk,ik->i", &[(b'i', 1000), (b'j', 1000), (b'k', 1000)]);
    assert_eq!(path.steps, vec![(0, 1), (0, 1)]);
    assert_eq!(path.peak_bytes, 1000 * 1000 * 8);
    assert_eq!(path.intermediates, vec![(b"ik".to_vec(), 1_000_000), (b"i".to_vec(), 1000)]);
    assert_eq!(path.flops, 2e9 + 2e6);
}

#[test]
fn einsum_path_vector_first() {
    // i < j: (A, v) -> ji holds i*j elements, (v, B) -> jk would hold j*k.
    let (_, _, path) = path_for("ji,j,jk->ik", &[(b'i', 10), (b'j', 300), (b'k', 200)]);
    assert_eq!(path.steps, vec![(0, 1), (0, 1)]);
    assert_eq!(path.intermediates[0], (b"ji".to_vec(), 3000));
    assert_eq!(path.peak_bytes, 3000 * 8);
    // Greedy beyond 6 operands still yields a valid, complete path.
    let (sub, sizes, path) = path_for(
        "ab,bc,cd,de,ef,fg,gh->ah",
        &[(b'a', 3), (b'b', 4), (b'c', 5), (b'd', 2), (b'e', 6), (b'f', 3), (b'g', 2), (b'h', 4)],
    );
    assert_eq!(path.steps.len(), 6);
    let ops: Vec<Dense> = {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        sub.inputs.iter().map(|l| random(&l.iter().map(|c| sizes[c]).collect::<Vec<_>>(), &mut rng)).collect()
    };
    let (got, want) = (contract(&sub, &ops, &path), naive(&sub, &ops));
    for (g, w) in got.data.iter().zip(&want.data) {
        assert!((g - w).abs() <= 1e-12 * w.abs().max(1.0));
    }
}

/// Slices axis `axis` of `d` to `range`.
fn slice(d: &Dense, axis: usize, range: std::ops::Range<usize>) -> Dense {
    let outer: usize = d.shape[..axis].iter().product();
    let inner: usize = d.shape[axis + 1..].iter().product();
    let mut data = Vec::new();
    for o in 0..outer {
        for i in range.clone() {
            let at = (o * d.shape[axis] + i) * inner;
            data.extend_from_slice(&d.data[at..at + inner]);
        }
    }
    let mut shape = d.shape.clone();
    shape[axis] = range.len();
    Dense { shape, data }
}

#[test]
fn einsum_tiling_is_bitwise_invariant() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let cases = [(1, 1, 1), (70, 69, 300), (37, 1, 17), (1, 53, 257), (13, 23, 5), (64, 48, 256), (65, 17, 129)];
    for &(m, n, k) in &cases {
        let (a, b) = (random(&[m, k], &mut rng), random(&[k, n], &mut rng));
        let shapes = vec![a.shape.clone(), b.shape.clone()];
        let sub = parse("ij,jk->ik", &shapes).unwrap();
        let path = contraction_path(&sub, &label_sizes(&sub, &shapes));
        let whole = contract(&sub, &[a.clone(), b.clone()], &path);
        for (r0, r1, c0, c1) in [(0, m, 0, n), (m / 3, m, 0, n), (0, m, n / 2, n), (m / 4, m / 4 + 1, n / 3, n)] {
            if r0 >= r1 || c0 >= c1 {
                continue;
            }
            let tile = contract(&sub, &[slice(&a, 0, r0..r1), slice(&b, 1, c0..c1)], &path);
            for i in r0..r1 {
                for j in c0..c1 {
                    let (t, w) = (tile.data[(i - r0) * (c1 - c0) + j - c0], whole.data[i * n + j]);
                    assert_eq!(t.to_bits(), w.to_bits(), "m={m} n={n} k={k} tile rows {r0}..{r1} cols {c0}..{c1}");
                }
            }
        }
    }
    // Batched and multi-step: slices of the output's free labels, same path.
    let (x, y, z) = (random(&[3, 40, 33], &mut rng), random(&[3, 33, 29], &mut rng), random(&[29, 7], &mut rng));
    let shapes = vec![x.shape.clone(), y.shape.clone(), z.shape.clone()];
    let sub = parse("bij,bjk,kl->bil", &shapes).unwrap();
    let path = contraction_path(&sub, &label_sizes(&sub, &shapes));
    let whole = contract(&sub, &[x.clone(), y.clone(), z.clone()], &path);
    let tile = contract(&sub, &[slice(&slice(&x, 0, 1..3), 1, 5..6), slice(&y, 0, 1..3), slice(&z, 1, 2..7)], &path);
    for b in 0..2 {
        for l in 0..5 {
            let w = whole.data[((b + 1) * 40 + 5) * 7 + l + 2];
            assert_eq!(tile.data[b * 5 + l].to_bits(), w.to_bits());
        }
    }
}

/// Demonstrates (prints) whether faer's GEMM gives tile-dependent bits; run with `--ignored --nocapture`.
#[test]
#[ignore]
fn einsum_faer_tiling_diagnostic() {
    use faer::linalg::matmul::matmul;
    use faer::{Accum, Mat, Par};
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for &(m, n, k) in
        &[(64, 64, 300), (37, 53, 257), (70, 69, 300), (8, 8, 8), (200, 200, 300), (64, 64, 3000), (300, 300, 1500)]
    {
        let a = Mat::<f64>::from_fn(m, k, |_, _| rng.random_range(-1.0..1.0));
        let b = Mat::<f64>::from_fn(k, n, |_, _| rng.random_range(-1.0..1.0));
        let mut whole = Mat::<f64>::zeros(m, n);
        matmul(whole.as_mut(), Accum::Replace, a.as_ref(), b.as_ref(), 1.0, Par::Seq);
        let mut differ = 0;
        for (r0, r1, c0, c1) in [(1, m, 0, n), (m / 2, m / 2 + 1, 0, n), (0, m, n / 2, n / 2 + 1), (3, m, 1, n)] {
            let mut t = Mat::<f64>::zeros(r1 - r0, c1 - c0);
            let (sa, sb) = (a.as_ref().subrows(r0, r1 - r0), b.as_ref().subcols(c0, c1 - c0));
            matmul(t.as_mut(), Accum::Replace, sa, sb, 1.0, Par::Seq);
            for i in r0..r1 {
                for j in c0..c1 {
                    differ += usize::from(t[(i - r0, j - c0)].to_bits() != whole[(i, j)].to_bits());
                }
            }
        }
        println!("faer m={m} n={n} k={k}: {differ} elements differ bitwise between whole and tiles");
    }
}

fn gflops(mut f: impl FnMut(), flops: f64) -> f64 {
    f();
    let reps = 3;
    let t = std::time::Instant::now();
    for _ in 0..reps {
        f();
    }
    flops * reps as f64 / t.elapsed().as_secs_f64() / 1e9
}

/// GFLOP/s of `contract` vs faer on one thread; run with `--ignored --nocapture`.
#[test]
#[ignore]
fn einsum_gemm_speed() {
    use faer::linalg::matmul::matmul;
    use faer::{Accum, MatMut, MatRef, Par};
    for n in [512usize, 1024] {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let (a, b) = (random(&[n, n], &mut rng), random(&[n, n], &mut rng));
        let shapes = vec![a.shape.clone(), b.shape.clone()];
        let sub = parse("ij,jk->ik", &shapes).unwrap();
        let path = contraction_path(&sub, &label_sizes(&sub, &shapes));
        let ops = [a.clone(), b.clone()];
        let flops = 2.0 * (n * n * n) as f64;
        let ours = gflops(|| drop(std::hint::black_box(contract(&sub, &ops, &path))), flops);
        let mut c = vec![0.0; n * n];
        let theirs = gflops(
            || {
                let (ar, br) =
                    (MatRef::from_row_major_slice(&a.data, n, n), MatRef::from_row_major_slice(&b.data, n, n));
                matmul(MatMut::from_row_major_slice_mut(&mut c, n, n), Accum::Replace, ar, br, 1.0, Par::Seq);
                std::hint::black_box(&c);
            },
            flops,
        );
        println!("{n}^3 one thread: contract {ours:.1} GFLOP/s, faer matmul {theirs:.1} GFLOP/s");
    }
}

#[test]
fn einsum_scratch_bytes_counts_steps() {
    let (sub, sizes, path) = path_for("ij,jk,ik->i", &[(b'i', 20), (b'j', 30), (b'k', 40)]);
    let s = scratch_bytes(&sub, &sizes, &path);
    // The ik intermediate (800 elements) is held through the last step.
    assert!(s >= 20 * 40 * 8, "{s}");
    let (sub, sizes, path) = path_for("ij->ji", &[(b'i', 20), (b'j', 30)]);
    assert_eq!(scratch_bytes(&sub, &sizes, &path), 0);
}

#[test]
fn depth_one_steps_are_single_fmas_from_plus_zero() {
    // Outer products (nothing summed) skip the GEMM's packing but keep its
    // bits: fma(x, y, +0.0), so -3 · 0 is +0 and an underflow stays -0.
    let a = Dense { shape: vec![2, 3], data: vec![-3.0, 1e-200, 2.5, 0.0, -1.0, 7.0] };
    let b = Dense { shape: vec![2, 2], data: vec![0.0, -1e-200, -0.5, 3.0] };
    for subscripts in ["bi,bj->bij", "bi,bj->bji"] {
        let shapes = vec![a.shape.clone(), b.shape.clone()];
        let sub = parse(subscripts, &shapes).unwrap();
        let path = contraction_path(&sub, &label_sizes(&sub, &shapes));
        let got = contract(&sub, &[a.clone(), b.clone()], &path);
        let transposed = subscripts.ends_with("ji");
        for t in 0..2 {
            for i in 0..3 {
                for j in 0..2 {
                    let want = a.data[t * 3 + i].mul_add(b.data[t * 2 + j], 0.0);
                    let at = if transposed { (t * 2 + j) * 3 + i } else { (t * 3 + i) * 2 + j };
                    assert_eq!(got.data[at].to_bits(), want.to_bits(), "{subscripts} [{t}, {i}, {j}]");
                }
            }
        }
    }
}
