//! The engine's errors and warnings in the command line's words: remedies
//! name the flags (`--memory-limit`, `--dtype`, `--reg-covar`, ...).

use memfit::{common_remedy, for_example, Remedy, Spelling, Warning};

/// The CLI's [`Spelling`]: remedies that name a setting name its flag.
pub struct Flags;

impl Spelling for Flags {
    fn remedy(&self, remedy: &Remedy) -> String {
        match remedy {
            Remedy::RaiseMemoryLimit { to_bytes } => {
                format!(
                    "raise --memory-limit to at least {} ({to_bytes} bytes)",
                    memfit::plan::format_bytes_up(*to_bytes)
                )
            }
            Remedy::RaiseMemoryLimitBy { by_bytes } => {
                format!("raise --memory-limit by about {} ({by_bytes} bytes)", memfit::plan::format_bytes_up(*by_bytes))
            }
            Remedy::LowerMemoryLimit { to_bytes } => format!(
                "lower --memory-limit to at most {} ({to_bytes} bytes) or free memory",
                memfit::plan::format_bytes_down(*to_bytes)
            ),
            Remedy::ComputeIn(d) => format!("use --dtype {}", d.name()),
            Remedy::CovarianceType(types) => {
                format!("use a --covariance-type with fewer parameters ({})", types.join(", "))
            }
            Remedy::RaiseRegCovar { example } => format!("raise --reg-covar{}", for_example(*example)),
            Remedy::RaiseMaxIter => "raise --max-iter".into(),
            Remedy::RaiseTol => "raise --tol".into(),
            Remedy::OtherInit => "try a different --init or --seed".into(),
            Remedy::RunOnCpu => "use --device cpu".into(),
            Remedy::RaiseDeviceMemoryLimit { to_bytes } => format!(
                "raise --device-memory-limit to at least {} ({to_bytes} bytes)",
                memfit::plan::format_bytes_up(*to_bytes)
            ),
            Remedy::SubtractColumnOffset => {
                "subtract a per-column offset (such as the column's minimum) in the integer type before saving".into()
            }
            other => common_remedy(other),
        }
    }

    fn parameter(&self, name: &str) -> String {
        match name {
            "X" => "INPUT".into(),
            "random_state" => "--seed".into(),
            "init_params" => "--init".into(),
            "batch_size" => "--mini-batch".into(),
            "metric" => "--metric".into(),
            "reassignment_ratio" => "--reassignment-ratio".into(),
            "Q" => "--q".into(),
            "weights" => "--weights".into(),
            "n_clusters"
            | "n_components"
            | "n_init"
            | "max_iter"
            | "tol"
            | "reg_covar"
            | "init"
            | "covariance_type"
            | "memory_limit"
            | "sample_weight"
            | "dtype"
            | "model"
            | "centers"
            | "means_init"
            | "weights_init"
            | "precisions_init"
            | "cluster_std"
            | "n_samples"
            | "n_features"
            | "device"
            | "device_memory_limit" => {
                format!("--{}", name.replace('_', "-"))
            }
            other => other.into(),
        }
    }
}

/// `r` with the input `what` named in its error, unless the error is about
/// the memory limit (which no input causes).
pub fn about_input<T>(r: memfit::Result<T>, what: impl FnOnce() -> String) -> anyhow::Result<T> {
    r.map_err(|e| match e {
        memfit::Error::DoesNotFit { .. } => anyhow::Error::new(e),
        e => anyhow::Error::new(e).context(what()),
    })
}

/// An error and its causes on one line (as anyhow's `{:#}`), engine errors
/// in the CLI's words.
pub fn error_line(e: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in e.chain() {
        let text = match cause.downcast_ref::<memfit::Error>() {
            Some(engine) => engine.render(&Flags).to_string(),
            None => cause.to_string(),
        };
        // A context that names a flag's file (`--centers c.npy`) already says
        // which input the cause is about: the cause's own naming of a flag
        // (`--centers: `, `invalid --centers: `, or the engine's parameter
        // where the command's flag is spelled otherwise) is dropped.
        let named = parts.last().and_then(|p| p.strip_prefix("--")).is_some_and(|p| p.contains(' '));
        let text = match text.strip_prefix("invalid ").unwrap_or(&text).split_once(": ") {
            Some((flag, rest)) if named && flag.starts_with("--") && !flag.contains(' ') => rest.to_string(),
            _ => text,
        };
        parts.push(text);
    }
    parts.join(": ")
}

/// A warning in the CLI's words.
pub fn warning_line(w: &Warning) -> String {
    w.render(&Flags).to_string()
}

/// The warnings in the CLI's words, one string each (for the summary).
pub fn warning_lines(warnings: &[Warning]) -> Vec<String> {
    warnings.iter().map(warning_line).collect()
}

/// Prints each warning on stderr, one line each, except a memory limit
/// above the memory there is, which [`crate::ready`] prints before the work.
pub fn print_warnings(warnings: &[Warning]) {
    for w in warnings.iter().filter(|w| w.kind() != "limit_above_memory") {
        note!("warning: {}", warning_line(w));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;
    use memfit::io::{Dtype, InexactInteger};
    use memfit::warning::Estimator;
    use memfit::{Count, Error};

    #[test]
    fn does_not_fit_names_the_flags() {
        let e = Error::does_not_fit(
            2 << 20,
            1 << 20,
            "k-means".into(),
            vec![Remedy::UseFewer(vec![Count::Threads, Count::Clusters]), Remedy::ComputeIn(Dtype::F32)],
        );
        let line = error_line(&anyhow::Error::from(e));
        assert_eq!(
            line,
            "the job needs at least 2097152 bytes (2.00 MiB) but the memory limit is 1048576 bytes (1.00 MiB): k-means; \
             hint: raise --memory-limit to at least 2.00 MiB (2097152 bytes), use fewer threads or clusters, or use --dtype float32"
        );
    }

    #[test]
    fn context_comes_first_and_causes_keep_their_words() {
        let e = Err::<(), _>(Error::param_with("X", "too wide", vec![Remedy::RaiseRegCovar { example: Some(1e-3) }]))
            .context("--sample-weight")
            .unwrap_err();
        assert_eq!(error_line(&e), "--sample-weight: invalid INPUT: too wide; hint: raise --reg-covar (e.g. 1e-3)");
        let ill = Error::IllDefinedCovariance { component: Some(2), reg_covar: 0.0, float32: false };
        let line = error_line(&ill.into());
        assert!(
            line.starts_with("fitting the mixture failed because component 2 has an ill-defined empirical covariance")
        );
        assert!(line.ends_with("hint: raise --reg-covar (e.g. 1e-3), use fewer components, or rescale the data (e.g. standardise each feature)"), "{line}");
    }

    #[test]
    fn a_context_naming_a_flags_file_names_it_once() {
        // Was "--centers c.npy: invalid --centers: no centres", and scatter's
        // "--weights w.npy: --sample-weight: shape ...".
        let e = Err::<(), _>(Error::param("centers", "no centres (0 rows)")).context("--centers c.npy").unwrap_err();
        assert_eq!(error_line(&e), "--centers c.npy: no centres (0 rows)");
        let e = Err::<(), _>(Error::param("sample_weight", "shape [9]")).context("--weights w.npy").unwrap_err();
        assert_eq!(error_line(&e), "--weights w.npy: shape [9]");
    }

    #[test]
    fn warnings_name_the_flags() {
        let w = Warning::NotConverged { estimator: Estimator::KMeans, max_iter: 5 };
        assert_eq!(
            warning_line(&w),
            "k-means did not converge within max_iter = 5 iterations; hint: raise --max-iter or raise --tol"
        );
        let found = InexactInteger {
            row: 0,
            column: 1,
            value: 16777217,
            dtype: Dtype::I32,
            compute: Dtype::F32,
            exact_up_to: 1 << 24,
        };
        let w = Warning::InexactIntegers { path: "x.npy".into(), found };
        let line = warning_line(&w);
        assert!(
            line.starts_with("x.npy: column 1 holds int32 values beyond 2^24 in magnitude (first: 16777217 at row 0)")
        );
        assert!(line.ends_with("hint: use --dtype float64, which holds integers exactly up to 2^53"), "{line}");
        let w = Warning::IllConditioned { component: Some(0), condition: 1e8, dtype: Dtype::F32 };
        assert!(warning_line(&w).ends_with("hint: use --dtype float64 or raise --reg-covar"));
        for w in [w, Warning::InKMeansInit(Box::new(Warning::FewerClusters { found: 1, n_clusters: 2 }))] {
            assert!(!w.to_string().contains("--"), "{w}");
        }
    }
}
