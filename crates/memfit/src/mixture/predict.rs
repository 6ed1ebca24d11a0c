//! E-step passes with a fitted mixture: labels, probabilities and
//! per-sample log-likelihoods streamed block by block.

use super::components::{CholWork, Estep};
use super::fitted::Outputs;
use super::grouped::{e_sweep, Factors, GroupWork};
use super::memory::e_pass;
use super::params::{CovarianceType, GmmParams};
use super::pass::Workspace;
use super::plan::plan_gmm;
use super::strategy::Data;
use crate::dtype::Real;
use crate::error::{Error, Result};
use crate::exec::{Observer, Progress, RowSplit};
use crate::io::{BlockReader, Source};
use crate::plan::{Job, Plan};

/// A fitted mixture as a saved model holds it.
#[derive(Debug)]
pub struct MixtureModel<'a> {
    /// Covariance form.
    pub covariance_type: CovarianceType,
    /// Mixture weights, `(n_components,)`.
    pub weights: Vec<f64>,
    /// Means in the data's coordinates, row-major `(n_components, n_features)`.
    pub means: Vec<f64>,
    /// Precision Cholesky factors, shaped as scikit-learn's
    /// `precisions_cholesky_` and seen as a matrix (see
    /// [`super::PrecisionsInit`]).
    pub precisions_cholesky: Source<'a>,
    /// Origin the data are shifted to while read (the fit's, see
    /// [`crate::exec::Scan::shift`]); `None`: one from the means, per
    /// column their weighted mean where every component's mean lies
    /// within a factor of 2 of it, else 0 (so that components far from the
    /// origin keep the digits of their log-densities).
    pub shift: Option<Vec<f64>>,
    /// The fit's final lower bound, when known (a warm start continues from it).
    pub lower_bound: Option<f64>,
}

impl MixtureModel<'_> {
    /// Number of components.
    pub fn n_components(&self) -> usize {
        self.weights.len()
    }

    /// Number of features.
    pub fn n_features(&self) -> usize {
        self.means.len() / self.weights.len().max(1)
    }

    /// Checks that the parameters fit together: at least one component and
    /// one feature, `means` of `(n_components, n_features)`, precision
    /// factors of the shape `covariance_type` gives them, and a shift of
    /// one value per feature.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`model`) naming the shapes found.
    pub fn check(&self) -> Result<()> {
        let (k, d, t) = (self.n_components(), self.n_features(), self.covariance_type);
        let p = &self.precisions_cholesky;
        let found = (p.n_samples(), p.n_features());
        let shift_fits = self.shift.as_ref().is_none_or(|s| s.len() == d);
        if k == 0 || d == 0 || self.means.len() != k * d || found != t.param_matrix(k, d) || !shift_fits {
            return Err(Error::param(
                "model",
                format!(
                    "the parameters do not fit together: covariance_type {} with {k} weights wants means of shape \
                     {:?}, precisions_cholesky of shape {:?}{}; found {} mean values and precisions_cholesky of \
                     {} × {} values{}; hint: give the parameters of one fitted mixture",
                    t.name(),
                    [k, d],
                    t.param_shape(k, d),
                    if shift_fits { String::new() } else { format!(" and a shift of {d} values") },
                    self.means.len(),
                    found.0,
                    found.1,
                    self.shift.as_ref().map_or(String::new(), |s| format!(", a shift of {} values", s.len())),
                ),
            ));
        }
        Ok(())
    }
}

/// Plans [`predict`] of `model` for `job` (its data, compute type, streamed
/// outputs and limit).
///
/// # Errors
/// [`MixtureModel::check`]'s errors; [`Error::DoesNotFit`] as [`plan_gmm`].
pub fn plan_predict(model: &MixtureModel<'_>, job: &Job) -> Result<Plan> {
    model.check()?;
    let params = GmmParams {
        n_components: model.n_components(),
        covariance_type: model.covariance_type,
        ..GmmParams::default()
    };
    plan_gmm(&params, job, true)
}

/// One E-step pass of `model` over `x` (shape `(n_samples, n_features)`,
/// any supported dtype, computed in `T`) within `plan`, run as `split`
/// says (a pass without outputs can run on a [`crate::exec::Remote`]), its
/// log-densities on `backend`: labels,
/// probabilities and log-likelihoods go to `outputs`; returns the mean
/// log-likelihood per sample (scikit-learn's `score`).
///
/// # Errors
/// [`MixtureModel::check`]'s errors; [`Error::ShapeMismatch`] when `x` has
/// another number of features than the model; `precisions_init` errors for bad factors; [`Error::NonFinite`]
/// for a non-finite value in `x`; read errors; whatever `outputs` return;
/// [`Error::Cancelled`]; [`Error::DeviceUnavailable`] for a device error,
/// or for a model held in component groups on a device.
pub fn predict<T: Real>(
    model: &MixtureModel<'_>,
    x: &Source<'_>,
    plan: &Plan,
    split: &RowSplit,
    backend: crate::exec::Backend,
    outputs: &mut Outputs<'_>,
    observer: &mut dyn Observer,
) -> Result<f64> {
    model.check()?;
    let (k, d) = (model.n_components(), model.n_features());
    if x.n_features() != d {
        return Err(Error::ShapeMismatch {
            what: format!("{}", x.name().display()),
            expected: vec![x.n_samples(), d],
            found: vec![x.n_samples(), x.n_features()],
            hint: "predict with data of the features the model was fitted on",
        });
    }
    let shift = model.shift.clone().unwrap_or_else(|| shift_of_means(&model.weights, &model.means, d));
    let means: Vec<f64> = model.means.chunks(d).flat_map(|m| m.iter().zip(&shift).map(|(v, s)| v - s)).collect();
    observer.event(&Progress::Phase("predicting"));
    let observer = &*observer;
    let cancel = observer.cancel();
    if plan.schedule.component_groups.is_some() {
        if !backend.is_cpu() {
            let what = "Gaussian mixtures whose parameters are held in component groups";
            return Err(crate::device::execution_unavailable(backend.device(), what));
        }
        // Factors are read one group at a time; per-row states that do not
        // fit in memory go to the system's temporary folder.
        let mut gw = GroupWork::<T>::new(model.covariance_type, k, x, plan, 0, &crate::io::temp_dir())?;
        let mut data = Data { blocks: BlockReader::<T>::new(x, None, plan.schedule.block_rows), split, shift: &shift };
        let factors = Factors::Source(&model.precisions_cholesky, true);
        let (total, _) = e_sweep(&mut gw, &mut data, &model.weights, &means, factors, outputs, true, &cancel)?;
        return Ok(total / (x.n_samples() - x.first_row()) as f64);
    }
    let mut es = Estep::<T>::new(model.covariance_type, k, d);
    es.set_weights_means(&model.weights, &means);
    let mut work = CholWork::new(0, 0);
    es.set_precisions(&model.precisions_cholesky, true, &mut work, None, 0)?;
    let mut ws = Workspace::<T>::new(
        model.covariance_type,
        k,
        d,
        plan.schedule.block_rows,
        plan.schedule.tile_rows,
        plan.threads,
    )
    .on(backend);
    let mut data = Data { blocks: BlockReader::<T>::new(x, None, plan.schedule.block_rows), split, shift: &shift };
    let total = e_pass(&mut data, &mut ws, &es, outputs, true, &cancel)?;
    Ok(total / (x.n_samples() - x.first_row()) as f64)
}

/// An origin for rows scored against components of `weights` and `means`
/// (`(K, d)`): see [`MixtureModel::shift`].
fn shift_of_means(weights: &[f64], means: &[f64], d: usize) -> Vec<f64> {
    let total: f64 = weights.iter().sum();
    (0..d)
        .map(|j| {
            let column = means.iter().skip(j).step_by(d);
            let centre = weights.iter().zip(column.clone()).map(|(w, m)| w * m).sum::<f64>() / total;
            let (lo, hi) = column.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &m| (lo.min(m), hi.max(m)));
            if centre.is_finite() {
                crate::exec::exact_shift(centre, lo, hi)
            } else {
                0.0
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{ArrayRef, Values};

    fn model<'a>(t: CovarianceType, k: usize, d: usize, prec: &'a [f64], cols: usize) -> MixtureModel<'a> {
        let p = Source::memory(ArrayRef::c_order(Values::F64(prec), prec.len() / cols, cols).unwrap());
        MixtureModel {
            covariance_type: t,
            weights: vec![1.0 / k as f64; k],
            means: vec![0.0; k * d],
            precisions_cholesky: p,
            shift: None,
            lower_bound: None,
        }
    }

    #[test]
    fn parameters_of_another_covariance_type_are_refused_not_read() {
        // Three components of four features; factors of each type, read
        // as each other type (a fitted model after its type was changed).
        let shapes = [
            (CovarianceType::Full, 48, 4),
            (CovarianceType::Tied, 16, 4),
            (CovarianceType::Diag, 12, 4),
            (CovarianceType::Spherical, 3, 1),
        ];
        for &(of, len, cols) in &shapes {
            let prec = vec![1.0; len];
            for &(t, _, _) in &shapes {
                let m = model(t, 3, 4, &prec, cols);
                match m.check() {
                    Ok(()) => assert_eq!(t, of, "{of:?} factors read as {t:?}"),
                    Err(e) => {
                        assert_ne!(t, of);
                        assert!(e.to_string().contains("do not fit together"), "{e}");
                    }
                }
            }
        }
        // Factors of fewer features, means of another length, a shift of
        // another length.
        let prec = vec![1.0; 12];
        assert!(model(CovarianceType::Full, 3, 3, &prec, 2).check().is_err());
        let mut m = model(CovarianceType::Diag, 3, 3, &[1.0; 9], 3);
        m.means.push(0.0);
        assert!(m.check().is_err());
        let mut m = model(CovarianceType::Diag, 3, 3, &[1.0; 9], 3);
        m.shift = Some(vec![0.0; 2]);
        assert!(m.check().is_err());
        m.shift = Some(vec![0.0; 3]);
        assert!(m.check().is_ok());
    }
}
