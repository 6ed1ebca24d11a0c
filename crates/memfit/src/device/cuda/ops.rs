//! The CUDA backend's operations ([`crate::backend::Ops`]): nearest-centre
//! assignments on the device, everything else on the host.
//!
//! A block's rows are streamed to the device in tiles of the device plan's
//! rows; the `assign_float` / `assign_double` kernels of `kmeans.cu` write
//! each row's label (the lowest index of the exact minimum, as the host's
//! certified kernel gives) and its exact float64 squared distance, computed
//! as the host's `exact_sq_dist` computes it with no contraction. Labels and
//! distances come back to the host, which sums the clusters in row order as
//! on the CPU backend: the same bits.
//!
//! The centres are uploaded when they change (once per iteration). The
//! device buffers (one tile of rows, labels and distances, and the centres)
//! are those the device planner counts ([`super::super::plan`]). A device
//! error fails the pass with [`crate::Error::DeviceUnavailable`].
//!
//! Not yet: pinned host buffers and a second stream to overlap copies and
//! compute (the plan already counts two tiles in flight), the per-tile
//! cluster sums on the device, the bounds' compacted rows (assigned on the
//! host), and the mixtures' kernels.

use std::any::TypeId;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};

use super::{compile, driver_failed, without_panics, SOURCES};
use crate::backend::{Cpu, OpBytes, Ops};
use crate::device::{unavailable, Device};
use crate::error::Result;
use crate::kernels::{PreparedCenters, Scratch};
use crate::Real;

/// Threads per block of the assignment kernels.
const BLOCK_THREADS: u32 = 256;

/// The operations on CUDA device `ordinal`, streaming tiles of `tile_rows`
/// rows: one per device and tile size for the process (the device's
/// context is the process's primary context). Each keeps its device
/// buffers (one tile of rows of one compute type, its labels and distances,
/// the last centres) until the process ends: a process running jobs of
/// several tile sizes on one device holds each size's (at most the
/// power-of-two sizes of the device planner, and one below 256 rows).
pub(crate) fn ops<T: Real>(ordinal: usize, tile_rows: usize) -> &'static dyn Ops<T> {
    static ALL: OnceLock<Mutex<Vec<&'static CudaOps>>> = OnceLock::new();
    let mut all = ALL.get_or_init(Mutex::default).lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(o) = all.iter().find(|o| o.ordinal == ordinal && o.tile_rows == tile_rows) {
        return *o;
    }
    let o: &'static CudaOps =
        Box::leak(Box::new(CudaOps { ordinal, tile_rows: tile_rows.max(1), state: Mutex::new(None) }));
    all.push(o);
    o
}

/// A CUDA device's operations and its buffers, opened on first use.
pub(crate) struct CudaOps {
    ordinal: usize,
    tile_rows: usize,
    state: Mutex<Option<State>>,
}

/// What an opened device holds.
struct State {
    stream: Arc<CudaStream>,
    assign_float: CudaFunction,
    assign_double: CudaFunction,
    /// The centres on the device, and the host's copy of what they hold.
    centers: Option<(Vec<f64>, CudaSlice<f64>)>,
    rows_f32: Option<CudaSlice<f32>>,
    rows_f64: Option<CudaSlice<f64>>,
    labels: Option<CudaSlice<u32>>,
    dist: Option<CudaSlice<f64>>,
}

impl CudaOps {
    fn device(&self) -> Device {
        Device::Cuda(self.ordinal)
    }

    /// The device's error in words, as the pass reports it.
    fn failed(&self, why: String) -> crate::Error {
        unavailable(self.device(), why)
    }

    /// Opens the device: its context, stream and the compiled kernels.
    fn open(&self) -> std::result::Result<State, String> {
        let ordinal = self.ordinal;
        super::probe(ordinal)?;
        let source = SOURCES.iter().find(|s| s.name == "kmeans.cu").ok_or("no kmeans.cu kernel source")?;
        let ptx = compile(source)?;
        without_panics(super::INCOMPLETE_DRIVER, || {
            let ctx = CudaContext::new(ordinal).map_err(driver_failed)?;
            let stream = ctx.default_stream();
            let module = ctx.load_module(ptx).map_err(driver_failed)?;
            let assign_float = module.load_function("assign_float").map_err(driver_failed)?;
            let assign_double = module.load_function("assign_double").map_err(driver_failed)?;
            Ok(State {
                stream,
                assign_float,
                assign_double,
                centers: None,
                rows_f32: None,
                rows_f64: None,
                labels: None,
                dist: None,
            })
        })
    }

    /// Assigns the rows of `x` (row-major, `labels.len()` rows of `d`).
    fn assign<T: Real>(
        &self,
        x: &[T],
        centers: &PreparedCenters<T>,
        labels: &mut [u32],
        min_dist: &mut [f64],
    ) -> std::result::Result<(), String> {
        let mut guard = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if guard.is_none() {
            *guard = Some(self.open()?);
        }
        let s = guard.as_mut().ok_or("the device did not open")?;
        let (k, d) = (centers.n_clusters, centers.n_features);
        let tile = self.tile_rows;
        // A panic here (cudarc's length checks, a slice out of range) is a
        // bug in this path, reported as such with its message.
        without_panics("memfit's CUDA assignment failed (a bug: please report it)", || {
            let stream = s.stream.clone();
            // Uploaded when they change (once per iteration), compared in
            // place: no copy per block.
            let host = centers.centers();
            if s.centers.as_ref().is_none_or(|(held, _)| held.as_slice() != host) {
                let dev = stream.clone_htod(host).map_err(driver_failed)?;
                s.centers = Some((host.to_vec(), dev));
            }
            let c = &s.centers.as_ref().ok_or("no centres on the device")?.1;
            if s.labels.is_none() {
                s.labels = Some(stream.alloc_zeros::<u32>(tile).map_err(driver_failed)?);
                s.dist = Some(stream.alloc_zeros::<f64>(tile).map_err(driver_failed)?);
            }
            let (dl, dd) = (s.labels.as_mut().ok_or("no labels")?, s.dist.as_mut().ok_or("no distances")?);
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
                if let Some(xt) = as_f32(xt) {
                    // Reallocated when a job of wider rows comes.
                    if s.rows_f32.as_ref().is_none_or(|b| b.len() < tile * d) {
                        s.rows_f64 = None;
                        s.rows_f32 = Some(stream.alloc_zeros::<f32>(tile * d).map_err(driver_failed)?);
                    }
                    let buf = s.rows_f32.as_mut().ok_or("no row tile")?;
                    stream.memcpy_htod(xt, buf).map_err(driver_failed)?;
                    let mut b = stream.launch_builder(&s.assign_float);
                    b.arg(&*buf).arg(c).arg(&ri).arg(&di).arg(&ki).arg(&mut *dl).arg(&mut *dd);
                    // SAFETY: the arguments match `assign_float`'s
                    // parameters, and every buffer holds `rows` rows.
                    unsafe { b.launch(cfg) }.map_err(driver_failed)?;
                } else if let Some(xt) = as_f64(xt) {
                    if s.rows_f64.as_ref().is_none_or(|b| b.len() < tile * d) {
                        s.rows_f32 = None;
                        s.rows_f64 = Some(stream.alloc_zeros::<f64>(tile * d).map_err(driver_failed)?);
                    }
                    let buf = s.rows_f64.as_mut().ok_or("no row tile")?;
                    stream.memcpy_htod(xt, buf).map_err(driver_failed)?;
                    let mut b = stream.launch_builder(&s.assign_double);
                    b.arg(&*buf).arg(c).arg(&ri).arg(&di).arg(&ki).arg(&mut *dl).arg(&mut *dd);
                    // SAFETY: as above, for `assign_double`.
                    unsafe { b.launch(cfg) }.map_err(driver_failed)?;
                } else {
                    return Err("the compute type is neither float32 nor float64".into());
                }
                stream.memcpy_dtoh(&dl.slice(..rows), l).map_err(driver_failed)?;
                stream.memcpy_dtoh(&dd.slice(..rows), m).map_err(driver_failed)?;
            }
            stream.synchronize().map_err(driver_failed)
        })
    }
}

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

/// The assignments run on the device; the other operations (the bounds'
/// rows, sums, mixtures) are [`Ops`]'s provided ones, on the host.
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
        _tile_rows: usize,
        _k_tile: usize,
        _scratch: &mut [Scratch<T>],
        labels: &mut [u32],
        min_dist: &mut [f64],
    ) -> Result<()> {
        self.assign(x, centers, labels, min_dist).map_err(|why| self.failed(why))
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
