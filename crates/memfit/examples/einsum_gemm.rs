//! The deterministic GEMM of `memfit::linalg::einsum` (packing included)
//! against faer's plain GEMM (`Par::Seq`), on one thread, in the shapes the
//! array engine's contractions take: a row tile times a square matrix (the
//! E-step's `X_tile @ Q`), a square product, and the fused row quadratic
//! form `einsum('ij,jk,ik->i')` against faer's product plus the row dots.
//! Prints GFLOP/s (2·m·n·k flops per product) and the ratio.
//!
//! `cargo run --release --example einsum_gemm -- [seconds per case]` (default 1).

use std::time::Instant;

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};
use memfit::linalg::einsum::{contract, contraction_path, label_sizes, parse, Dense};

/// Seconds per call of `f`, repeated for about `secs` after one warm-up.
fn time(secs: f64, mut f: impl FnMut()) -> f64 {
    f();
    let (start, mut n) = (Instant::now(), 0u32);
    while n == 0 || start.elapsed().as_secs_f64() < secs {
        f();
        n += 1;
    }
    start.elapsed().as_secs_f64() / f64::from(n)
}

fn values(len: usize, seed: usize) -> Vec<f64> {
    (0..len).map(|i| ((i * 7 + seed) % 13) as f64 * 0.1 - 0.6).collect()
}

fn einsum<'a>(subscripts: &str, operands: &'a [Dense]) -> impl FnMut() -> Dense + 'a {
    let shapes: Vec<Vec<usize>> = operands.iter().map(|o| o.shape.clone()).collect();
    let sub = parse(subscripts, &shapes).expect("valid subscripts");
    let path = contraction_path(&sub, &label_sizes(&sub, &shapes));
    move || contract(&sub, operands, &path)
}

fn main() {
    let secs: f64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1.0);
    for (m, k, n) in [(256, 300, 300), (4096, 300, 300), (256, 50, 10_000), (1024, 1024, 1024)] {
        let (a, b) = (values(m * k, 1), values(k * n, 2));
        let mut c = vec![0.0; m * n];
        let faer_s = time(secs, || {
            matmul(
                MatMut::from_row_major_slice_mut(&mut c, m, n),
                Accum::Replace,
                MatRef::from_row_major_slice(&a, m, k),
                MatRef::from_row_major_slice(&b, k, n),
                1.0,
                Par::Seq,
            )
        });
        let ops = [Dense { shape: vec![m, k], data: a.clone() }, Dense { shape: vec![k, n], data: b.clone() }];
        let mut run = einsum("ij,jk->ik", &ops);
        let ours_s = time(secs, || {
            std::hint::black_box(run());
        });
        let gf = |s: f64| 2.0 * (m * n * k) as f64 / s / 1e9;
        println!(
            "GEMM ({m}, {k}) x ({k}, {n}): faer {:.1} GFLOP/s, memfit einsum {:.1} GFLOP/s ({:.0} %)",
            gf(faer_s),
            gf(ours_s),
            100.0 * faer_s / ours_s
        );
    }
    for (m, d) in [(4096, 300), (4096, 50)] {
        let (x, q) = (values(m * d, 3), values(d * d, 4));
        let mut t = vec![0.0; m * d];
        let mut out = vec![0.0; m];
        let faer_s = time(secs, || {
            matmul(
                MatMut::from_row_major_slice_mut(&mut t, m, d),
                Accum::Replace,
                MatRef::from_row_major_slice(&x, m, d),
                MatRef::from_row_major_slice(&q, d, d),
                1.0,
                Par::Seq,
            );
            for (i, o) in out.iter_mut().enumerate() {
                *o = t[i * d..][..d].iter().zip(&x[i * d..][..d]).map(|(a, b)| a * b).sum();
            }
        });
        let xd = Dense { shape: vec![m, d], data: x.clone() };
        let ops = [xd.clone(), Dense { shape: vec![d, d], data: q.clone() }, xd];
        let mut run = einsum("ij,jk,ik->i", &ops);
        let ours_s = time(secs, || {
            std::hint::black_box(run());
        });
        println!(
            "row quadratic form ({m}, {d}): faer + dots {:.2} ms, memfit einsum ij,jk,ik->i {:.2} ms ({:.0} %)",
            faer_s * 1e3,
            ours_s * 1e3,
            100.0 * faer_s / ours_s
        );
    }
    let (m, kk, d) = (256, 20, 50);
    let (x, p) = (values(m * d, 5), values(kk * d * d, 6));
    let xd = Dense { shape: vec![m, d], data: x };
    let ops = [xd.clone(), Dense { shape: vec![kk, d, d], data: p }, xd];
    let mut run = einsum("ij,kjl,il->ik", &ops);
    let s = time(secs, || {
        std::hint::black_box(run());
    });
    println!(
        "batched quadratic form ij,kjl,il->ik ({m}, {d}) x {kk}: {:.1} GFLOP/s",
        2.0 * (m * kk * d * (d + 1)) as f64 / s / 1e9
    );
}
