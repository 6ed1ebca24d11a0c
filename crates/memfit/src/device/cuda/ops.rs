//! The CUDA backend's operations ([`crate::backend::Ops`]): nearest-centre
//! assignments and a mixture's log-densities on the device, everything else
//! on the host.
//!
//! A block's rows are streamed to the device in tiles of the device plan's
//! rows; the `assign_float` / `assign_double` kernels of `kmeans.cu` write
//! each row's label (the lowest index of the exact minimum, as the host's
//! certified kernel gives) and its exact float64 squared distance, computed
//! as the host's `exact_sq_dist` computes it with no contraction. Labels and
//! distances come back to the host, which sums the clusters in row order as
//! on the CPU backend: the same bits.
//!
//! A mixture's E-step streams the rows the same way through the
//! `log_prob_float` / `log_prob_double` kernels of `gaussian.cu`: each
//! row's weighted log-density under each component, in float64, back to
//! the host, which computes the responsibilities and the M-step's sums as
//! on the CPU. Those log-densities are the host's to rounding (the host
//! computes them by GEMM tiles, the device one row and component per
//! thread), so a mixture fitted on the device is the CPU's fit to rounding,
//! not bit for bit.
//!
//! Copies and compute overlap through [`TILES_IN_FLIGHT`] slots, each with
//! its own stream, device buffers and page-locked (pinned) host buffers:
//! the runner's workers call the operations concurrently, each takes a free
//! slot, copies its tile into the slot's pinned buffer, and queues the
//! upload, the kernel and the download on the slot's stream while another
//! worker's tile is in flight on the other. The centres, or the mixture's
//! parameters, are uploaded when they change (once per iteration) and
//! shared by the slots. The device buffers are those the device planner
//! counts ([`super::super::plan`]); the pinned ones are declared as host
//! bytes ([`Ops::assign_bytes`]). A device error fails the pass with
//! [`crate::Error::DeviceUnavailable`].
//!
//! Not yet: the per-tile cluster sums and the mixtures' M-step sums on the
//! device, rows kept on the device across iterations, and the bounds'
//! compacted rows (assigned on the host).

use std::any::TypeId;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use cudarc::driver::{
    sys, CudaContext, CudaFunction, CudaSlice, CudaStream, DeviceRepr, LaunchConfig, PinnedHostSlice, PushKernelArg,
    ValidAsZeroBits,
};

use super::{compile, driver_failed, without_panics, SOURCES};
use crate::backend::{Cpu, OpBytes, Ops};
use crate::device::plan::TILES_IN_FLIGHT;
use crate::device::{unavailable, Device};
use crate::error::Result;
use crate::kernels::{Estep, Prec, PreparedCenters, Scratch};
use crate::Real;

/// Threads per block of the kernels.
const BLOCK_THREADS: u32 = 256;

/// The operations on CUDA device `ordinal`, streaming tiles of `tile_rows`
/// rows: one per device and tile size for the process (the device's
/// context is the process's primary context). Each keeps its slots' buffers
/// (per slot one tile of rows of one compute type, its labels and
/// distances or log-densities, on the device and pinned on the host) and
/// the last centres until the process ends: a process running jobs of
/// several tile sizes on one device holds each size's (at most the
/// power-of-two sizes of the device planner, and one below 256 rows).
pub(crate) fn ops<T: Real>(ordinal: usize, tile_rows: usize) -> &'static dyn Ops<T> {
    static ALL: OnceLock<Mutex<Vec<&'static CudaOps>>> = OnceLock::new();
    let mut all = ALL.get_or_init(Mutex::default).lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(o) = all.iter().find(|o| o.ordinal == ordinal && o.tile_rows == tile_rows) {
        return *o;
    }
    let o: &'static CudaOps = Box::leak(Box::new(CudaOps {
        ordinal,
        tile_rows: tile_rows.max(1),
        shared: Mutex::new(None),
        next_slot: AtomicUsize::new(0),
    }));
    all.push(o);
    o
}

/// A CUDA device's operations and its buffers, opened on first use.
pub(crate) struct CudaOps {
    ordinal: usize,
    tile_rows: usize,
    shared: Mutex<Option<Arc<Shared>>>,
    /// The slot a worker waits for when none is free (round robin).
    next_slot: AtomicUsize,
}

/// What an opened device holds: its kernels, the parameters every slot
/// reads, and the slots.
struct Shared {
    assign_float: CudaFunction,
    assign_double: CudaFunction,
    log_prob_float: CudaFunction,
    log_prob_double: CudaFunction,
    params: Mutex<Params>,
    slots: Vec<Mutex<Slot>>,
}

/// The parameters on the device, with the host's copies they are compared
/// with. Held by `Arc` so that a slot still computing with the previous
/// iteration's keeps them alive.
#[derive(Default)]
struct Params {
    centers: Option<(Vec<f64>, Arc<CudaSlice<f64>>)>,
    mixture: Option<Arc<MixtureParams>>,
}

/// One tile in flight: a stream, the tile's device buffers and their
/// pinned host twins (each made, or remade larger, on first use).
struct Slot {
    stream: Arc<CudaStream>,
    rows_f32: Option<(PinnedHostSlice<f32>, CudaSlice<f32>)>,
    rows_f64: Option<(PinnedHostSlice<f64>, CudaSlice<f64>)>,
    labels: Option<(PinnedHostSlice<u32>, CudaSlice<u32>)>,
    dist: Option<(PinnedHostSlice<f64>, CudaSlice<f64>)>,
    log_prob: Option<(PinnedHostSlice<f64>, CudaSlice<f64>)>,
}

/// A mixture's E-step parameters as the `log_prob_*` kernels take them, in
/// float64: the means `(K, d)`, the precision factors (by covariance type;
/// see `gaussian.cu`) and each component's `ln π_c + Σ ln U_jj − d/2 ln 2π`.
#[derive(PartialEq)]
struct MixtureHost {
    kind: i32,
    means: Vec<f64>,
    prec: Vec<f64>,
    base: Vec<f64>,
}

impl MixtureHost {
    fn of<T: Real>(es: &Estep<T>) -> Self {
        let c0 = -0.5 * es.d as f64 * (2.0 * std::f64::consts::PI).ln();
        let (kind, prec) = match &es.prec {
            Prec::Full(u, _) => (0, u.iter().map(|v| v.to_f64()).collect()),
            Prec::Tied(u, _) => (1, u.iter().map(|v| v.to_f64()).collect()),
            Prec::Diag(p) => (2, p.clone()),
            Prec::Spherical(p) => (3, p.clone()),
        };
        let base = (0..es.k).map(|c| c0 + es.log_det[c] + es.log_weights[c]).collect();
        MixtureHost { kind, means: es.means[..es.k * es.d].to_vec(), prec, base }
    }
}

/// [`MixtureHost`] and its device copies.
struct MixtureParams {
    host: MixtureHost,
    means: CudaSlice<f64>,
    prec: CudaSlice<f64>,
    base: CudaSlice<f64>,
}

/// A pinned host buffer and a device buffer of at least `len` values each
/// in `pair` (made, or remade larger, here). Pinned memory the host only
/// writes (`host_writes`: rows going up) is write-combined.
fn buffers<'a, V: DeviceRepr + ValidAsZeroBits>(
    stream: &Arc<CudaStream>,
    pair: &'a mut Option<(PinnedHostSlice<V>, CudaSlice<V>)>,
    len: usize,
    host_writes: bool,
) -> std::result::Result<&'a mut (PinnedHostSlice<V>, CudaSlice<V>), String> {
    if pair.as_ref().is_none_or(|(h, _)| h.len() < len) {
        *pair = None;
        let flags = if host_writes { sys::CU_MEMHOSTALLOC_WRITECOMBINED } else { 0 };
        // SAFETY: the pinned buffer's values are written (rows) or copied
        // from the device (results) before they are read.
        let host = unsafe { stream.context().alloc_pinned_with_flags::<V>(len, flags) }.map_err(driver_failed)?;
        let dev = stream.alloc_zeros::<V>(len).map_err(driver_failed)?;
        *pair = Some((host, dev));
    }
    pair.as_mut().ok_or_else(|| "no buffer".to_string())
}

/// A tile of rows on the device, in its compute type.
enum Rows<'a> {
    F32(&'a CudaSlice<f32>),
    F64(&'a CudaSlice<f64>),
}

impl Slot {
    /// Copies the tile `xt` into the slot's pinned row buffer of its type
    /// and queues its upload (buffers of `len` values; the other type's are
    /// dropped).
    fn upload<T: Real>(&mut self, xt: &[T], len: usize) -> std::result::Result<Rows<'_>, String> {
        let stream = self.stream.clone();
        if let Some(xt) = as_f32(xt) {
            self.rows_f64 = None;
            let (host, dev) = buffers(&stream, &mut self.rows_f32, len, true)?;
            host.as_mut_slice().map_err(driver_failed)?[..xt.len()].copy_from_slice(xt);
            stream.memcpy_htod(&*host, dev).map_err(driver_failed)?;
            Ok(Rows::F32(dev))
        } else if let Some(xt) = as_f64(xt) {
            self.rows_f32 = None;
            let (host, dev) = buffers(&stream, &mut self.rows_f64, len, true)?;
            host.as_mut_slice().map_err(driver_failed)?[..xt.len()].copy_from_slice(xt);
            stream.memcpy_htod(&*host, dev).map_err(driver_failed)?;
            Ok(Rows::F64(dev))
        } else {
            Err("the compute type is neither float32 nor float64".into())
        }
    }
}

impl CudaOps {
    fn device(&self) -> Device {
        Device::Cuda(self.ordinal)
    }

    /// The device's error in words, as the pass reports it.
    fn failed(&self, why: String) -> crate::Error {
        unavailable(self.device(), why)
    }

    /// Opens the device: its context, the compiled kernels and a stream per
    /// slot.
    fn open(&self) -> std::result::Result<Shared, String> {
        let ordinal = self.ordinal;
        super::probe(ordinal)?;
        let ptx = |name: &str| {
            let source = SOURCES.iter().find(|s| s.name == name).ok_or(format!("no {name} kernel source"))?;
            compile(source)
        };
        let (kmeans, gaussian) = (ptx("kmeans.cu")?, ptx("gaussian.cu")?);
        without_panics(super::INCOMPLETE_DRIVER, || {
            let ctx = CudaContext::new(ordinal).map_err(driver_failed)?;
            let kmeans = ctx.load_module(kmeans).map_err(driver_failed)?;
            let gaussian = ctx.load_module(gaussian).map_err(driver_failed)?;
            let slots = (0..TILES_IN_FLIGHT)
                .map(|_| {
                    Ok(Mutex::new(Slot {
                        stream: ctx.new_stream().map_err(driver_failed)?,
                        rows_f32: None,
                        rows_f64: None,
                        labels: None,
                        dist: None,
                        log_prob: None,
                    }))
                })
                .collect::<std::result::Result<Vec<_>, String>>()?;
            Ok(Shared {
                assign_float: kmeans.load_function("assign_float").map_err(driver_failed)?,
                assign_double: kmeans.load_function("assign_double").map_err(driver_failed)?,
                log_prob_float: gaussian.load_function("log_prob_float").map_err(driver_failed)?,
                log_prob_double: gaussian.load_function("log_prob_double").map_err(driver_failed)?,
                params: Mutex::default(),
                slots,
            })
        })
    }

    /// The device's shared state, opened on first use.
    fn shared(&self) -> std::result::Result<Arc<Shared>, String> {
        let mut guard = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        if guard.is_none() {
            *guard = Some(Arc::new(self.open()?));
        }
        guard.clone().ok_or_else(|| "the device did not open".into())
    }

    /// A free slot, or (all busy) the next one in turn, waited for.
    fn slot<'a>(&self, s: &'a Shared) -> MutexGuard<'a, Slot> {
        for m in &s.slots {
            if let Ok(g) = m.try_lock() {
                return g;
            }
        }
        let i = self.next_slot.fetch_add(1, Ordering::Relaxed) % s.slots.len();
        s.slots[i].lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Assigns the rows of `x` (row-major, `labels.len()` rows of `d`).
    fn assign<T: Real>(
        &self,
        x: &[T],
        centers: &PreparedCenters<T>,
        labels: &mut [u32],
        min_dist: &mut [f64],
    ) -> std::result::Result<(), String> {
        let shared = self.shared()?;
        let (k, d) = (centers.n_clusters, centers.n_features);
        let tile = self.tile_rows;
        // A panic here (cudarc's length checks, a slice out of range) is a
        // bug in this path, reported as such with its message.
        without_panics("memfit's CUDA assignment failed (a bug: please report it)", || {
            // Uploaded when they change (once per iteration), compared in
            // place: no copy per block.
            let c = {
                let mut p = shared.params.lock().unwrap_or_else(PoisonError::into_inner);
                let host = centers.centers();
                if p.centers.as_ref().is_none_or(|(held, _)| held.as_slice() != host) {
                    let s = self.slot(&shared).stream.clone();
                    let dev = s.clone_htod(host).map_err(driver_failed)?;
                    s.synchronize().map_err(driver_failed)?;
                    p.centers = Some((host.to_vec(), Arc::new(dev)));
                }
                p.centers.as_ref().map(|(_, c)| c.clone()).ok_or("no centres on the device")?
            };
            let mut slot = self.slot(&shared);
            let slot = &mut *slot;
            let (ki, di) = (to_i32(k)?, to_i32(d)?);
            for (t, (l, m)) in labels.chunks_mut(tile).zip(min_dist.chunks_mut(tile)).enumerate() {
                let rows = l.len();
                let xt = &x[t * tile * d..(t * tile + rows) * d];
                let ri = to_i32(rows)?;
                let cfg = LaunchConfig {
                    grid_dim: ((rows as u32).div_ceil(BLOCK_THREADS), 1, 1),
                    block_dim: (BLOCK_THREADS, 1, 1),
                    shared_mem_bytes: 0,
                };
                let stream = slot.stream.clone();
                let mut dl = slot.labels.take();
                let mut dd = slot.dist.take();
                let (hl, devl) = buffers(&stream, &mut dl, tile, false)?;
                let (hd, devd) = buffers(&stream, &mut dd, tile, false)?;
                let rows_on = slot.upload(xt, tile * d)?;
                let f = if matches!(rows_on, Rows::F32(_)) { &shared.assign_float } else { &shared.assign_double };
                let mut b = stream.launch_builder(f);
                match rows_on {
                    Rows::F32(r) => b.arg(r),
                    Rows::F64(r) => b.arg(r),
                };
                b.arg(&*c).arg(&ri).arg(&di).arg(&ki).arg(&mut *devl).arg(&mut *devd);
                // SAFETY: the arguments match `assign_float`'s (or
                // `assign_double`'s) parameters, and every buffer holds
                // `rows` rows.
                unsafe { b.launch(cfg) }.map_err(driver_failed)?;
                stream.memcpy_dtoh(&*devl, hl).map_err(driver_failed)?;
                stream.memcpy_dtoh(&*devd, hd).map_err(driver_failed)?;
                // The tile's results are on the host once its stream is
                // done; the other slot's tile runs meanwhile.
                stream.synchronize().map_err(driver_failed)?;
                l.copy_from_slice(&hl.as_slice().map_err(driver_failed)?[..rows]);
                m.copy_from_slice(&hd.as_slice().map_err(driver_failed)?[..rows]);
                slot.labels = dl;
                slot.dist = dd;
            }
            Ok(())
        })
    }

    /// The weighted log-densities of the rows of `x` (row-major,
    /// `out.len() / K` rows of `d`) under `es`'s components into `out`
    /// (row-major `(rows, K)`).
    fn log_prob<T: Real>(&self, x: &[T], es: &Estep<T>, out: &mut [f64]) -> std::result::Result<(), String> {
        let (k, d) = (es.k, es.d);
        if k == 0 || out.is_empty() {
            return Ok(());
        }
        let shared = self.shared()?;
        let tile = self.tile_rows;
        without_panics("memfit's CUDA log-densities failed (a bug: please report it)", || {
            // Uploaded when they change (once per iteration), compared with
            // the host's copy (K·d² values for full covariances).
            let m = {
                let mut p = shared.params.lock().unwrap_or_else(PoisonError::into_inner);
                let host = MixtureHost::of(es);
                if p.mixture.as_ref().is_none_or(|m| m.host != host) {
                    let s = self.slot(&shared).stream.clone();
                    let params = MixtureParams {
                        means: s.clone_htod(&host.means).map_err(driver_failed)?,
                        prec: s.clone_htod(&host.prec).map_err(driver_failed)?,
                        base: s.clone_htod(&host.base).map_err(driver_failed)?,
                        host,
                    };
                    s.synchronize().map_err(driver_failed)?;
                    p.mixture = Some(Arc::new(params));
                }
                p.mixture.clone().ok_or("no parameters on the device")?
            };
            let mut slot = self.slot(&shared);
            let slot = &mut *slot;
            let (ki, di, kind) = (to_i32(k)?, to_i32(d)?, m.host.kind);
            for (t, o) in out.chunks_mut(tile * k).enumerate() {
                let rows = o.len() / k;
                let xt = &x[t * tile * d..(t * tile + rows) * d];
                let ri = to_i32(rows)?;
                let cfg = LaunchConfig {
                    // Components beyond the grid's height are looped over
                    // by the kernel.
                    grid_dim: ((rows as u32).div_ceil(BLOCK_THREADS), (k as u32).min(MAX_GRID_Y), 1),
                    block_dim: (BLOCK_THREADS, 1, 1),
                    shared_mem_bytes: 0,
                };
                let stream = slot.stream.clone();
                let mut lp = slot.log_prob.take();
                let (hout, dout) = buffers(&stream, &mut lp, tile * k, false)?;
                let rows_on = slot.upload(xt, tile * d)?;
                let f = if matches!(rows_on, Rows::F32(_)) { &shared.log_prob_float } else { &shared.log_prob_double };
                let mut b = stream.launch_builder(f);
                match rows_on {
                    Rows::F32(r) => b.arg(r),
                    Rows::F64(r) => b.arg(r),
                };
                b.arg(&m.means).arg(&m.prec).arg(&m.base).arg(&ri).arg(&di).arg(&ki).arg(&kind).arg(&mut *dout);
                // SAFETY: the arguments match `log_prob_float`'s (or
                // `log_prob_double`'s) parameters; the row tile holds
                // `rows` rows, the output `rows × K` values, and the
                // parameters `kind`'s lengths for `K` and `d`.
                unsafe { b.launch(cfg) }.map_err(driver_failed)?;
                stream.memcpy_dtoh(&*dout, hout).map_err(driver_failed)?;
                stream.synchronize().map_err(driver_failed)?;
                o.copy_from_slice(&hout.as_slice().map_err(driver_failed)?[..rows * k]);
                slot.log_prob = lp;
            }
            Ok(())
        })
    }
}

/// The largest grid height of a launch (CUDA's limit).
const MAX_GRID_Y: u32 = 65_535;

/// `v` as a kernel's `int`.
fn to_i32(v: usize) -> std::result::Result<i32, String> {
    i32::try_from(v).map_err(|_| format!("{v} is too large for a kernel's int argument"))
}

/// `x` as `f32` values, when `T` is `f32`.
fn as_f32<T: Real>(x: &[T]) -> Option<&[f32]> {
    // SAFETY: `T` is `f32` (same type id), so the slice's memory is `f32`s.
    (TypeId::of::<T>() == TypeId::of::<f32>())
        .then(|| unsafe { std::slice::from_raw_parts(x.as_ptr().cast(), x.len()) })
}

/// `x` as `f64` values, when `T` is `f64`.
fn as_f64<T: Real>(x: &[T]) -> Option<&[f64]> {
    // SAFETY: `T` is `f64` (same type id), so the slice's memory is `f64`s.
    (TypeId::of::<T>() == TypeId::of::<f64>())
        .then(|| unsafe { std::slice::from_raw_parts(x.as_ptr().cast(), x.len()) })
}

/// The assignments and log-densities run on the device; the other
/// operations (the bounds' rows, sums, log-sum-exp, scatter) are [`Ops`]'s
/// provided ones, on the host.
impl<T: Real> Ops<T> for CudaOps {
    /// The host keeps [`Scratch`] for the bounds' rows; the device one tile
    /// of rows, labels and distances (the centres are the plan's).
    fn assign_bytes(
        &self,
        tile_rows: usize,
        n_clusters: usize,
        k_tile: usize,
        n_features: usize,
        compute_bytes: usize,
    ) -> OpBytes {
        let host = <Cpu as Ops<T>>::assign_bytes(&Cpu, tile_rows, n_clusters, k_tile, n_features, compute_bytes).host;
        let device = (self.tile_rows * (n_features * compute_bytes + 4 + 8)) as u64;
        OpBytes { host, device }
    }

    fn assign_block(
        &self,
        x: &[T],
        centers: &PreparedCenters<T>,
        tile_rows: usize,
        k_tile: usize,
        scratch: &mut [Scratch<T>],
        labels: &mut [u32],
        min_dist: &mut [f64],
    ) -> Result<()> {
        if centers.is_unit() {
            // Cosine k-means decides on the unit rows' own distance
            // (`kernels::unit_sq_dist`), which the device kernel does not
            // compute: the host's kernel assigns them (its scratch is planned).
            crate::kernels::assign_block(x, centers, tile_rows, k_tile, scratch, labels, min_dist);
            return Ok(());
        }
        self.assign(x, centers, labels, min_dist).map_err(|why| self.failed(why))
    }

    fn log_prob_block(&self, xb: &[T], estep: &Estep<T>, _bufs: &mut [Vec<T>], out: &mut [f64]) -> Result<()> {
        self.log_prob(xb, estep, out).map_err(|why| self.failed(why))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compute_types_are_recognised_without_copies() {
        let a = [1.0f32, 2.0];
        assert_eq!(as_f32(&a), Some(&a[..]));
        assert_eq!(as_f64(&a), None);
        let b = [1.0f64];
        assert_eq!(as_f64(&b), Some(&b[..]));
        assert!(to_i32(1 << 31).is_err() && to_i32(5) == Ok(5));
    }

    #[test]
    fn ops_are_one_per_device_and_tile_and_declare_device_bytes() {
        let a = ops::<f64>(3, 1024);
        let b = ops::<f64>(3, 1024);
        assert!(std::ptr::eq(a as *const dyn Ops<f64> as *const u8, b as *const dyn Ops<f64> as *const u8));
        let bytes = a.assign_bytes(256, 200, 200, 3, 8);
        assert_eq!(bytes.device, 1024 * (3 * 8 + 12));
    }

    /// An E-step of `k` components of `d` features of covariance type `t`,
    /// with well-conditioned factors (full and tied upper triangular).
    fn estep<T: Real>(t: crate::mixture::CovarianceType, k: usize, d: usize) -> Estep<T> {
        let mut es = Estep::<T>::new(t, k, d);
        let v = |i: usize| ((i * 7919) % 101) as f64 / 101.0 - 0.5;
        for c in 0..k {
            es.log_det[c] = 0.1 * c as f64;
        }
        let factor = |c: usize, a: usize, b: usize| if a == b { 1.0 + 0.1 * c as f64 } else { 0.2 * v(c + a * d + b) };
        match &mut es.prec {
            Prec::Full(u, _) => {
                for c in 0..k {
                    for a in 0..d {
                        for b in a..d {
                            u[a * k * d + c * d + b] = T::from_f64(factor(c, a, b));
                        }
                    }
                }
            }
            Prec::Tied(u, _) => {
                for a in 0..d {
                    for b in a..d {
                        u[a * d + b] = T::from_f64(factor(0, a, b));
                    }
                }
            }
            Prec::Diag(p) => p.iter_mut().enumerate().for_each(|(i, p)| *p = 0.5 + v(i)),
            Prec::Spherical(p) => p.iter_mut().enumerate().for_each(|(i, p)| *p = 0.7 + 0.1 * i as f64),
        }
        let weights: Vec<f64> = (0..k).map(|c| (c + 1) as f64 / (k * (k + 1) / 2) as f64).collect();
        let means: Vec<f64> = (0..k * d).map(|i| 3.0 * (i / d) as f64 + v(i)).collect();
        // Sets μ_k U_k too (the CPU's narrow full and tied E-steps use it).
        es.set_weights_means(&weights, &means);
        es
    }

    /// With a CUDA driver and device (`MEMFIT_HAS_CUDA_DRIVER` set): a
    /// block's log-densities on the device are the CPU's to rounding (1e-12
    /// relative in float64; the CPU's float32 products leave 1e-4), for
    /// every covariance type, narrow and wide (stacked and triangular on
    /// the CPU), with a last tile shorter than the others. Elsewhere the
    /// test has nothing to run on and passes.
    #[test]
    fn log_densities_on_the_device_are_the_hosts_to_rounding() {
        use crate::mixture::CovarianceType as C;
        if std::env::var_os("MEMFIT_HAS_CUDA_DRIVER").is_none() {
            eprintln!("note: no CUDA driver (MEMFIT_HAS_CUDA_DRIVER unset): nothing to compare");
            return;
        }
        fn check<T: Real>(rtol: f64) {
            for (k, d) in [(5, 3), (3, 150)] {
                for t in [C::Full, C::Tied, C::Diag, C::Spherical] {
                    let es = estep::<T>(t, k, d);
                    let rows = 1000;
                    let x: Vec<T> =
                        (0..rows * d).map(|i| T::from_f64((((i * 104_729) % 1013) as f64) / 97.0)).collect();
                    let mut bufs =
                        vec![vec![T::default(); 2 * 256 * d.max(crate::kernels::stacked_group(k, d) * d)]; 2];
                    let (mut cpu, mut dev) = (vec![0.0; rows * k], vec![0.0; rows * k]);
                    Ops::<T>::log_prob_block(&Cpu, &x, &es, &mut bufs, &mut cpu).unwrap();
                    ops::<T>(0, 256).log_prob_block(&x, &es, &mut [], &mut dev).unwrap();
                    for (i, (a, b)) in cpu.iter().zip(&dev).enumerate() {
                        assert!(
                            (a - b).abs() <= rtol * a.abs().max(1.0),
                            "{t:?} k {k} d {d} [{i}]: cpu {a}, device {b}"
                        );
                    }
                }
            }
        }
        check::<f64>(1e-12);
        check::<f32>(1e-4);
    }

    #[test]
    fn a_missing_device_fails_the_assignment_with_the_reason() {
        if std::env::var_os("MEMFIT_HAS_CUDA_DRIVER").is_some() {
            return;
        }
        let c = PreparedCenters::<f64>::new(&[0.0, 1.0], 2, 1);
        let (mut l, mut m) = (vec![0u32; 2], vec![0.0; 2]);
        let e = ops::<f64>(0, 256).assign_block(&[0.0, 1.0], &c, 256, 2, &mut [], &mut l, &mut m).unwrap_err();
        assert!(matches!(e, crate::Error::DeviceUnavailable { .. }), "{e}");
        assert!(e.to_string().starts_with("cuda:0: cannot be used: "), "{e}");
    }
}
