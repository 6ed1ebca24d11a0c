//! The device planner: every buffer a job keeps in a device's memory, and
//! the row tiles streamed through it, within a device memory limit: the
//! same ledger and the same refusals as the host planner ([`crate::plan`]).
//!
//! A device job holds its parameters (centres, or means and precisions)
//! and streams the rows through two tiles (one copied in while the other is
//! computed), each with its per-row outputs and room for its per-cluster
//! (or per-component) float64 sums (summed on the host today: the room is
//! kept for the device sums to come, so plans do not shrink when they
//! arrive). A tile is a power of two of rows between
//! [`MIN_TILE_ROWS`] and [`crate::plan::CHUNK_ROWS`] (or all the rows, when
//! there are fewer), so tiles never straddle an accumulation chunk and the
//! sums are folded in the host's order.
//!
//! Byte counts saturate at `u64::MAX`: an absurd shape is refused as not
//! fitting, never wrapped round into one that seems to fit.

use std::fmt;

use super::Device;
use crate::error::{Error, Remedy, Result};
use crate::plan::{Ledger, Plan, Schedule, CHUNK_ROWS};

/// The smallest row tile a device job streams.
pub const MIN_TILE_ROWS: usize = 256;

/// Tiles in flight: one copied in while the other is computed.
pub const TILES_IN_FLIGHT: usize = 2;

/// How a device job is cut.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DeviceSchedule {
    /// The device the plan is for (`cuda:0`).
    pub device: String,
    /// Rows per streamed tile.
    pub tile_rows: usize,
    /// Tiles in flight.
    pub tiles_in_flight: usize,
    /// Tiles per pass over the data.
    pub n_tiles: usize,
}

impl Schedule for DeviceSchedule {
    const PHASES: &'static str = "every buffer is held for the whole run";

    fn explain(&self, _threads: usize, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "device {}: tiles of {} rows, {} in flight (each with its stream and pinned host buffers: one tile's copies overlap another's compute), {} tiles per pass",
            self.device, self.tile_rows, self.tiles_in_flight, self.n_tiles
        )
    }

    fn passes(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "each pass streams every row through the device once")
    }
}

/// The shape of a device job: what the planner needs to know.
#[derive(Debug, Clone, Copy)]
pub struct DeviceJob {
    /// The device.
    pub device: Device,
    /// Rows in the data.
    pub n_samples: usize,
    /// Features per row.
    pub n_features: usize,
    /// Bytes per value of the compute dtype (4 or 8).
    pub compute_bytes: usize,
    /// Whether rows carry sample weights.
    pub weighted: bool,
    /// The device memory limit in bytes.
    pub limit_bytes: u64,
}

/// The share of a device's memory a job may use when no device limit is
/// given: 90 %, leaving room for the driver's own allocations.
pub const DEFAULT_LIMIT_TENTHS: u64 = 9;

impl DeviceJob {
    /// Opens `device` (see [`super::open`]) for a job over `n_samples ×
    /// n_features` rows of `compute_bytes` values (weighted or not) within
    /// `limit_bytes`, or [`DEFAULT_LIMIT_TENTHS`] of the device's memory.
    ///
    /// # Errors
    /// As [`super::open`].
    pub fn open(
        device: Device,
        limit_bytes: Option<u64>,
        (n_samples, n_features, compute_bytes, weighted): (usize, usize, usize, bool),
    ) -> Result<Self> {
        let info = super::open(device)?;
        let limit_bytes = limit_bytes.unwrap_or(info.total_bytes / 10 * DEFAULT_LIMIT_TENTHS);
        Ok(DeviceJob { device, n_samples, n_features, compute_bytes, weighted, limit_bytes })
    }
}

/// The device plan of k-means with `n_clusters` clusters (Lloyd passes):
/// float64 centres held; per tile the rows (and weights), labels, distances
/// and compensated per-cluster sums.
///
/// # Errors
/// [`Error::DeviceDoesNotFit`] when not even [`MIN_TILE_ROWS`]-row tiles
/// fit beside the centres.
pub fn plan_kmeans_device(n_clusters: usize, job: &DeviceJob) -> Result<Plan<DeviceSchedule>> {
    let (k, d) = (n_clusters as u64, job.n_features as u64);
    let mut held = Ledger::default();
    held.add("centres", k.saturating_mul(d), 8, format!("{k} × {d} × 8 B (float64)"));
    held.add("centre norms", k, 8, format!("{k} × 8 B"));
    let sums = k.saturating_mul(d.saturating_add(1)).saturating_mul(16);
    let row_bytes = d.saturating_mul(job.compute_bytes as u64);
    let per_row = row_bytes.saturating_add(4 + 8 + if job.weighted { 8 } else { 0 });
    let tiles = |led: &mut Ledger, rows: u64| {
        let t = TILES_IN_FLIGHT as u64;
        led.add("row tiles", t * rows, row_bytes, format!("{t} × {rows} rows × {d} values"));
        led.add("labels and distances", t * rows, 12, format!("{t} × {rows} rows × (4 + 8) B"));
        if job.weighted {
            led.add("sample weights", t * rows, 8, format!("{t} × {rows} rows × 8 B"));
        }
        led.add("per-cluster sums", t * sums, 1, format!("{t} × {k} × ({d} + 1) × 16 B (compensated float64)"));
    };
    plan_tiles("kmeans", job, held, per_row, sums, tiles, || format!("k-means with n_clusters = {k}, n_features = {d}"))
}

/// The device plan of a Gaussian mixture with `n_components` components
/// and `params_per_component` float64 parameters each (means and precision
/// factors), one EM pass per iteration: parameters held; per tile the rows
/// (and weights), the log-densities and responsibilities, and compensated
/// sufficient statistics of `stats_per_component` values each.
///
/// # Errors
/// [`Error::DeviceDoesNotFit`] when not even [`MIN_TILE_ROWS`]-row tiles
/// fit beside the parameters.
pub fn plan_gmm_device(
    n_components: usize,
    params_per_component: usize,
    stats_per_component: usize,
    job: &DeviceJob,
) -> Result<Plan<DeviceSchedule>> {
    let (k, d) = (n_components as u64, job.n_features as u64);
    let mut held = Ledger::default();
    let p = params_per_component as u64;
    held.add(
        "parameters",
        k.saturating_mul(p),
        8,
        format!("{k} components × {p} values × 8 B (means, precision factors, log-normaliser)"),
    );
    let stats = k.saturating_mul((stats_per_component as u64).saturating_add(1)).saturating_mul(16);
    let row_bytes = d.saturating_mul(job.compute_bytes as u64);
    let out_bytes = k.saturating_add(1).saturating_mul(8);
    let per_row = row_bytes.saturating_add(out_bytes).saturating_add(if job.weighted { 8 } else { 0 });
    let tiles = |led: &mut Ledger, rows: u64| {
        let t = TILES_IN_FLIGHT as u64;
        led.add("row tiles", t * rows, row_bytes, format!("{t} × {rows} rows × {d} values"));
        led.add(
            "log-densities and responsibilities",
            t * rows,
            out_bytes,
            format!("{t} × {rows} rows × ({k} + 1) × 8 B"),
        );
        if job.weighted {
            led.add("sample weights", t * rows, 8, format!("{t} × {rows} rows × 8 B"));
        }
        led.add("sufficient statistics", t * stats, 1, format!("{t} × {k} × {} × 16 B", stats_per_component + 1));
    };
    plan_tiles("gmm", job, held, per_row, stats, tiles, || {
        format!("Gaussian mixture with n_components = {k}, n_features = {d}")
    })
}

/// The float64 values per component a mixture of `covariance_type` keeps
/// on a device (means, precision factors and the log-normaliser), and the
/// sufficient statistics
/// per component it sums (a tied mixture's one shared matrix counted in full
/// for each component, an upper bound).
pub fn gmm_values_per_component(covariance_type: crate::mixture::CovarianceType, n_features: usize) -> (usize, usize) {
    use crate::mixture::CovarianceType as C;
    let d = n_features;
    let per = match covariance_type {
        C::Full | C::Tied => d.saturating_mul(d),
        C::Diag => d,
        C::Spherical => 1,
    };
    (d.saturating_add(per).saturating_add(1), d.saturating_add(per))
}

/// The largest power-of-two tile (at most [`CHUNK_ROWS`], and no more than
/// the rows need) whose buffers fit beside `held`, `per_row` bytes per row
/// and `per_tile` bytes per tile in flight.
fn plan_tiles(
    job_name: &str,
    job: &DeviceJob,
    held: Ledger,
    per_row: u64,
    per_tile: u64,
    add_tiles: impl Fn(&mut Ledger, u64),
    what: impl FnOnce() -> String,
) -> Result<Plan<DeviceSchedule>> {
    let t = TILES_IN_FLIGHT as u64;
    let need = |rows: u64| {
        held.total().saturating_add(rows.saturating_mul(per_row).saturating_add(per_tile).saturating_mul(t))
    };
    // Tiles of a power of two rows (whole accumulation chunks or parts of
    // one), but never more rows than the data have: one tile of all of them.
    let n = job.n_samples.max(1) as u64;
    let most = job.n_samples.checked_next_power_of_two().unwrap_or(CHUNK_ROWS).clamp(MIN_TILE_ROWS, CHUNK_ROWS) as u64;
    let mut rows = most.min(n);
    while rows > MIN_TILE_ROWS as u64 && need(rows) > job.limit_bytes {
        // The next power of two down (from a tile of all `n` rows, the
        // largest below `n`).
        rows = if rows.is_power_of_two() { rows / 2 } else { rows.next_power_of_two() / 2 };
    }
    if need(rows) > job.limit_bytes {
        return Err(Error::DeviceDoesNotFit {
            device: job.device.to_string(),
            required_bytes: need(rows),
            limit_bytes: job.limit_bytes,
            what: format!("{}{}", what(), held.largest()),
            remedies: vec![Remedy::RaiseDeviceMemoryLimit { to_bytes: need(rows) }, Remedy::RunOnCpu],
        });
    }
    let mut led = held;
    add_tiles(&mut led, rows);
    let tile_rows = rows as usize;
    debug_assert!(tile_rows <= job.n_samples.max(1));
    let schedule = DeviceSchedule {
        device: job.device.to_string(),
        tile_rows,
        tiles_in_flight: TILES_IN_FLIGHT,
        n_tiles: job.n_samples.div_ceil(tile_rows),
    };
    Ok(Plan::new(&format!("{job_name} on {}", job.device), job.limit_bytes, 1, led, schedule))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(n: usize, d: usize, limit: u64) -> DeviceJob {
        DeviceJob {
            device: Device::Cuda(0),
            n_samples: n,
            n_features: d,
            compute_bytes: 8,
            weighted: false,
            limit_bytes: limit,
        }
    }

    #[test]
    fn tiles_are_the_largest_power_of_two_that_fits() {
        // The report's case: 2,000,000 × 3, k = 200, at 256 MiB: whole chunks.
        let p = plan_kmeans_device(200, &job(2_000_000, 3, 256 << 20)).unwrap();
        assert_eq!(p.schedule.tile_rows, CHUNK_ROWS);
        assert_eq!(p.schedule.n_tiles, 2_000_000usize.div_ceil(CHUNK_ROWS));
        assert!(p.total_bytes <= 256 << 20);
        // At 1 MiB the tiles shrink, and stay within the limit.
        let p = plan_kmeans_device(200, &job(2_000_000, 3, 1 << 20)).unwrap();
        assert!(p.schedule.tile_rows < CHUNK_ROWS && p.schedule.tile_rows.is_power_of_two(), "{p}");
        assert!(p.total_bytes <= 1 << 20, "{p}");
        // A small input gets one tile of its rows.
        assert_eq!(plan_kmeans_device(8, &job(1000, 3, 1 << 30)).unwrap().schedule.tile_rows, 1000);
        assert_eq!(plan_kmeans_device(8, &job(10, 3, 1 << 30)).unwrap().schedule.tile_rows, 10);
        // Wide rows, few of them: the tile holds only the rows there are.
        let p = plan_kmeans_device(2, &job(100, 50_000_000, 80 << 30)).unwrap();
        assert_eq!(p.schedule.tile_rows, 100);
        // The explanation names the device and the tiles.
        let text = plan_kmeans_device(200, &job(2_000_000, 3, 256 << 20)).unwrap().to_string();
        assert!(text.contains("memory plan for kmeans on cuda:0 (limit 256.00 MiB"), "{text}");
        assert!(text.contains("device cuda:0: tiles of 65536 rows, 2 in flight"), "{text}");
    }

    #[test]
    fn a_device_limit_too_small_is_refused_with_the_smallest_that_works() {
        // 10,000 centres of 512 features: 41 MB of centres alone.
        let e = plan_kmeans_device(10_000, &job(1_000_000, 512, 32 << 20)).unwrap_err();
        let Error::DeviceDoesNotFit { required_bytes, ref what, .. } = e else { panic!("{e}") };
        assert!(required_bytes > 32 << 20 && what.contains("largest buffer: centres"), "{e}");
        let text = e.to_string();
        assert!(text.contains("of cuda:0's memory but the device memory limit is 33554432 bytes"), "{text}");
        assert!(text.contains("hint: raise the device memory limit to at least"), "{text}");
        assert!(text.ends_with("or run on the CPU"), "{text}");
        // The smallest that works does work.
        assert!(plan_kmeans_device(10_000, &job(1_000_000, 512, required_bytes)).is_ok());
    }

    #[test]
    fn gmm_tiles_hold_the_log_densities() {
        // The case: full, 200,000 × 50, K = 20 at 256 MiB.
        let (k, d) = (20, 50);
        let params = d + d * d;
        let stats = d + d * d;
        let p = plan_gmm_device(k, params, stats, &job(200_000, d, 256 << 20)).unwrap();
        assert_eq!(p.schedule.tile_rows, CHUNK_ROWS);
        assert!(p.total_bytes <= 256 << 20);
        let small = plan_gmm_device(k, params, stats, &job(200_000, d, 8 << 20)).unwrap();
        assert!(small.schedule.tile_rows < CHUNK_ROWS && small.total_bytes <= 8 << 20, "{small}");
        assert!(matches!(
            plan_gmm_device(k, params, stats, &job(200_000, d, 1 << 20)),
            Err(Error::DeviceDoesNotFit { .. })
        ));
    }

    #[test]
    fn absurd_shapes_are_refused_not_wrapped() {
        for (n, d, k) in [(usize::MAX, usize::MAX, usize::MAX), (1 << 40, 1 << 40, 1 << 40), (10, 1 << 33, 1 << 33)] {
            let e = plan_kmeans_device(k, &job(n, d, u64::MAX - 1)).unwrap_err();
            assert!(matches!(e, Error::DeviceDoesNotFit { required_bytes: u64::MAX, .. }), "{e}");
            let (params, stats) = gmm_values_per_component(crate::mixture::CovarianceType::Full, d);
            let e = plan_gmm_device(k, params, stats, &job(n, d, u64::MAX - 1)).unwrap_err();
            assert!(matches!(e, Error::DeviceDoesNotFit { required_bytes: u64::MAX, .. }), "{e}");
        }
    }
}
