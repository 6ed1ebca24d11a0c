//! Array stages on the runner: a stage's work as a grid of units (output
//! tiles × fixed accumulation chunks), run in parallel, each unit's
//! statistics folded into its tile's in chunk order ([`run_grid`]); or
//! independent tiles written as they finish ([`run_tiles`]).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use rayon::prelude::*;

use super::{Cancel, Merge};
use crate::error::Result;

/// Runs `unit(buffer, tile)` for tiles `0..tiles` on the current pool's
/// threads (each thread reuses one `init()` buffer): for work whose tiles
/// do not depend on each other (an elementwise stage writing its tiles to
/// a [`super::Sink`]). Each thread takes the next tile in order, so the
/// threads work on neighbouring tiles (not on far halves of the range):
/// the chunks of a Zarr input they read stay in the stage's cache, and
/// file reads stay near each other. `cancel` is checked before each tile.
///
/// # Errors
/// [`crate::Error::Cancelled`]; the first error a unit returns (the other
/// threads take no further tile).
pub fn run_tiles<B>(
    tiles: usize,
    cancel: &Cancel,
    init: impl Fn() -> B + Sync + Send,
    unit: impl Fn(&mut B, usize) -> Result<()> + Sync + Send,
) -> Result<()> {
    let (next, failed) = (AtomicUsize::new(0), AtomicBool::new(false));
    let workers = rayon::current_num_threads().clamp(1, tiles.max(1));
    (0..workers).into_par_iter().try_for_each(|_| {
        let mut buf = init();
        loop {
            let t = next.fetch_add(1, Ordering::Relaxed);
            if t >= tiles || failed.load(Ordering::Relaxed) {
                return Ok(());
            }
            let done = cancel.check().and_then(|()| unit(&mut buf, t));
            if done.is_err() {
                failed.store(true, Ordering::Relaxed);
                return done;
            }
        }
    })
}

/// Runs a grid of `tiles × chunks` units: `unit(buffer, tile, chunk)`
/// computes the statistics of one accumulation chunk of one output tile.
/// Units run `threads` at a time, in parallel; each tile's statistics are
/// folded left to right in chunk order ([`Merge::merge`], from chunk 0) and
/// handed to `finish(tile, stats)` when its last chunk is in. Results are
/// therefore the same bits for any thread count and any tiling of the work
/// into batches, as for row passes ([`super::run_pass`]). At most `threads`
/// unit results and the open tiles' statistics are held at once. With one
/// chunk (or none) per tile this is [`run_tiles`], each tile finished by the
/// thread that computed it. `cancel` is checked before each batch.
///
/// # Errors
/// [`crate::Error::Cancelled`]; the first error a unit or `finish` returns.
pub fn run_grid<S: Merge, B>(
    tiles: usize,
    chunks: usize,
    threads: usize,
    cancel: &Cancel,
    init: impl Fn() -> B + Sync + Send,
    unit: impl Fn(&mut B, usize, usize) -> Result<S> + Sync + Send,
    finish: impl Fn(usize, S) -> Result<()> + Sync + Send,
) -> Result<()> {
    if chunks <= 1 {
        return run_tiles(tiles, cancel, init, |buf, t| finish(t, unit(buf, t, 0)?));
    }
    let items = tiles * chunks;
    let mut open: Vec<(usize, S)> = Vec::new();
    let mut start = 0;
    while start < items {
        cancel.check()?;
        let end = (start + threads.max(1)).min(items);
        let parts: Vec<Result<S>> =
            (start..end).into_par_iter().map_init(&init, |buf, i| unit(buf, i / chunks, i % chunks)).collect();
        for (i, p) in (start..end).zip(parts) {
            let (t, c) = (i / chunks, i % chunks);
            let p = p?;
            match open.iter_mut().find(|(o, _)| *o == t) {
                Some((_, acc)) => acc.merge(&p),
                None => open.push((t, p)),
            }
            if c == chunks - 1 {
                let at = open.iter().position(|(o, _)| *o == t).expect("an open tile");
                let (_, acc) = open.swap_remove(at);
                finish(t, acc)?;
            }
        }
        start = end;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn folds_chunks_in_order_for_any_thread_count() {
        // Sums of 1/(1 + tile + k) over chunks of 7 values: the order of
        // additions shows in the bits.
        let value = |t: usize, c: usize, j: usize| 1.0 / (1.0 + t as f64 + (c * 7 + j) as f64 * 0.37);
        let run = |threads: usize| {
            let out = Mutex::new(vec![0.0; 5]);
            crate::exec::install(threads, || {
                run_grid(
                    5,
                    9,
                    threads,
                    &Cancel::new(),
                    || (),
                    |_, t, c| Ok((0..7).map(|j| value(t, c, j)).fold(0.0, |a, v| a + v)),
                    |t, s: f64| {
                        out.lock().unwrap()[t] = s;
                        Ok(())
                    },
                )
            })
            .unwrap()
            .unwrap();
            out.into_inner().unwrap()
        };
        let chunk = |t: usize, c: usize| (0..7).map(|j| value(t, c, j)).fold(0.0, |a, v| a + v);
        let want: Vec<f64> = (0..5).map(|t| (1..9).fold(chunk(t, 0), |a, c| a + chunk(t, c))).collect();
        for threads in [1, 2, 3, 8] {
            assert_eq!(run(threads), want, "{threads} threads");
        }
    }

    #[test]
    fn stops_when_cancelled() {
        let cancel = Cancel::new();
        cancel.cancel();
        let e = run_grid(3, 2, 1, &cancel, || (), |_, _, _| Ok(0.0), |_, _| Ok(())).unwrap_err();
        assert!(matches!(e, crate::Error::Cancelled));
        let e = run_tiles(3, &cancel, || (), |_, _| Ok(())).unwrap_err();
        assert!(matches!(e, crate::Error::Cancelled));
    }
}
