//! Warnings a job reports beside its result, as data: each kind carries its
//! numbers (iterations, rows, bytes, the component and its condition number,
//! the column and value), never a front-end's words. `Display` words them
//! neutrally; a front-end renders them with [`Warning::render`] and its
//! [`Spelling`], and chooses its warning class by [`Warning::category`] or
//! [`Warning::kind`].

use std::fmt;
use std::path::PathBuf;

use crate::error::{hint, Neutral, Remedy, Spelling};
use crate::io::{Dtype, InexactInteger};

/// Which estimator a warning is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Estimator {
    /// k-means (Lloyd).
    KMeans,
    /// A Gaussian mixture fitted by EM.
    GaussianMixture,
}

/// Whether a warning is about convergence (scikit-learn's
/// `ConvergenceWarning`) or anything else (`UserWarning`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    /// The fit stopped short or found fewer clusters than asked.
    Convergence,
    /// Any other warning.
    User,
    /// Values that became NaN or infinite in arithmetic (NumPy's
    /// `RuntimeWarning`).
    Numeric,
}

/// A warning about a job that still ran.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Warning {
    /// The kept initialisation did not converge within `max_iter` iterations.
    NotConverged {
        /// The estimator.
        estimator: Estimator,
        /// The iteration limit.
        max_iter: usize,
    },
    /// The final assignment left clusters without rows (duplicate points).
    FewerClusters {
        /// Clusters with at least one row.
        found: usize,
        /// Clusters asked for.
        n_clusters: usize,
    },
    /// A component's covariance is so ill-conditioned that its
    /// log-densities lose accuracy in the compute dtype.
    IllConditioned {
        /// The component; `None` for the tied covariance (shared by all).
        component: Option<usize>,
        /// A lower estimate of the condition number.
        condition: f64,
        /// The compute dtype.
        dtype: Dtype,
    },
    /// Initial centres were given with `n_init > 1`: one init is run.
    InitCentersWithNInit {
        /// The `n_init` given.
        n_init: usize,
    },
    /// A warm start runs one initialisation (the model's): `n_init` is ignored.
    WarmStartWithNInit {
        /// The `n_init` given.
        n_init: usize,
    },
    /// An input held integers the compute dtype rounds.
    InexactIntegers {
        /// The input (a path, or `<memory>`).
        path: PathBuf,
        /// The first such value, its column and row, and the dtypes.
        found: InexactInteger,
    },
    /// A warning from the k-means run that initialised a mixture.
    InKMeansInit(Box<Warning>),
    /// The memory limit is above the memory available to the process (the
    /// machine's, or its cgroup's), and the plan needs more than that: the
    /// job may swap or be killed for lack of memory.
    LimitAboveMemory {
        /// The memory limit, in bytes.
        limit_bytes: u64,
        /// Bytes the plan needs.
        needed_bytes: u64,
        /// Bytes of memory available.
        available_bytes: u64,
    },
    /// Array evaluation turned finite operands into NaN or infinite values:
    /// `count` values raised `exception`.
    FloatingPoint {
        /// Which IEEE 754 exception.
        exception: FpException,
        /// How many values.
        count: u64,
    },
}

/// The IEEE 754 floating-point exceptions that array evaluation counts
/// (those NumPy reports and `np.errstate` controls; underflow is not
/// counted, as NumPy ignores it by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum FpException {
    /// A finite result too large for its dtype became infinite (products,
    /// sums, powers, exponentials, casts to a smaller float).
    Overflow,
    /// A finite nonzero value divided by zero, or a logarithm of zero; for
    /// integers, a division or remainder by zero (whose result is 0).
    DivideByZero,
    /// An operation without a defined result gave NaN (0 / 0, a remainder
    /// by zero, the square root or logarithm of a negative number).
    Invalid,
}

impl FpException {
    /// Every exception, in the order of [`FpException::index`].
    pub const ALL: [FpException; 3] = [FpException::Overflow, FpException::DivideByZero, FpException::Invalid];

    /// Position in [`FpException::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

impl Warning {
    /// The kind as a stable snake-case name (`"not_converged"`,
    /// `"fewer_clusters"`, `"ill_conditioned"`,
    /// `"init_centers_with_n_init"`, `"warm_start_with_n_init"`,
    /// `"inexact_integers"`, `"kmeans_init"`, `"floating_point"`,
    /// `"limit_above_memory"`), for front-ends that treat
    /// some kinds apart.
    pub fn kind(&self) -> &'static str {
        match self {
            Warning::NotConverged { .. } => "not_converged",
            Warning::FewerClusters { .. } => "fewer_clusters",
            Warning::IllConditioned { .. } => "ill_conditioned",
            Warning::InitCentersWithNInit { .. } => "init_centers_with_n_init",
            Warning::WarmStartWithNInit { .. } => "warm_start_with_n_init",
            Warning::InexactIntegers { .. } => "inexact_integers",
            Warning::InKMeansInit(_) => "kmeans_init",
            Warning::FloatingPoint { .. } => "floating_point",
            Warning::LimitAboveMemory { .. } => "limit_above_memory",
        }
    }

    /// Convergence for a fit that stopped at `max_iter` or found fewer
    /// clusters than asked, User for the rest.
    pub fn category(&self) -> Category {
        match self {
            Warning::NotConverged { .. } | Warning::FewerClusters { .. } => Category::Convergence,
            Warning::InKMeansInit(w) => w.category(),
            Warning::FloatingPoint { .. } => Category::Numeric,
            _ => Category::User,
        }
    }

    /// What to do about it (empty when nothing needs doing).
    pub fn remedies(&self) -> Vec<Remedy> {
        match self {
            Warning::NotConverged { estimator: Estimator::KMeans, .. } => vec![Remedy::RaiseMaxIter, Remedy::RaiseTol],
            Warning::NotConverged { estimator: Estimator::GaussianMixture, .. } => {
                vec![Remedy::OtherInit, Remedy::RaiseMaxIter, Remedy::RaiseTol]
            }
            Warning::IllConditioned { dtype, .. } => {
                let mut r = Vec::new();
                if *dtype == Dtype::F32 {
                    r.push(Remedy::ComputeIn(Dtype::F64));
                }
                r.push(Remedy::RaiseRegCovar { example: None });
                r
            }
            Warning::InexactIntegers { found, .. } if found.compute == Dtype::F32 => {
                vec![Remedy::ComputeIn(Dtype::F64)]
            }
            Warning::InexactIntegers { .. } => vec![Remedy::SubtractColumnOffset],
            Warning::InKMeansInit(w) => w.remedies(),
            Warning::LimitAboveMemory { available_bytes, .. } => {
                vec![Remedy::LowerMemoryLimit { to_bytes: *available_bytes }]
            }
            _ => Vec::new(),
        }
    }

    /// The message with its remedies in `spelling`'s words (`Display` is
    /// `render(&Neutral)`).
    pub fn render<'w>(&'w self, spelling: &'w dyn Spelling) -> RenderedWarning<'w> {
        RenderedWarning { warning: self, spelling }
    }

    fn write(&self, f: &mut fmt::Formatter<'_>, s: &dyn Spelling) -> fmt::Result {
        let h = hint(&self.remedies(), s);
        match self {
            Warning::NotConverged { estimator: Estimator::KMeans, max_iter } => {
                write!(f, "k-means did not converge within max_iter = {max_iter} iterations; hint: {h}")
            }
            Warning::NotConverged { estimator: Estimator::GaussianMixture, max_iter } => write!(
                f,
                "best performing initialization did not converge within max_iter = {max_iter} iterations; hint: {h} (or check for degenerate data)"
            ),
            Warning::FewerClusters { found, n_clusters } => write!(
                f,
                "number of distinct clusters ({found}) found smaller than n_clusters ({n_clusters}); possibly due to duplicate points in X: {}",
                match n_clusters - found {
                    1 => "1 centre is a duplicate or has no rows".to_string(),
                    n => format!("{n} centres are duplicates or have no rows"),
                }
            ),
            Warning::IllConditioned { component, condition, dtype } => write!(
                f,
                "{} has a condition number of at least {condition:.2e}, near 1/eps of {}: its log-densities lose accuracy; hint: {h}",
                component.map_or_else(|| "the tied covariance".to_string(), |c| format!("component {c}'s covariance")),
                dtype.name()
            ),
            Warning::InitCentersWithNInit { .. } => {
                f.write_str("explicit initial centres given: performing only one init (n_init = 1)")
            }
            Warning::WarmStartWithNInit { n_init } => write!(
                f,
                "a warm start runs one initialisation (the saved model); n_init = {n_init} is ignored"
            ),
            Warning::InexactIntegers { path, found } => {
                let why = if found.compute == Dtype::F32 {
                    format!("{h}, which holds integers exactly up to 2^53")
                } else {
                    format!("float64 holds integers exactly only up to 2^53: {h}")
                };
                write!(f, "{}: {found}; hint: {why}", path.display())
            }
            Warning::InKMeansInit(w) => {
                f.write_str("k-means initialisation: ")?;
                w.write(f, s)
            }
            Warning::LimitAboveMemory { limit_bytes, needed_bytes, available_bytes } => {
                let fb = crate::units::format_bytes;
                write!(
                    f,
                    "the memory limit ({}) is above the memory available ({}, the machine's or its cgroup's) and the job plans {} ({needed_bytes} bytes): it may swap or be killed for lack of memory; hint: {h}",
                    fb(*limit_bytes),
                    fb(*available_bytes),
                    fb(*needed_bytes)
                )
            }
            Warning::FloatingPoint { exception: FpException::Overflow, count } => write!(
                f,
                "overflow encountered in {count} values during evaluation: finite operands gave an infinite result (a product, sum, power or exponential too large for the dtype, or a cast to a smaller float); hint: compute in a wider dtype or check the operands' ranges"
            ),
            Warning::FloatingPoint { exception: FpException::DivideByZero, count } => write!(
                f,
                "divide by zero encountered in {count} values during evaluation (a division, integer floor division or remainder by zero, or a logarithm of zero); hint: check the divisors, or mask them with where"
            ),
            Warning::FloatingPoint { exception: FpException::Invalid, count } => write!(
                f,
                "invalid value encountered in {count} values during evaluation: operands that were not NaN gave NaN (0 / 0, inf - inf, 0 * inf, a remainder by zero, the sine of inf, the square root or logarithm of a negative number), or a float cast to an integer dtype was NaN, infinite or out of its range; hint: check the operands' domains"
            ),
        }
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, &Neutral)
    }
}

/// A [`Warning`] worded by a [`Spelling`] (see [`Warning::render`]).
pub struct RenderedWarning<'w> {
    warning: &'w Warning,
    spelling: &'w dyn Spelling,
}

impl fmt::Display for RenderedWarning<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.warning.write(f, self.spelling)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neutral_words_name_no_flag() {
        let all = [
            Warning::NotConverged { estimator: Estimator::KMeans, max_iter: 3 },
            Warning::NotConverged { estimator: Estimator::GaussianMixture, max_iter: 3 },
            Warning::IllConditioned { component: Some(1), condition: 1e7, dtype: Dtype::F32 },
            Warning::InKMeansInit(Box::new(Warning::FewerClusters { found: 2, n_clusters: 3 })),
        ];
        for w in &all {
            let text = w.to_string();
            assert!(!text.contains("--"), "{text}");
        }
        assert_eq!(
            all[0].to_string(),
            "k-means did not converge within max_iter = 3 iterations; hint: raise max_iter or raise tol"
        );
        assert!(all[2].to_string().ends_with("hint: compute in float64 or raise reg_covar"), "{}", all[2]);
        assert_eq!(all[3].category(), Category::Convergence);
        assert_eq!(all[3].kind(), "kmeans_init");
        assert!(all[3].to_string().ends_with(": 1 centre is a duplicate or has no rows"), "{}", all[3]);
        let two = Warning::FewerClusters { found: 1, n_clusters: 3 }.to_string();
        assert!(two.ends_with(": 2 centres are duplicates or have no rows"), "{two}");
    }

    #[test]
    fn a_spelling_words_the_remedies_only() {
        struct Flags;
        impl Spelling for Flags {
            fn remedy(&self, r: &Remedy) -> String {
                match r {
                    Remedy::RaiseMaxIter => "RAISE MAX_ITER".into(),
                    other => Neutral.remedy(other),
                }
            }
        }
        let w = Warning::NotConverged { estimator: Estimator::KMeans, max_iter: 3 };
        assert_eq!(
            w.render(&Flags).to_string(),
            "k-means did not converge within max_iter = 3 iterations; hint: RAISE MAX_ITER or raise tol"
        );
    }
}
