//! The compute element type: `f32` or `f64`.

use crate::io::Dtype;

/// A floating-point type the kernels compute in (`f32` or `f64`).
///
/// Statistics (sums, inertia, weights) are always accumulated in `f64`,
/// whatever the compute type.
pub trait Real:
    faer::traits::RealField + Copy + Default + PartialOrd + Send + Sync + std::fmt::Debug + 'static
{
    /// The matching `.npy` dtype.
    const DTYPE: Dtype;
    /// Unit roundoff `u` (half the machine epsilon): round-to-nearest
    /// errs by at most `u` relative.
    const UNIT_ROUNDOFF: f64;
    /// Smallest positive normal value, as `f64`.
    const MIN_POSITIVE: f64;
    /// Largest finite value, as `f64`.
    const MAX: f64;
    /// Rounds an `f64` to this type (round to nearest).
    fn from_f64(v: f64) -> Self;
    /// Widens to `f64` (exact).
    fn to_f64(self) -> f64;
    /// Little-endian bytes of the value, for `.npy` output.
    fn write_le(self, out: &mut Vec<u8>);
}

impl Real for f32 {
    const DTYPE: Dtype = Dtype::F32;
    const UNIT_ROUNDOFF: f64 = f32::EPSILON as f64 / 2.0;
    const MIN_POSITIVE: f64 = f32::MIN_POSITIVE as f64;
    const MAX: f64 = f32::MAX as f64;
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn write_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

impl Real for f64 {
    const DTYPE: Dtype = Dtype::F64;
    const UNIT_ROUNDOFF: f64 = f64::EPSILON / 2.0;
    const MIN_POSITIVE: f64 = f64::MIN_POSITIVE;
    const MAX: f64 = f64::MAX;
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self
    }
    fn write_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}
