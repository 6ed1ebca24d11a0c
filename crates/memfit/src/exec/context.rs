//! What a run carries besides its options: the cancellation token, the
//! progress stream and the backend that computes ([`Context`]).

use super::{Cancel, Observer, Progress};
use crate::backend::{Cpu, OpBytes, Ops};
use crate::Real;

/// Where a run's arithmetic happens: the passes hold it and call its
/// operations (assignment, per-cluster sums, log-density tiles,
/// log-sum-exp, weighted scatter) through the engine's backend seam.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// The CPU threads of the run's pool ([`super::install`]).
    #[default]
    Cpu,
    /// A CUDA device (the `cuda` feature): nearest-centre assignments and
    /// a mixture's log-densities run on it, streamed in tiles of
    /// `tile_rows` rows (its device plan's); the other operations run on
    /// the host. Made by [`crate::device::backend`].
    #[cfg(feature = "cuda")]
    Cuda {
        /// The device's ordinal.
        ordinal: usize,
        /// Rows per streamed tile.
        tile_rows: usize,
    },
}

impl Backend {
    /// The backend's name, as plans print it (`"cpu"`).
    pub fn name(self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            #[cfg(feature = "cuda")]
            Backend::Cuda { .. } => "cuda",
        }
    }

    /// The device the arithmetic happens on.
    pub fn device(self) -> crate::device::Device {
        match self {
            Backend::Cpu => crate::device::Device::Cpu,
            #[cfg(feature = "cuda")]
            Backend::Cuda { ordinal, .. } => crate::device::Device::Cuda(ordinal),
        }
    }

    /// Whether the arithmetic happens on the host.
    pub fn is_cpu(self) -> bool {
        self == Backend::Cpu
    }

    /// The backend's operations on rows of `T`.
    pub(crate) fn ops<T: Real>(self) -> &'static dyn Ops<T> {
        match self {
            Backend::Cpu => &Cpu,
            #[cfg(feature = "cuda")]
            Backend::Cuda { ordinal, tile_rows } => crate::device::cuda::ops(ordinal, tile_rows),
        }
    }

    /// The page-locked host buffers a device backend holds for its tiles in
    /// flight, named, for rows of `n_features` values of `compute_bytes`
    /// bytes whose results take `out_per_row` bytes: `None` on the CPU.
    pub(crate) fn pinned_host_bytes(
        self,
        n_features: usize,
        compute_bytes: usize,
        out_per_row: usize,
    ) -> Option<(String, u64)> {
        match self {
            Backend::Cpu => {
                let _ = (n_features, compute_bytes, out_per_row);
                None
            }
            #[cfg(feature = "cuda")]
            Backend::Cuda { tile_rows, .. } => {
                let t = crate::device::plan::TILES_IN_FLIGHT;
                let per_row = n_features.saturating_mul(compute_bytes).saturating_add(out_per_row);
                let bytes = (t as u64).saturating_mul(tile_rows as u64).saturating_mul(per_row as u64);
                Some((
                    format!("pinned host buffers of the device's tiles ({t} × {tile_rows} rows × {per_row} B)"),
                    bytes,
                ))
            }
        }
    }

    /// [`Ops::assign_bytes`] for a compute type of `compute_bytes` bytes
    /// (as planners count it, before the compute type is a Rust type).
    pub(crate) fn assign_bytes(
        self,
        tile_rows: usize,
        n_clusters: usize,
        k_tile: usize,
        n_features: usize,
        compute_bytes: usize,
    ) -> OpBytes {
        self.ops::<f64>().assign_bytes(tile_rows, n_clusters, k_tile, n_features, compute_bytes)
    }
}

/// A run's context: its cancellation token (the observer's, checked by
/// every row pass and array stage), its progress stream (the observer) and
/// its backend. Threads come from [`super::install`], sized by the run's
/// options.
pub struct Context<'o> {
    /// The run's cancellation token.
    pub cancel: Cancel,
    /// Where the arithmetic happens.
    pub backend: Backend,
    observer: &'o mut dyn Observer,
}

impl std::fmt::Debug for Context<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").field("cancel", &self.cancel).field("backend", &self.backend).finish()
    }
}

impl<'o> Context<'o> {
    /// The context of a run reporting to `observer` (and cancelled by its
    /// token), on the CPU.
    pub fn new(observer: &'o mut dyn Observer) -> Self {
        Context { cancel: observer.cancel(), backend: Backend::Cpu, observer }
    }

    /// Reports `event` to the observer.
    pub fn event(&mut self, event: &Progress<'_>) {
        self.observer.event(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Phases(Vec<String>, Cancel);
    impl Observer for Phases {
        fn event(&mut self, e: &Progress<'_>) {
            if let Progress::Phase(p) = e {
                self.0.push((*p).to_string());
            }
        }
        fn cancel(&self) -> Cancel {
            self.1.clone()
        }
    }

    #[test]
    fn carries_the_observers_token_and_the_cpu_backend() {
        let mut obs = Phases(Vec::new(), Cancel::new());
        let token = obs.1.clone();
        let mut ctx = Context::new(&mut obs);
        assert_eq!(ctx.backend, Backend::Cpu);
        assert_eq!(ctx.backend.name(), "cpu");
        ctx.event(&Progress::Phase("stage 1 of 1"));
        token.cancel();
        assert!(ctx.cancel.is_cancelled());
        assert_eq!(obs.0, vec!["stage 1 of 1"]);
    }
}
