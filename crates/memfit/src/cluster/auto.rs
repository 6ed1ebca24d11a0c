//! When `auto` k-means runs its passes with bounds (see [`super::bounds`]):
//! measured, pass by pass, and never for good.
//!
//! The bounds pay once enough rows keep their labels, which depends on the
//! data, on `k` and on how far the centres still move: early passes, where
//! centres move far, may skip little and cost more than plain passes, and
//! later ones skip most rows. So a stretch of bounded passes that is slower
//! than the plain passes is paused, and the bounds start afresh (a full
//! assignment, about a plain pass) after 4, then 8, 16, … plain passes: a
//! wrong pause costs a few slow passes, a useless retry at most two passes
//! a little slower than plain ones, twice per doubling of the iterations.
//! The choice changes speed only: bounded and plain passes give the same
//! labels, bit for bit.

/// Plain passes before the first retry of paused bounds (doubled by each
/// pause).
const FIRST_PAUSE: usize = 4;

/// The choice between bounded and plain passes of one run.
#[derive(Debug, Clone)]
pub(crate) struct AutoChoice {
    /// Whether the choice is measured (`auto`); otherwise every pass is
    /// bounded.
    measured: bool,
    /// Seconds of the latest warm plain pass.
    plain_secs: f64,
    /// The first pass of the current stretch of bounded passes (its rows
    /// have no bounds yet).
    start: usize,
    /// Plain passes until the bounds resume, at `start`.
    pause: usize,
    /// The skip share of the last bounded pass.
    last_skip: f64,
}

impl AutoChoice {
    /// The choice of a run: measured for `auto`, else always bounded.
    pub(crate) fn new(measured: bool) -> Self {
        // `auto` times two plain passes first (the second, warm, is the
        // reference); its bounds start with the third.
        AutoChoice {
            measured,
            plain_secs: f64::INFINITY,
            start: if measured { 2 } else { 0 },
            pause: FIRST_PAUSE,
            last_skip: 0.0,
        }
    }

    /// Whether pass `it` (from 0) runs with bounds.
    pub(crate) fn bounded(&self, it: usize) -> bool {
        it >= self.start
    }

    /// Whether pass `it`'s bounds start afresh (a full assignment of every
    /// row): the first pass of a stretch.
    pub(crate) fn fresh(&self, it: usize) -> bool {
        it == self.start
    }

    /// Records pass `it`: its seconds and the share of distances its bounds
    /// skipped. A bounded pass that skips some is judged against the last
    /// warm plain pass: slower, or not clearly faster while its skip share
    /// has stopped rising, pauses the bounds.
    pub(crate) fn record(&mut self, it: usize, secs: f64, skip_share: f64) {
        if !self.measured {
            return;
        }
        if !self.bounded(it) {
            // The first pass is cold (pages, caches): not a reference.
            if it >= 1 {
                self.plain_secs = secs;
            }
            return;
        }
        let judged = it > self.start
            && (secs > self.plain_secs || (secs > 0.9 * self.plain_secs && skip_share < self.last_skip + 0.05));
        self.last_skip = skip_share;
        if judged {
            self.start = it + 1 + self.pause;
            self.pause *= 2;
            self.last_skip = 0.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `passes` (seconds and skip share of each bounded pass, plain
    /// passes taking one second) and returns which passes were bounded.
    fn run(measured: bool, n: usize, bounded_pass: impl Fn(usize) -> (f64, f64)) -> Vec<bool> {
        let mut c = AutoChoice::new(measured);
        (0..n)
            .map(|it| {
                let b = c.bounded(it);
                let (secs, skip) = if b {
                    if c.fresh(it) {
                        (1.05, 0.0)
                    } else {
                        bounded_pass(it)
                    }
                } else {
                    (1.0, 0.0)
                };
                c.record(it, secs, skip);
                b
            })
            .collect()
    }

    #[test]
    fn bounds_that_pay_are_kept() {
        let used = run(true, 30, |_| (0.4, 0.8));
        assert_eq!(used.iter().filter(|&&b| !b).count(), 2, "{used:?}");
        assert!(run(false, 30, |_| (2.0, 0.0)).iter().all(|&b| b));
    }

    #[test]
    fn bounds_that_stop_paying_are_paused_and_retried_less_often() {
        let used = run(true, 100, |_| (1.3, 0.1));
        let bounded: Vec<usize> = (0..100).filter(|&i| used[i]).collect();
        // Fresh pass and one judged pass per stretch, after 4, 8, 16, 32
        // plain passes.
        assert_eq!(bounded, vec![2, 3, 8, 9, 18, 19, 36, 37, 70, 71], "{used:?}");
    }

    #[test]
    fn bounds_paused_early_resume_once_they_pay() {
        // Slow while the centres move far, then skipping most rows.
        let used = run(true, 40, |it| if it < 6 { (1.1, 0.3) } else { (0.5, 0.8) });
        assert!(!used[4] && used[8..].iter().all(|&b| b), "{used:?}");
    }
}
