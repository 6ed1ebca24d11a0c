//! Runs the real `memfit` binary on files in temporary folders.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use memfit::io::{write_header, write_npy, Dtype};

fn memfit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memfit")).args(args).output().expect("run memfit")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn p(dir: &Path, name: &str) -> String {
    dir.join(name).to_string_lossy().into_owned()
}

fn write_f64(path: &str, shape: &[usize], values: &[f64]) {
    write_npy(path, Dtype::F64, shape, values, |v: f64, o: &mut Vec<u8>| o.extend_from_slice(&v.to_le_bytes()))
        .unwrap();
}

/// Three well separated blobs on a grid, `n` rows of 2 features.
fn blobs(n: usize) -> Vec<f64> {
    (0..n).flat_map(|i| [(i % 3) as f64 * 100.0 + (i % 7) as f64 * 0.1, (i % 5) as f64 * 0.1]).collect()
}

/// Folder entries (outputs written must appear only on success).
fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    v.sort();
    v
}

#[test]
fn kmeans_writes_all_outputs_and_summary_keys() {
    let t = tempfile::tempdir().unwrap();
    let x = p(t.path(), "x.npy");
    write_f64(&x, &[300, 2], &blobs(300));
    let o = memfit(&[
        "kmeans",
        &x,
        "--n-clusters",
        "3",
        "--labels",
        &p(t.path(), "l.npy"),
        "--centers",
        &p(t.path(), "c.npy"),
        "--summary",
        &p(t.path(), "s.json"),
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(t.path().join("s.json")).unwrap()).unwrap();
    for key in
        ["n_samples", "n_features", "n_clusters", "inertia", "n_iter", "converged", "timings", "peak_rss_bytes", "plan"]
    {
        assert!(s.get(key).is_some(), "summary lacks {key}: {s}");
    }
    assert_eq!(s["n_samples"], 300);
    assert_eq!(s["converged"], true);
    let labels = std::fs::read(t.path().join("l.npy")).unwrap();
    assert_eq!(labels.len(), 128 + 300 * 4);
    // predict with the saved centres gives the same labels.
    let o = memfit(&["predict", &x, "--centers", &p(t.path(), "c.npy"), "--labels", &p(t.path(), "pl.npy")]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read(t.path().join("pl.npy")).unwrap(), labels);
    // No temporary files are left behind.
    assert!(entries(t.path()).iter().all(|e| !e.file_name().unwrap().to_string_lossy().starts_with('.')));
}

#[test]
fn dry_run_prints_plan_and_reads_nothing() {
    let t = tempfile::tempdir().unwrap();
    let x = p(t.path(), "x.npy");
    write_f64(&x, &[1000, 2], &blobs(1000));
    let o =
        memfit(&["kmeans", &x, "-k", "3", "--memory-limit", "4MiB", "--dry-run", "--labels", &p(t.path(), "l.npy")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    for needle in
        ["memory plan for kmeans", "rows per block", "passes over the data", "iterations: read blocks", "total"]
    {
        assert!(out.contains(needle), "{needle} missing from {out}");
    }
    assert_eq!(entries(t.path()).len(), 1);
}

#[test]
fn too_small_limit_names_the_smallest_that_works() {
    let t = tempfile::tempdir().unwrap();
    let x = p(t.path(), "x.npy");
    write_f64(&x, &[5000, 2], &blobs(5000));
    let o = memfit(&["kmeans", &x, "-k", "3000", "--memory-limit", "100KiB"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("memory limit") && e.contains("raise --memory-limit"), "{e}");
    let needed = e.split("needs at least ").nth(1).unwrap().split(' ').next().unwrap().to_string();
    let o = memfit(&["kmeans", &x, "-k", "3000", "--memory-limit", &needed, "--max-iter", "2", "--quiet"]);
    assert!(o.status.success(), "limit {needed}: {}", stderr(&o));
}

#[test]
fn results_do_not_depend_on_threads_or_memory_limit() {
    let t = tempfile::tempdir().unwrap();
    let x = p(t.path(), "x.npy");
    let o = memfit(&[
        "generate",
        "blobs",
        "--n-samples",
        "20000",
        "--n-features",
        "20",
        "--centers",
        "10",
        "--seed",
        "3",
        "--out",
        &x,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let run = |tag: &str, extra: &[&str]| {
        let (l, c) = (p(t.path(), &format!("l{tag}.npy")), p(t.path(), &format!("c{tag}.npy")));
        let mut args = vec!["kmeans", &x, "-k", "10", "--n-init", "2", "--quiet", "--labels", &l, "--centers", &c];
        args.extend_from_slice(extra);
        let o = memfit(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        (std::fs::read(l).unwrap(), std::fs::read(c).unwrap())
    };
    let one = run("1", &["--threads", "1"]);
    let two = run("2", &["--threads", "2"]);
    assert!(one == two, "thread count changed the result");
    let plan = memfit(&["kmeans", &x, "-k", "10", "--n-init", "2", "--memory-limit", "6MiB", "--dry-run"]);
    let plan = String::from_utf8_lossy(&plan.stdout).into_owned();
    assert!(
        plan.contains("blocks per pass") && !plan.contains("(1 blocks per pass)") && !plan.contains("shrunk"),
        "{plan}"
    );
    let small = run("s", &["--memory-limit", "6MiB"]);
    assert!(one == small, "memory limit changed the result");
}

#[test]
fn reads_every_dtype_and_fortran_order() {
    let t = tempfile::tempdir().unwrap();
    let n = 300;
    let values: Vec<f64> = blobs(n).iter().map(|v| v.round()).collect();
    let reference = p(t.path(), "ref.npy");
    write_f64(&reference, &[n, 2], &values);
    let run = |path: &str| {
        let out = format!("{path}.labels.npy");
        let o = memfit(&[
            "kmeans", path, "-k", "3", "--init", "random", "--seed", "1", "--labels", &out, "--quiet", "--dtype",
            "float64",
        ]);
        assert!(o.status.success(), "{path}: {}", stderr(&o));
        std::fs::read(out).unwrap()
    };
    let expected = run(&reference);
    let raw = |descr: &str, fortran: bool, enc: &dyn Fn(f64) -> Vec<u8>| -> String {
        let path = p(t.path(), &format!("{}{}.npy", descr.replace(['<', '>', '|'], "_"), fortran));
        let dict = format!(
            "{{'descr': '{descr}', 'fortran_order': {}, 'shape': ({n}, 2), }}",
            if fortran { "True" } else { "False" }
        );
        let mut bytes = write_header(Dtype::F64, &[n, 2]);
        // Replace the dict, keeping the 64-byte alignment.
        let pad = bytes.len() - 10 - dict.len() - 1;
        bytes.truncate(10);
        bytes.extend_from_slice(dict.as_bytes());
        bytes.extend(std::iter::repeat_n(b' ', pad));
        bytes.push(b'\n');
        let order: Vec<f64> = if fortran {
            (0..2).flat_map(|j| (0..n).map(move |i| (i, j))).map(|(i, j)| values[i * 2 + j]).collect()
        } else {
            values.clone()
        };
        for v in order {
            bytes.extend(enc(v));
        }
        std::fs::write(&path, bytes).unwrap();
        path
    };
    type Encode = Box<dyn Fn(f64) -> Vec<u8>>;
    let cases: Vec<(&str, Encode)> = vec![
        ("|u1", Box::new(|v| vec![v as u8])),
        ("<i2", Box::new(|v| (v as i16).to_le_bytes().to_vec())),
        ("<i4", Box::new(|v| (v as i32).to_le_bytes().to_vec())),
        ("<i8", Box::new(|v| (v as i64).to_le_bytes().to_vec())),
        ("<f2", Box::new(|v| half_bits(v).to_le_bytes().to_vec())),
        ("<f4", Box::new(|v| (v as f32).to_le_bytes().to_vec())),
        (">f8", Box::new(|v| v.to_be_bytes().to_vec())),
        ("<f8", Box::new(|v| v.to_le_bytes().to_vec())),
    ];
    for (descr, enc) in &cases {
        for fortran in [false, true] {
            let path = raw(descr, fortran, enc.as_ref());
            assert_eq!(run(&path), expected, "{descr} fortran={fortran}");
        }
    }
}

/// float16 bits of a small non-negative integer (exact in half precision).
fn half_bits(v: f64) -> u16 {
    if v == 0.0 {
        return 0;
    }
    let e = v.log2().floor() as i32;
    let mant = ((v / 2f64.powi(e) - 1.0) * 1024.0).round() as u16;
    (((e + 15) as u16) << 10) | mant
}

#[test]
fn bad_input_fails_cleanly_without_outputs() {
    let t = tempfile::tempdir().unwrap();
    let good = p(t.path(), "good.npy");
    write_f64(&good, &[100, 2], &blobs(100));
    let mut nan = blobs(100);
    nan[2 * 42 + 1] = f64::NAN;
    let nanf = p(t.path(), "nan.npy");
    write_f64(&nanf, &[100, 2], &nan);
    let one_d = p(t.path(), "oned.npy");
    write_f64(&one_d, &[200], &blobs(100));
    let three_d = p(t.path(), "threed.npy");
    write_f64(&three_d, &[10, 10, 2], &blobs(100));
    let text = p(t.path(), "text.npy");
    std::fs::write(&text, "a,b\n1,2\n").unwrap();
    let truncated = p(t.path(), "trunc.npy");
    let bytes = std::fs::read(&good).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() - 17]).unwrap();
    let cplx = p(t.path(), "complex.npy");
    let mut b = write_header(Dtype::F64, &[4, 1]);
    let at = b.windows(4).position(|w| w == b"<f8'").unwrap();
    b[at + 1] = b'c';
    b.extend(vec![0u8; 64]);
    std::fs::write(&cplx, b).unwrap();
    let init_bad = p(t.path(), "init.npy");
    write_f64(&init_bad, &[3, 3], &[0.0; 9]);
    let neg_w = p(t.path(), "w.npy");
    let mut w = vec![1.0; 100];
    w[7] = -1.0;
    write_f64(&neg_w, &[100], &w);
    let short_w = p(t.path(), "w2.npy");
    write_f64(&short_w, &[99], &[1.0; 99]);
    let missing = p(t.path(), "missing.npy");
    let nodir = p(t.path(), "nodir/l.npy");
    let subdir = p(t.path(), "subdir");
    std::fs::create_dir(&subdir).unwrap();
    let huge = p(t.path(), "huge.npy");
    write_f64(&huge, &[100, 2], &blobs(100).iter().map(|v| v * 1e160).collect::<Vec<_>>());
    let (c_out, s_out) = (p(t.path(), "c_out.npy"), p(t.path(), "s_out.json"));
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec![&missing, "-k", "2"], "No such file"),
        (vec![&text, "-k", "2"], "not a valid .npy"),
        (vec![&truncated, "-k", "2"], "truncated"),
        (vec![&cplx, "-k", "2"], "unsupported dtype <c8"),
        (vec![&one_d, "-k", "2"], "expected a 2-D array"),
        (vec![&three_d, "-k", "2"], "expected a 2-D array"),
        (vec![&nanf, "-k", "2"], "row 42, column 1 is NaN"),
        (vec![&good, "-k", "0"], "n_clusters"),
        (vec![&good, "-k", "101"], "exceeds n_samples = 100"),
        (vec![&good, "-k", "3", "--init", &init_bad], "init centres: shape [3, 3]"),
        (vec![&good, "-k", "3", "--sample-weight", &neg_w], "sample_weight[7] = -1"),
        (vec![&good, "-k", "3", "--sample-weight", &short_w], "sample_weight: shape [99]"),
        (vec![&good, "-k", "3", "--memory-limit", "lots"], "memory_limit"),
        (vec![&good, "-k", "3", "--tol=-1"], "tol"),
        (vec![&good, "-k", "3", "--threads", "0"], "--threads"),
        (vec![&good, "-k", "3", "--init", "kmeans++"], "--init"),
        (vec![&good, "-k", "3", "--labels", &nodir], "does not exist"),
        (vec![&good, "-k", "3", "--labels", &subdir], "not a regular file"),
        (vec![&good, "-k", "3", "--labels", &good], "names the same file"),
        (vec![&good, "-k", "3", "--labels", &c_out], "names the same file"),
        (vec![&good, "-k", "3", "--threads", "100000"], "--threads"),
        (vec![&good, "-k", "-1"], "unexpected argument"),
        (vec![&good, "-k", "3", "--plot-pca"], "--plot"),
        (vec![&huge, "-k", "3"], "squared distances overflow float64"),
    ];
    let before = entries(t.path());
    for (args, needle) in cases {
        let mut full = vec!["kmeans"];
        full.extend(args.iter().copied());
        full.extend(["--centers", &c_out, "--summary", &s_out]);
        let o = memfit(&full);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(needle), "{args:?}: expected {needle:?} in {e}");
        assert_eq!(e.trim().lines().count(), 1, "{args:?}: not one line: {e}");
        assert!(!e.contains("panicked"), "{e}");
        assert_eq!(entries(t.path()), before, "{args:?} left files behind");
    }
}

#[test]
fn full_disk_leaves_no_partial_output() {
    // Needs root to mount a tiny tmpfs; skipped elsewhere.
    let t = tempfile::tempdir().unwrap();
    let mnt = t.path().join("small");
    std::fs::create_dir(&mnt).unwrap();
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(&mnt)
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipped: cannot mount a tmpfs here (needs root)");
        return;
    }
    let x = p(t.path(), "x.npy");
    write_f64(&x, &[50_000, 2], &blobs(50_000));
    let labels = mnt.join("labels.npy");
    let o = memfit(&["kmeans", &x, "-k", "3", "--quiet", "--labels", labels.to_str().unwrap()]);
    let e = stderr(&o);
    let left = entries(&mnt);
    let _ = Command::new("umount").arg(&mnt).status();
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("disk is full") || e.contains("No space"), "{e}");
    assert!(left.is_empty(), "left {left:?}");
}

#[test]
fn generate_is_deterministic_and_validated() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (p(t.path(), "a.npy"), p(t.path(), "b.npy"));
    let gen = |out: &str, limit: &str| {
        memfit(&[
            "generate",
            "blobs",
            "--n-samples",
            "30000",
            "--n-features",
            "4",
            "--centers",
            "5",
            "--seed",
            "9",
            "--out",
            out,
            "--memory-limit",
            limit,
        ])
    };
    assert!(gen(&a, "1GiB").status.success());
    assert!(gen(&b, "5MiB").status.success());
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    let o = memfit(&["generate", "blobs", "--n-samples", "0", "--out", &p(t.path(), "c.npy")]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn default_input_runs() {
    let o = memfit(&["kmeans", "--max-iter", "2", "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("n_samples=2000000") && out.contains("n_clusters=200"), "{out}");
}

#[test]
fn ctrl_c_stops_cleanly_without_outputs() {
    let t = tempfile::tempdir().unwrap();
    let labels = p(t.path(), "labels.npy");
    let child = Command::new(env!("CARGO_BIN_EXE_memfit"))
        .args(["kmeans", "--init", "random", "--n-init", "50", "--tol", "0", "--quiet", "--labels", &labels])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let started = std::time::Instant::now();
    let _ = Command::new("kill").args(["-INT", &child.id().to_string()]).status();
    let out = child.wait_with_output().unwrap();
    assert!(started.elapsed().as_secs_f64() < 2.0, "took {:?} to stop", started.elapsed());
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(entries(t.path()).is_empty(), "left {:?}", entries(t.path()));
}

#[test]
fn gmm_writes_model_folder_summary_and_predicts_the_same_labels() {
    let t = tempfile::tempdir().unwrap();
    let x = p(t.path(), "x.npy");
    write_f64(&x, &[600, 2], &blobs(600));
    let model = p(t.path(), "model");
    let o = memfit(&[
        "gmm",
        &x,
        "--n-components",
        "3",
        "--covariance-type",
        "diag",
        "--model",
        &model,
        "--labels",
        &p(t.path(), "l.npy"),
        "--summary",
        &p(t.path(), "s.json"),
        "--plot",
        &p(t.path(), "lb.png"),
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(t.path().join("s.json")).unwrap()).unwrap();
    for key in ["lower_bound", "lower_bounds", "n_iter", "converged", "bic", "aic", "timings", "peak_rss_bytes", "plan"]
    {
        assert!(s.get(key).is_some(), "summary lacks {key}: {s}");
    }
    let names: Vec<String> =
        entries(Path::new(&model)).iter().map(|e| e.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(names, ["covariances.npy", "means.npy", "model.json", "precisions_cholesky.npy", "weights.npy"]);
    let o = memfit(&["gmm-predict", &x, "--model", &model, "--labels", &p(t.path(), "pl.npy")]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read(t.path().join("pl.npy")).unwrap(), std::fs::read(t.path().join("l.npy")).unwrap());
    assert!(entries(t.path()).iter().all(|e| !e.file_name().unwrap().to_string_lossy().starts_with('.')));
}

#[test]
fn gmm_bad_input_fails_cleanly_without_outputs() {
    let t = tempfile::tempdir().unwrap();
    let x = p(t.path(), "x.npy");
    // Rank-deficient data: the third column is the sum of the first two.
    let v: Vec<f64> = (0..100).flat_map(|i| [(i % 7) as f64, (i % 11) as f64, ((i % 7) + (i % 11)) as f64]).collect();
    write_f64(&x, &[100, 3], &v);
    let model = p(t.path(), "model");
    let labels = p(t.path(), "l.npy");
    let cases: [(&[&str], &str); 5] = [
        (&["--reg-covar", "0"], "ill-defined empirical covariance"),
        (&["--n-components", "101"], "exceeds n_samples = 100"),
        (&["--covariance-type", "full!"], "covariance_type"),
        (&["--init", "nope"], "init_params"),
        (&["--memory-limit", "10KiB"], "memory limit"),
    ];
    for (args, needle) in cases {
        let mut all = vec!["gmm", &x, "--quiet", "--model", &model, "--labels", &labels];
        if !args.contains(&"--n-components") {
            all.extend(["--n-components", "2"]);
        }
        all.extend_from_slice(args);
        let o = memfit(&all);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.starts_with("memfit: error:") && e.contains(needle) && e.lines().count() == 1, "{args:?}: {e}");
        assert_eq!(entries(t.path()), [PathBuf::from(&x)], "{args:?} left outputs");
    }
    // A model path that is an ordinary file is never replaced.
    std::fs::write(&model, b"keep").unwrap();
    let o = memfit(&["gmm", &x, "-k", "2", "--quiet", "--model", &model]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(std::fs::read(&model).unwrap(), b"keep");
}
