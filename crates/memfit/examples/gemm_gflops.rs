//! faer's plain GEMM throughput on this machine, in the E-step's shape: every
//! thread multiplies its own `(256, d)` tile by a `(d, d)` matrix, as the
//! Gaussian-mixture E-step does per component. Prints GFLOP/s (2·m·n·k flops
//! per product) for float32 and float64, the dense product and the product
//! with an upper-triangular right-hand side (counted as `m·d·(d+1)` flops).
//!
//! `cargo run --release --example gemm_gflops -- [d] [seconds]` (default d = 784).

use std::time::Instant;

use faer::linalg::matmul::triangular::{matmul, BlockStructure};
use faer::prelude::ReborrowMut;
use faer::{Accum, MatMut, MatRef, Par};
use rayon::prelude::*;

fn run<T: memfit::Real>(d: usize, secs: f64, triangular: bool) -> f64 {
    let m = memfit::plan::TILE_ROWS;
    let threads = rayon::current_num_threads();
    let a: Vec<T> = (0..m * d).map(|i| T::from_f64((i % 7) as f64 * 0.1)).collect();
    let b: Vec<T> = (0..d * d).map(|i| T::from_f64(if i % d >= i / d { 0.01 } else { 0.0 })).collect();
    let mut outs: Vec<Vec<T>> = (0..threads).map(|_| vec![T::default(); m * d]).collect();
    let rhs = if triangular { BlockStructure::TriangularUpper } else { BlockStructure::Rectangular };
    let one_round = |outs: &mut Vec<Vec<T>>| {
        outs.par_iter_mut().for_each(|o| {
            matmul(
                MatMut::from_row_major_slice_mut(o, m, d),
                BlockStructure::Rectangular,
                Accum::Replace,
                MatRef::from_row_major_slice(&a, m, d),
                BlockStructure::Rectangular,
                MatRef::from_row_major_slice(&b, d, d),
                rhs,
                T::from_f64(1.0),
                Par::Seq,
            )
        })
    };
    let flops_per = if triangular { (m * d * (d + 1)) as f64 } else { (2 * m * d * d) as f64 };
    rate(secs, flops_per * threads as f64, || one_round(&mut outs))
}

/// GFLOP/s of `round` (`flops` each) repeated for `secs` after one warm-up.
fn rate(secs: f64, flops: f64, mut round: impl FnMut()) -> f64 {
    round();
    let (start, mut rounds) = (Instant::now(), 0u64);
    while start.elapsed().as_secs_f64() < secs {
        round();
        rounds += 1;
    }
    flops * rounds as f64 / start.elapsed().as_secs_f64() / 1e9
}

/// The triangular product as column panels of `b`: panel `[c0, c1)` is the
/// dense product of the first `c1` columns of the tile and rows `0..c1` of
/// the panel (the zeros below the diagonal block are skipped).
fn run_panels(d: usize, secs: f64, b: usize) -> f64 {
    let m = memfit::plan::TILE_ROWS;
    let threads = rayon::current_num_threads();
    let a: Vec<f64> = (0..m * d).map(|i| (i % 7) as f64 * 0.1).collect();
    let u: Vec<f64> = (0..d * d).map(|i| if i % d >= i / d { 0.01 } else { 0.0 }).collect();
    let mut outs: Vec<Vec<f64>> = (0..threads).map(|_| vec![0.0; m * d]).collect();
    let one_round = |outs: &mut Vec<Vec<f64>>| {
        outs.par_iter_mut().for_each(|o| {
            let mut y = MatMut::from_row_major_slice_mut(o, m, d);
            let x = MatRef::from_row_major_slice(&a, m, d);
            let um = MatRef::from_row_major_slice(&u, d, d);
            for c0 in (0..d).step_by(b) {
                let c1 = (c0 + b).min(d);
                faer::linalg::matmul::matmul(
                    y.rb_mut().subcols_mut(c0, c1 - c0),
                    Accum::Replace,
                    x.subcols(0, c1),
                    um.submatrix(0, c0, c1, c1 - c0),
                    1.0,
                    Par::Seq,
                );
            }
        })
    };
    rate(secs, (m * d * (d + 1) * threads) as f64, || one_round(&mut outs))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let d = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(784);
    let secs = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(2.0);
    let threads = rayon::current_num_threads();
    for (name, tri) in [("dense", false), ("triangular", true)] {
        println!(
            "faer GEMM {name} (256, {d}) x ({d}, {d}) on {threads} threads: float32 {:.1} GFLOP/s, float64 {:.1} GFLOP/s",
            run::<f32>(d, secs, tri),
            run::<f64>(d, secs, tri)
        );
    }
    if std::env::var("PANELS").is_ok() {
        for b in [32, 64, 96, 128, 192, 256] {
            println!("panels of {b}: float64 {:.1} GFLOP/s (useful flops)", run_panels(d, secs, b));
        }
    }
}
