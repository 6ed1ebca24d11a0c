//! Planned against measured peak memory of `transform` (the distances to
//! every centre, Python's `KMeans.transform`), the one job whose plan no
//! front end prints: the other job kinds are measured against their
//! `--dry-run` plans through the CLI in `tests/python/test_memory.py`.
//!
//! The job runs in a child process (this test binary again, with
//! [`CHILD`] set) on a `.npy` file 6× the memory limit; the child reports its
//! peak resident memory (`VmHWM`), which must stay within the plan's total
//! plus a fixed 64 MiB for code, thread stacks and allocator slack.

use std::path::Path;
use std::process::Command;

use memfit::cluster::{plan_transform, transform};
use memfit::exec::{Cancel, RunOptions};
use memfit::generate::Blobs;
use memfit::io::{read_matrix_f64, Source};
use memfit::plan::Job;

const MIB: u64 = 1 << 20;
/// Fixed overhead allowed above the plan, as in the Python memory tests.
const SLACK: u64 = 64 * MIB;
const LIMIT: u64 = 16 * MIB;
const N_CLUSTERS: usize = 16;
/// Set to the input's path in the child process.
const CHILD: &str = "MEMFIT_PEAK_MEMORY_CHILD";

/// A line of `/proc/self/status`, in bytes.
fn status(key: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = text.lines().find(|l| l.starts_with(&format!("{key}:"))).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

/// Resets `VmHWM` to the current resident size.
fn reset_peak() {
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
}

/// In the child: transforms the file as float64 and as float32, each after a
/// peak reset, and prints `compute plan_total baseline peak` per run.
fn child(path: &Path) {
    let x = Source::open_matrix(path).unwrap();
    // Centres: the first rows, read whole (small).
    let (first, _, d) = read_matrix_f64(path.with_file_name("centers.npy")).unwrap();
    assert_eq!(first.len(), N_CLUSTERS * d);
    for (name, bytes) in [("float64", 8), ("float32", 4)] {
        let plan = plan_transform(&Job::new(&x, None, bytes, 0, &RunOptions::with_limit(LIMIT)), N_CLUSTERS).unwrap();
        assert!(plan.schedule.n_blocks > 1, "{plan}");
        reset_peak();
        let base = status("VmRSS");
        let (mut rows, mut sum) = (0usize, 0.0);
        let mut out = |block: &[f64]| {
            rows += block.len() / N_CLUSTERS;
            sum += block.iter().sum::<f64>();
            Ok(())
        };
        if bytes == 8 {
            transform::<f64>(&x, &first, N_CLUSTERS, &plan, &mut out, &()).unwrap();
        } else {
            transform::<f32>(&x, &first, N_CLUSTERS, &plan, &mut out, &()).unwrap();
        }
        let peak = status("VmHWM");
        assert!(rows == x.n_samples() && sum.is_finite() && sum > 0.0);
        println!("PEAK {name} {} {base} {peak}", plan.total_bytes);
    }
}

#[test]
fn transform_peak_rss_stays_within_its_plan() {
    if !cfg!(target_os = "linux") {
        eprintln!("skipped: reads /proc/self/status");
        return;
    }
    if let Some(path) = std::env::var_os(CHILD) {
        return child(Path::new(&path));
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("X.npy");
    // 1,500,000 × 8 float64: 96 MB, 6× the limit.
    let blobs = Blobs { n_samples: 1_500_000, n_features: 8, centers: 8, seed: 3, ..Default::default() };
    blobs.write_npy::<f64>(&path, None, 65_536, &Cancel::new()).unwrap();
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(size >= 5 * LIMIT, "{size}");
    let centers: Vec<f64> = Blobs { n_samples: N_CLUSTERS, ..blobs.clone() }.to_vec::<f64>();
    memfit::io::write_matrix(path.with_file_name("centers.npy"), &centers, N_CLUSTERS, 8).unwrap();

    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "transform_peak_rss_stays_within_its_plan", "--nocapture", "--test-threads", "1"])
        .env(CHILD, &path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "child failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    // Each line the child prints (after libtest's "test … " on the first).
    let runs: Vec<Vec<&str>> =
        stdout.lines().filter_map(|l| l.split_once("PEAK ")).map(|(_, l)| l.split(' ').collect()).collect();
    assert_eq!(runs.len(), 2, "{stdout}");
    for run in runs {
        let [name, plan, base, peak] = run[..] else { panic!("{run:?}") };
        let (plan, base, peak): (u64, u64, u64) = (plan.parse().unwrap(), base.parse().unwrap(), peak.parse().unwrap());
        eprintln!(
            "transform ({name}): planned {:.1} MiB, peak RSS {:.1} MiB (baseline {:.1} MiB)",
            plan as f64 / MIB as f64,
            peak as f64 / MIB as f64,
            base as f64 / MIB as f64
        );
        assert!(plan <= LIMIT);
        assert!(peak <= plan + SLACK, "transform ({name}): peak RSS {peak} B > planned {plan} B + 64 MiB");
    }
}
