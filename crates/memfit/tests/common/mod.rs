//! Helpers shared by the engine-level `memfit::array` tests.
// Each test crate uses some of them.
#![allow(dead_code)]

use memfit::array::{run, Array, Computed, Options, Output};
use memfit::exec::Context;

pub const MIB: u64 = 1 << 20;

/// `a` computed in memory within `limit` bytes on `threads` threads.
pub fn compute(a: &Array, limit: u64, threads: usize) -> Computed {
    let opts = Options { threads: Some(threads), ..Options::with_limit(limit) };
    run(a, &Output::Memory, &opts, &mut Context::new(&mut ())).unwrap().0.unwrap()
}

/// The float64 values of a result.
pub fn f64s(c: &Computed) -> Vec<f64> {
    c.bytes.chunks_exact(8).map(|b| f64::from_le_bytes(b.try_into().unwrap())).collect()
}
