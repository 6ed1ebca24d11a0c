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
fn default_threads_honour_omp_num_threads() {
    let t = tempfile::tempdir().unwrap();
    let x = p(t.path(), "x.npy");
    write_f64(&x, &[1000, 2], &blobs(1000));
    let plan = |omp: Option<&str>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_memfit"));
        c.args(["kmeans", &x, "-k", "3", "--memory-limit", "4MiB", "--dry-run"]).env_remove("RAYON_NUM_THREADS");
        match omp {
            Some(v) => c.env("OMP_NUM_THREADS", v),
            None => c.env_remove("OMP_NUM_THREADS"),
        };
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    // As joblib's process workers and batch schedulers set it.
    assert!(plan(Some("1")).contains("threads: 1\n"), "{}", plan(Some("1")));
    let cpus = memfit::plan::available_cpus();
    assert!(plan(None).contains(&format!("threads: {cpus}\n")), "{}", plan(None));
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

/// `--mini-batch`: steps on batches drawn by the seed, then one pass for
/// labels that are the written centres' nearest; the same bits for any
/// thread count and memory limit, weighted or not.
#[test]
fn mini_batch_runs_are_reproducible_and_labels_match_centres() {
    let t = tempfile::tempdir().unwrap();
    let x = p(t.path(), "x.npy");
    let args = ["generate", "blobs", "--n-samples", "30000", "--n-features", "4", "--centers", "12", "--seed", "5"];
    let o = memfit(&[&args[..], &["--out", &x]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let w = p(t.path(), "w.npy");
    write_f64(&w, &[30000], &(0..30000).map(|i| f64::from(i % 4)).collect::<Vec<_>>());
    let run = |tag: &str, extra: &[&str]| {
        let (l, c, s) =
            (p(t.path(), &format!("l{tag}.npy")), p(t.path(), &format!("c{tag}.npy")), p(t.path(), "s.json"));
        let mut args = vec!["kmeans", &x, "-k", "12", "--mini-batch", "256", "--quiet", "--labels", &l];
        args.extend_from_slice(&["--centers", &c, "--summary", &s]);
        args.extend_from_slice(extra);
        let o = memfit(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        let summary: serde_json::Value = serde_json::from_slice(&std::fs::read(s).unwrap()).unwrap();
        (std::fs::read(l).unwrap(), std::fs::read(c).unwrap(), summary)
    };
    let one = run("1", &["--threads", "1"]);
    let two = run("2", &["--threads", "2", "--memory-limit", "3MiB"]);
    assert!(one.0 == two.0 && one.1 == two.1, "threads or the limit changed the result");
    let steps = one.2["n_steps"].as_u64().unwrap();
    assert!(steps > 1 && steps <= 300 * 30000 / 256, "{steps}");
    assert_eq!(one.2["batch_size"], 256);
    // The labels are the nearest written centres.
    let read = |path: &[u8], skip_to: usize| path[skip_to..].to_vec();
    let header = |b: &[u8]| 10 + u16::from_le_bytes([b[8], b[9]]) as usize;
    let (lb, cb) = (&one.0, &one.1);
    let labels: Vec<i32> = read(lb, header(lb)).chunks(4).map(|b| i32::from_le_bytes(b.try_into().unwrap())).collect();
    let centres: Vec<f64> = read(cb, header(cb)).chunks(8).map(|b| f64::from_le_bytes(b.try_into().unwrap())).collect();
    let xb = std::fs::read(&x).unwrap();
    let values: Vec<f64> =
        read(&xb, header(&xb)).chunks(8).map(|b| f64::from_le_bytes(b.try_into().unwrap())).collect();
    for (row, &label) in values.chunks(4).zip(&labels).step_by(97) {
        let d = |c: &[f64]| row.iter().zip(c).map(|(a, b)| (a - b) * (a - b)).sum::<f64>();
        let best = centres.chunks(4).map(d).fold(f64::INFINITY, f64::min);
        assert_eq!(d(&centres[label as usize * 4..][..4]), best);
    }
    // Unit weights draw the rows no weights draw.
    let ones = p(t.path(), "ones.npy");
    write_f64(&ones, &[30000], &[1.0; 30000]);
    let unit = run("u", &["--sample-weight", &ones, "--threads", "1"]);
    assert!(unit.0 == one.0 && unit.1 == one.1, "unit weights changed a mini-batch fit");
    // The smallest limit a refusal names works.
    let o = memfit(&["kmeans", &x, "-k", "12", "--mini-batch", "4096", "--memory-limit", "1"]);
    let e = stderr(&o);
    let needed = e.split("needs at least ").nth(1).and_then(|s| s.split(' ').next()).expect("a size").to_string();
    let o = memfit(&["kmeans", &x, "-k", "12", "--mini-batch", "4096", "--max-iter", "1", "--memory-limit", &needed]);
    assert!(o.status.success(), "{needed}: {}", stderr(&o));
    // Weighted, float32: reproducible too, and a different run.
    let a = run("w1", &["--sample-weight", &w, "--dtype", "float32", "--threads", "1"]);
    let b = run("w2", &["--sample-weight", &w, "--dtype", "float32", "--threads", "2", "--memory-limit", "3MiB"]);
    assert!(a.0 == b.0 && a.1 == b.1, "threads or the limit changed a weighted result");
    assert!(a.1 != one.1);
}

/// `--metric cosine`: unit centres, labels of the largest cosine that
/// `predict --metric cosine` repeats, scale-free rows, the summary names it.
#[test]
fn cosine_runs_spherical_k_means() {
    let t = tempfile::tempdir().unwrap();
    let (x, x2) = (p(t.path(), "x.npy"), p(t.path(), "x2.npy"));
    let rows: Vec<f64> = (0..3000)
        .flat_map(|i| {
            let s = 1.0 + (i % 13) as f64;
            let a = ((i as f64) * 0.618_033_988_749).fract() * 0.3;
            match i % 3 {
                0 => [s, s * a, 0.1 * s],
                1 => [s * a, s, -0.2 * s],
                _ => [-s, 0.3 * s * a, s],
            }
        })
        .collect();
    write_f64(&x, &[3000, 3], &rows);
    write_f64(&x2, &[3000, 3], &rows.iter().map(|v| v * 1024.0).collect::<Vec<_>>());
    let fit = |input: &str, tag: &str| {
        let (l, c, s) =
            (p(t.path(), &format!("l{tag}.npy")), p(t.path(), &format!("c{tag}.npy")), p(t.path(), "s.json"));
        let o = memfit(&[
            "kmeans",
            input,
            "-k",
            "3",
            "--metric",
            "cosine",
            "--quiet",
            "--labels",
            &l,
            "--centers",
            &c,
            "--summary",
            &s,
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let summary: serde_json::Value = serde_json::from_slice(&std::fs::read(s).unwrap()).unwrap();
        (std::fs::read(&l).unwrap(), std::fs::read(&c).unwrap(), summary, c)
    };
    let a = fit(&x, "a");
    let b = fit(&x2, "b");
    assert!(a.0 == b.0 && a.1 == b.1, "a power-of-two scale changed a cosine fit");
    assert_eq!(a.2["metric"], "cosine");
    let centres: Vec<f64> =
        a.1[a.1.len() - 72..].chunks(8).map(|b| f64::from_le_bytes(b.try_into().unwrap())).collect();
    for c in centres.chunks(3) {
        assert!((c.iter().map(|v| v * v).sum::<f64>() - 1.0).abs() < 1e-15, "{c:?}");
    }
    let l = p(t.path(), "pl.npy");
    let o = memfit(&["predict", &x2, "--centers", &a.3, "--labels", &l, "--metric", "cosine", "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::read(&l).unwrap() == a.0, "predict --metric cosine gave other labels");
    // Centres of any length are scaled to unit norm first.
    let long = p(t.path(), "long.npy");
    write_f64(&long, &[3, 3], &centres.iter().map(|v| v * 7.0).collect::<Vec<_>>());
    let o = memfit(&["predict", &x, "--centers", &long, "--labels", &l, "--metric", "cosine", "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::read(&l).unwrap() == a.0, "predict --metric cosine did not scale its centres");
    // Mini-batch steps keep unit centres too, and find the same three directions.
    let (mc, ml) = (p(t.path(), "mc.npy"), p(t.path(), "ml.npy"));
    let o = memfit(&[
        "kmeans",
        &x,
        "-k",
        "3",
        "--metric",
        "cosine",
        "--mini-batch",
        "100",
        "--quiet",
        "--centers",
        &mc,
        "--labels",
        &ml,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mb = std::fs::read(&mc).unwrap();
    let mb: Vec<f64> = mb[mb.len() - 72..].chunks(8).map(|b| f64::from_le_bytes(b.try_into().unwrap())).collect();
    for c in mb.chunks(3) {
        assert!((c.iter().map(|v| v * v).sum::<f64>() - 1.0).abs() < 1e-15, "{c:?}");
        let nearest = centres.chunks(3).map(|f| c.iter().zip(f).map(|(a, b)| a * b).sum::<f64>()).fold(-1.0, f64::max);
        assert!(nearest > 0.99, "{c:?} is no full fit's direction");
    }
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
        ("<u4", Box::new(|v| (v as u32).to_le_bytes().to_vec())),
        (">u8", Box::new(|v| (v as u64).to_be_bytes().to_vec())),
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
    let zero_w = p(t.path(), "w0.npy");
    write_f64(&zero_w, &[100], &[0.0; 100]);
    let tiny_w = p(t.path(), "w_tiny.npy");
    write_f64(&tiny_w, &[100], &[5e-324; 100]);
    let short_w = p(t.path(), "w2.npy");
    write_f64(&short_w, &[99], &[1.0; 99]);
    let missing = p(t.path(), "missing.npy");
    let nodir = p(t.path(), "nodir/l.npy");
    let subdir = p(t.path(), "subdir");
    std::fs::create_dir(&subdir).unwrap();
    let huge = p(t.path(), "huge.npy");
    write_f64(&huge, &[100, 2], &blobs(100).iter().map(|v| v * 1e160).collect::<Vec<_>>());
    let tiny = p(t.path(), "tiny.npy");
    write_f64(&tiny, &[100, 2], &blobs(100).iter().map(|v| v * 1e-170).collect::<Vec<_>>());
    let (c_out, s_out) = (p(t.path(), "c_out.npy"), p(t.path(), "s_out.json"));
    let in_file = format!("{good}/l.npy");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec![&missing, "-k", "2"], "No such file"),
        (vec![&text, "-k", "2"], "not a valid .npy"),
        (vec![&truncated, "-k", "2"], "truncated"),
        (vec![&cplx, "-k", "2"], "unsupported dtype <c8"),
        (vec![&one_d, "-k", "2"], "expected a 2-D array"),
        (vec![&three_d, "-k", "2"], "expected a 2-D array"),
        (vec![&nanf, "-k", "2"], "row 42, column 1 is NaN"),
        (vec![&good, "-k", "0"], "invalid --n-clusters"),
        (vec![&good, "-k", "101"], "exceeds n_samples = 100"),
        (vec![&good, "-k", "3", "--init", &init_bad], "--init: shape [3, 3]"),
        (vec![&good, "-k", "3", "--sample-weight", &neg_w], "sample_weight[7] = -1"),
        (vec![&good, "-k", "3", "--sample-weight", &tiny_w], "the largest weight is 5e-324, below float64's smallest"),
        (vec![&good, "-k", "3", "--sample-weight", &short_w], "--sample-weight: shape [99]"),
        (vec![&good, "-k", "3", "--memory-limit", "lots"], "invalid --memory-limit"),
        (vec![&good, "-k", "3", "--tol=-1"], "tol"),
        (vec![&good, "-k", "3", "--threads", "0"], "--threads"),
        (vec![&good, "-k", "3", "--init", "kmeans++"], "--init"),
        (vec![&good, "-k", "3", "--labels", &nodir], "does not exist"),
        (vec![&good, "-k", "3", "--labels", &in_file], "is not a folder (it is a file)"),
        (vec![&good, "-k", "3", "--memory-limit=-5MiB"], "a negative size in \"-5MiB\""),
        (vec![&good, "-k", "3", "--labels", &subdir], "not a regular file"),
        (vec![&good, "-k", "3", "--labels", &good], "names the same file"),
        (vec![&good, "-k", "3", "--labels", &c_out], "names the same file"),
        (vec![&good, "-k", "3", "--threads", "100000"], "--threads"),
        (vec![&good, "-k", "-1"], "invalid value '-1' for '--n-clusters <K>'"),
        (vec![&good, "-k", "3", "--plot-pca"], "--plot"),
        (vec![&good, "-k", "3", "--plot", "p.jpg"], "the plot is a PNG image"),
        (vec![&huge, "-k", "3"], "so squared distances between rows"),
        (vec![&tiny, "-k", "3"], "so squared distances underflow float64; hint: rescale"),
        (vec![&good, "-k", "3", "--mini-batch", "0"], "invalid --mini-batch"),
        (vec![&good, "-k", "3", "--mini-batch", "8", "--reassignment-ratio=-1"], "--reassignment-ratio"),
        (vec![&good, "-k", "3", "--max-no-improvement", "3"], "--mini-batch"),
        (vec![&good, "-k", "3", "--mini-batch", "8", "--algorithm", "bounded"], "cannot be used with"),
        (vec![&nanf, "-k", "2", "--mini-batch", "10"], "row 42, column 1 is NaN"),
        (vec![&good, "-k", "3", "--mini-batch", "10", "--sample-weight", &neg_w], "sample_weight[7] = -1"),
        (vec![&good, "-k", "3", "--mini-batch", "10", "--sample-weight", &zero_w], "positive"),
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

/// `predict --dtype float32` names a finite value float32 cannot hold as an
/// overflow (not as a non-finite value) and writes nothing.
#[test]
fn predict_names_a_float32_overflow() {
    let t = tempfile::tempdir().unwrap();
    let (x, c, l) = (p(t.path(), "x.npy"), p(t.path(), "c.npy"), p(t.path(), "l.npy"));
    let mut v = blobs(100);
    v[2 * 10 + 1] = 1e39;
    write_f64(&x, &[100, 2], &v);
    write_f64(&c, &[2, 2], &[0.0, 0.0, 1.0, 1.0]);
    let o = memfit(&["predict", &x, "--centers", &c, "--labels", &l, "--dtype", "float32"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("row 10, column 1 holds 1e39, which overflows float32; hint: use --dtype float64"), "{e}");
    assert!(!Path::new(&l).exists());
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
    assert!(e.contains("free space") || e.contains("No space"), "{e}");
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

/// Outputs that would hold values the data cannot: blobs that overflow
/// their dtype, a float32 quadratic form, a lower-bound plot of no EM
/// iteration. Each is refused on one line naming the cause, nothing left.
#[test]
fn results_that_cannot_be_made_are_refused_without_outputs() {
    let t = tempfile::tempdir().unwrap();
    let (x, q) = (p(t.path(), "x.npy"), p(t.path(), "q.npy"));
    write_f64(&x, &[100, 4], &blobs(200).iter().map(|v| v * 1e20).collect::<Vec<_>>());
    let mut eye = vec![0.0; 16];
    (0..4).for_each(|i| eye[i * 5] = 1e30);
    write_f64(&q, &[4, 4], &eye);
    let (out, labels, model, plot) =
        (p(t.path(), "out.npy"), p(t.path(), "l.npy"), p(t.path(), "model"), p(t.path(), "lb.png"));
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["generate", "blobs", "--n-samples", "1000", "--cluster-std", "1e308", "--out", &out], "overflow float64"),
        (
            vec![
                "generate",
                "blobs",
                "--n-samples",
                "1000",
                "--cluster-std",
                "1e38",
                "--dtype",
                "float32",
                "--out",
                &out,
            ],
            "overflow float32",
        ),
        (
            vec!["quadratic-form", &x, "--q", &q, "--dtype", "float32", "--out", &out],
            "row 0 overflows float32, the compute dtype; hint: use --dtype float64",
        ),
        (
            vec!["gmm", &x, "-k", "2", "--max-iter", "0", "--plot", &plot, "--labels", &labels, "--model", &model],
            "--max-iter 0 runs none",
        ),
    ];
    let before = entries(t.path());
    for (args, needle) in cases {
        let o = memfit(&args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(needle), "{args:?}: expected {needle:?} in {e}");
        assert_eq!(e.trim().lines().count(), 1, "{args:?}: not one line: {e}");
        assert_eq!(entries(t.path()), before, "{args:?} left files behind");
    }
    // In float64 the same quadratic form is NumPy's (about 1e70 per row).
    assert!(memfit(&["quadratic-form", &x, "--q", &q, "--out", &out, "--quiet"]).status.success());
}

/// Spherical k-means on rows of fewer directions than clusters stops as
/// Lloyd's does on duplicate points (a refilled cluster and a full one of
/// the same direction had centres an ulp apart, and every row moved
/// between them until max_iter).
#[test]
fn cosine_on_fewer_directions_than_clusters_converges() {
    let t = tempfile::tempdir().unwrap();
    let (x, s) = (p(t.path(), "x.npy"), p(t.path(), "s.json"));
    write_f64(&x, &[1000, 3], &[1.0; 3000]);
    for k in ["2", "4", "5"] {
        let o = memfit(&["kmeans", &x, "-k", k, "--metric", "cosine", "--summary", &s, "--quiet"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let summary: serde_json::Value = serde_json::from_slice(&std::fs::read(&s).unwrap()).unwrap();
        assert_eq!(summary["converged"], true, "k {k}: {summary}");
        assert!(summary["n_iter"].as_u64().unwrap() <= 2, "k {k}: {summary}");
    }
}

#[test]
fn default_input_runs() {
    let o = memfit(&["kmeans", "--max-iter", "2", "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("n_samples=2000000") && out.contains("n_clusters=200"), "{out}");
}

/// A long k-means run writing its labels to `labels`, 1.5 s into its work.
fn long_run(labels: &str) -> std::process::Child {
    let child = Command::new(env!("CARGO_BIN_EXE_memfit"))
        .args(["kmeans", "--init", "random", "--n-init", "50", "--tol", "0", "--quiet", "--labels", labels])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    child
}

#[test]
fn ctrl_c_stops_cleanly_without_outputs() {
    let t = tempfile::tempdir().unwrap();
    let child = long_run(&p(t.path(), "labels.npy"));
    let started = std::time::Instant::now();
    let _ = Command::new("kill").args(["-INT", &child.id().to_string()]).status();
    let out = child.wait_with_output().unwrap();
    assert!(started.elapsed().as_secs_f64() < 2.0, "took {:?} to stop", started.elapsed());
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(entries(t.path()).is_empty(), "left {:?}", entries(t.path()));
}

#[test]
fn second_ctrl_c_exits_at_once_without_outputs() {
    let t = tempfile::tempdir().unwrap();
    let (labels, centers) = (p(t.path(), "labels.npy"), p(t.path(), "centers.npy"));
    let child = Command::new(env!("CARGO_BIN_EXE_memfit"))
        .args(["kmeans", "--init", "random", "--n-init", "50", "--tol", "0", "--quiet"])
        .args(["--labels", &labels, "--centers", &centers])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    for _ in 0..2 {
        let _ = Command::new("kill").args(["-INT", &child.id().to_string()]).status();
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(entries(t.path()).is_empty(), "left {:?}", entries(t.path()));
}

#[test]
fn sigterm_and_sighup_exit_with_128_plus_their_number() {
    // As a shell reports a process the signal killed: schedulers tell a
    // terminated job from one the user interrupted by this status.
    for (signal, status) in [("-TERM", 143), ("-HUP", 129)] {
        let t = tempfile::tempdir().unwrap();
        let child = long_run(&p(t.path(), "labels.npy"));
        let _ = Command::new("kill").args([signal, &child.id().to_string()]).status();
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(status), "{signal}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(entries(t.path()).is_empty(), "left {:?}", entries(t.path()));
    }
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
    let cases: [(&[&str], &str); 7] = [
        (&["--reg-covar", "0"], "ill-defined empirical covariance"),
        (&["--init", "random", "--warm-start", "elsewhere"], "cannot be used with '--warm-start"),
        (&["--warm-start", "nowhere"], "invalid --warm-start nowhere: nowhere does not exist"),
        (&["--n-components", "101"], "exceeds n_samples = 100"),
        (&["--covariance-type", "full!"], "invalid --covariance-type"),
        (&["--init", "nope"], "invalid --init"),
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
    // An empty folder is taken as the model folder.
    std::fs::create_dir(&model).unwrap();
    let o = memfit(&["gmm", &x, "-k", "2", "--quiet", "--model", &model]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(Path::new(&model).join("model.json").is_file());
    std::fs::remove_dir_all(&model).unwrap();
    // A model path that is an ordinary file is never replaced.
    std::fs::write(&model, b"keep").unwrap();
    let o = memfit(&["gmm", &x, "-k", "2", "--quiet", "--model", &model]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(std::fs::read(&model).unwrap(), b"keep");
}

fn write_ints<E: Copy>(path: &str, dtype: Dtype, shape: &[usize], values: &[E], le: fn(E) -> Vec<u8>) {
    write_npy(path, dtype, shape, values, |v: E, o: &mut Vec<u8>| o.extend(le(v))).unwrap();
}

/// A whole `.npy` file's values as `f64` (exact for the centres, means and
/// labels these tests read), with its shape.
fn read_f64(path: &str) -> (Vec<f64>, Vec<usize>) {
    let ndim = memfit::io::NpyFile::open(path).unwrap().header().shape.len();
    memfit::io::read_array_f64(path, ndim).unwrap()
}

fn summary(path: &str) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The two centres (or means) of a one-cluster-per-group fit of `x`, sorted,
/// and whether `labels` put the first three rows together and the last three
/// together, apart.
fn two_groups(centres: &[f64], labels: &[f64]) -> (Vec<f64>, bool) {
    let mut c = centres.to_vec();
    c.sort_by(f64::total_cmp);
    let split = labels[0] == labels[1] && labels[1] == labels[2] && labels[3] == labels[4] && labels[4] == labels[5];
    (c, split && labels[0] != labels[3])
}

/// Issue 9 (cases.md N2): int64 values 1e9 + {0, 1, 2, 10, 11, 12}, k = 2.
/// Integers compute in float64 by default, as in Python: centres 1e9 + 1 and
/// 1e9 + 11, inertia 4 (also from the written centres), two clusters in
/// predict, two components in gmm and gmm-predict, and no warning.
#[test]
fn int64_near_1e9_keeps_its_two_clusters_everywhere() {
    let t = tempfile::tempdir().unwrap();
    let x = p(t.path(), "x.npy");
    let v: Vec<i64> = [0, 1, 2, 10, 11, 12].iter().map(|d| 1_000_000_000 + d).collect();
    write_ints(&x, Dtype::I64, &[6, 1], &v, |v: i64| v.to_le_bytes().to_vec());
    let (c, l, s) = (p(t.path(), "c.npy"), p(t.path(), "l.npy"), p(t.path(), "s.json"));
    let o = memfit(&["kmeans", &x, "-k", "2", "--centers", &c, "--labels", &l, "--summary", &s, "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
    let (centres, shape) = read_f64(&c);
    assert_eq!(shape, [2, 1]);
    let (labels, _) = read_f64(&l);
    assert_eq!(two_groups(&centres, &labels), (vec![1_000_000_001.0, 1_000_000_011.0], true));
    let sm = summary(&s);
    assert_eq!((sm["inertia"].as_f64(), sm["compute_dtype"].as_str()), (Some(4.0), Some("float64")));
    assert_eq!(sm["warnings"], serde_json::json!([]));
    // The written centres give the same inertia.
    let from_file: f64 = v
        .iter()
        .zip(&labels)
        .map(|(&x, &k)| {
            let d = x as f64 - centres[k as usize];
            d * d
        })
        .sum();
    assert_eq!(from_file, 4.0);
    let pl = p(t.path(), "pl.npy");
    let o = memfit(&["predict", &x, "--centers", &c, "--labels", &pl, "--quiet"]);
    assert!(o.status.success() && !stderr(&o).contains("warning"), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("inertia=4.0000000000e0"));
    assert_eq!(read_f64(&pl).0, labels);
    let (model, gl, gpl) = (p(t.path(), "model"), p(t.path(), "gl.npy"), p(t.path(), "gpl.npy"));
    let o = memfit(&["gmm", &x, "-k", "2", "--model", &model, "--labels", &gl, "--quiet"]);
    assert!(o.status.success() && !stderr(&o).contains("warning"), "{}", stderr(&o));
    let (means, _) = read_f64(&format!("{model}/means.npy"));
    let (glabels, _) = read_f64(&gl);
    assert_eq!(two_groups(&means, &glabels), (vec![1_000_000_001.0, 1_000_000_011.0], true));
    let o = memfit(&["gmm-predict", &x, "--model", &model, "--labels", &gpl, "--quiet"]);
    assert!(o.status.success() && !stderr(&o).contains("warning"), "{}", stderr(&o));
    assert_eq!(read_f64(&gpl).0, glabels);
}

/// int32 values just above 2^24 (in column 1 of 2): float64 by default gives
/// the exact centres 2^24 + 3 and 2^24 + 103 (inertia 16) and GMM means; with
/// `--dtype float32` every command warns, naming the file, the column and
/// the first value beyond 2^24, and the summaries list the warning.
#[test]
fn int32_above_2_pow_24_exact_by_default_warned_in_float32() {
    let t = tempfile::tempdir().unwrap();
    let x = p(t.path(), "x.npy");
    let base = 1 << 24;
    let v: Vec<i32> = [1, 3, 5, 101, 103, 105].iter().flat_map(|d| [7, base + d]).collect();
    write_ints(&x, Dtype::I32, &[6, 2], &v, |v: i32| v.to_le_bytes().to_vec());
    let (c, l, s) = (p(t.path(), "c.npy"), p(t.path(), "l.npy"), p(t.path(), "s.json"));
    let o = memfit(&["kmeans", &x, "-k", "2", "--centers", &c, "--labels", &l, "--summary", &s, "--quiet"]);
    assert!(o.status.success() && !stderr(&o).contains("warning"), "{}", stderr(&o));
    let (centres, _) = read_f64(&c);
    let column1: Vec<f64> = centres.chunks(2).map(|r| r[1]).collect();
    let (labels, _) = read_f64(&l);
    assert_eq!(two_groups(&column1, &labels), (vec![f64::from(base + 3), f64::from(base + 103)], true));
    assert!(centres.chunks(2).all(|r| r[0] == 7.0));
    assert_eq!(summary(&s)["inertia"].as_f64(), Some(16.0));
    let (model, gl) = (p(t.path(), "model"), p(t.path(), "gl.npy"));
    let o = memfit(&["gmm", &x, "-k", "2", "--covariance-type", "diag", "--model", &model, "--labels", &gl, "--quiet"]);
    assert!(o.status.success() && !stderr(&o).contains("warning"), "{}", stderr(&o));
    let (means, _) = read_f64(&format!("{model}/means.npy"));
    let means1: Vec<f64> = means.chunks(2).map(|r| r[1]).collect();
    assert_eq!(two_groups(&means1, &read_f64(&gl).0), (vec![f64::from(base + 3), f64::from(base + 103)], true));

    let warned = |o: &Output| {
        let e = stderr(o);
        assert!(o.status.success(), "{e}");
        let line = format!(
            "warning: {x}: column 1 holds int32 values beyond 2^24 in magnitude (first: {} at row 0), which float32 cannot represent exactly",
            base + 1
        );
        assert!(e.contains(&line) && e.contains("use --dtype float64, which holds integers exactly up to 2^53"), "{e}");
        assert_eq!(e.matches("beyond 2^24").count(), 1, "{e}");
    };
    let f32 = ["--dtype", "float32", "--quiet"];
    let s32 = p(t.path(), "s32.json");
    let o = memfit(&[&["kmeans", &x, "-k", "2", "--centers", &c, "--summary", &s32][..], &f32].concat());
    warned(&o);
    let sm = summary(&s32);
    assert_eq!(sm["compute_dtype"], "float32");
    assert!(sm["warnings"][0].as_str().unwrap().contains("column 1 holds int32 values beyond 2^24"), "{sm}");
    warned(&memfit(&[&["predict", &x, "--centers", &c, "--labels", &l][..], &f32].concat()));
    let gs = p(t.path(), "gs.json");
    warned(&memfit(
        &[&["gmm", &x, "-k", "2", "--covariance-type", "diag", "--model", &model, "--summary", &gs][..], &f32].concat(),
    ));
    let gmm_warnings = summary(&gs)["warnings"].to_string();
    assert!(gmm_warnings.contains("column 1 holds int32 values beyond 2^24"), "{gmm_warnings}");
    warned(&memfit(&[&["gmm-predict", &x, "--model", &model, "--labels", &gl][..], &f32].concat()));
    let q = p(t.path(), "q.npy");
    write_f64(&q, &[2, 2], &[1.0, 0.0, 0.0, 1.0]);
    warned(&memfit(&[&["quadratic-form", &x, "--q", &q, "--out", &p(t.path(), "qo.npy")][..], &f32].concat()));
    // float32 holds uint8 and int16 exactly: they stay float32, without a word.
    let small = p(t.path(), "i16.npy");
    write_ints(&small, Dtype::I16, &[6, 1], &[1i16, 2, 3, 30000, 30001, 30002], |v: i16| v.to_le_bytes().to_vec());
    let o = memfit(&["kmeans", &small, "-k", "2", "--summary", &s, "--quiet"]);
    assert!(o.status.success() && !stderr(&o).contains("warning"), "{}", stderr(&o));
    assert_eq!(summary(&s)["compute_dtype"], "float32");
}

/// uint32 and uint64 are read (any order, either byte order) and compute in
/// float64; uint64 beyond 2^53 cannot be exact in float64 either, and is
/// warned about the same way (scatter too, which always computes in float64).
#[test]
fn unsigned_integers_compute_in_float64_and_warn_beyond_2_pow_53() {
    let t = tempfile::tempdir().unwrap();
    let x = p(t.path(), "u32.npy");
    let v: Vec<u32> = [1, 3, 5, 101, 103, 105].iter().map(|d| (1 << 24) + d).collect();
    write_ints(&x, Dtype::U32, &[6, 1], &v, |v: u32| v.to_le_bytes().to_vec());
    let (c, s) = (p(t.path(), "c.npy"), p(t.path(), "s.json"));
    let o = memfit(&["kmeans", &x, "-k", "2", "--centers", &c, "--summary", &s, "--quiet"]);
    assert!(o.status.success() && !stderr(&o).contains("warning"), "{}", stderr(&o));
    let mut centres = read_f64(&c).0;
    centres.sort_by(f64::total_cmp);
    assert_eq!(centres, [f64::from((1 << 24) + 3), f64::from((1 << 24) + 103)]);
    assert_eq!(
        (summary(&s)["input_dtype"].as_str(), summary(&s)["compute_dtype"].as_str()),
        (Some("uint32"), Some("float64"))
    );
    let big = p(t.path(), "u64.npy");
    let v: Vec<u64> = [1, 3, 5, 101, 103, 105].iter().map(|d| (1 << 53) + d).collect();
    write_ints(&big, Dtype::U64, &[6, 1], &v, |v: u64| v.to_le_bytes().to_vec());
    let o = memfit(&["kmeans", &big, "-k", "2", "--summary", &s, "--quiet"]);
    let e = stderr(&o);
    assert!(o.status.success(), "{e}");
    assert!(
        e.contains(&format!("warning: {big}: column 0 holds uint64 values beyond 2^53 in magnitude (first: 9007199254740993 at row 0), which float64 cannot represent exactly")) && e.contains("subtract a per-column offset"),
        "{e}"
    );
    assert!(summary(&s)["warnings"][0].as_str().unwrap().contains("2^53"));
    let o = memfit(&["scatter", &big, "--out", &p(t.path(), "s.npy")]);
    assert!(o.status.success() && stderr(&o).contains("column 0 holds uint64 values beyond 2^53"), "{}", stderr(&o));
}

/// Issue 9 (6): weights are 1-D, as scikit-learn's sample_weight and
/// weights_init: an (n, 1) or (K, 1) column is refused the same way, naming
/// the flag, the file and the shape, with the fix.
#[test]
fn column_weights_are_refused_like_column_weights_init() {
    let t = tempfile::tempdir().unwrap();
    let x = p(t.path(), "x.npy");
    write_f64(&x, &[100, 2], &blobs(100));
    let w = p(t.path(), "w.npy");
    write_f64(&w, &[100, 1], &[1.0; 100]);
    let wi = p(t.path(), "wi.npy");
    write_f64(&wi, &[3, 1], &[0.25, 0.25, 0.5]);
    let s = p(t.path(), "s.npy");
    let cases: [(Vec<&str>, String); 4] = [
        (vec!["kmeans", &x, "-k", "3", "--sample-weight", &w], format!("--sample-weight: {w}: expected a 1-D array, found shape [100, 1]; hint: save a 1-D array of shape (n_samples,)")),
        (vec!["gmm", &x, "-k", "3", "--sample-weight", &w], format!("--sample-weight: {w}: expected a 1-D array, found shape [100, 1]; hint: save a 1-D array of shape (n_samples,)")),
        (vec!["gmm", &x, "-k", "3", "--weights-init", &wi], format!("--weights-init: {wi}: expected a 1-D array, found shape [3, 1]; hint: save a 1-D array of shape (n_components,)")),
        (vec!["scatter", &x, "--weights", &w, "--out", &s], format!("--weights: {w}: expected a 1-D array, found shape [100, 1]")),
    ];
    for (args, needle) in cases {
        let o = memfit(&args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(&needle) && e.contains(".ravel()"), "{args:?}: {e}");
        assert_eq!(e.trim().lines().count(), 1, "{e}");
    }
    assert_eq!(entries(t.path()).len(), 3);
}

/// Issue 9 (6): an input with no rows, or no columns, is refused naming its
/// file, by every command that fits, predicts or computes a kernel (no
/// panic for zero-byte rows, no output written).
#[test]
fn empty_input_names_its_file() {
    let t = tempfile::tempdir().unwrap();
    let empty = p(t.path(), "empty.npy");
    write_f64(&empty, &[0, 2], &[]);
    let (no_columns, q0, q2) = (p(t.path(), "no_columns.npy"), p(t.path(), "q0.npy"), p(t.path(), "q2.npy"));
    write_f64(&no_columns, &[5, 0], &[]);
    write_f64(&q0, &[0, 0], &[]);
    write_f64(&q2, &[2, 2], &[1.0, 0.0, 0.0, 1.0]);
    let out = p(t.path(), "out.npy");
    for (args, shape) in [
        (vec!["quadratic-form", &no_columns, "--q", &q0, "--out", &out], "(5, 0)"),
        (vec!["quadratic-form", &empty, "--q", &q2, "--out", &out], "(0, 2)"),
        (vec!["scatter", &no_columns, "--out", &out], "(5, 0)"),
        (vec!["scatter", &empty, "--out", &out], "(0, 2)"),
    ] {
        let o = memfit(&args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(&format!("has shape {shape}: nothing to compute")), "{args:?}: {e}");
        assert_eq!(e.trim().lines().count(), 1, "{e}");
    }
    assert!(!Path::new(&out).exists());
    let x = p(t.path(), "x.npy");
    write_f64(&x, &[100, 2], &blobs(100));
    let (c, model) = (p(t.path(), "c.npy"), p(t.path(), "model"));
    assert!(memfit(&["kmeans", &x, "-k", "3", "--centers", &c, "--quiet"]).status.success());
    assert!(memfit(&["gmm", &x, "-k", "3", "--model", &model, "--quiet"]).status.success());
    let l = p(t.path(), "l.npy");
    for (args, verb) in [
        (vec!["kmeans", &empty, "-k", "1"], "cluster"),
        (vec!["gmm", &empty, "-k", "1"], "fit"),
        (vec!["predict", &empty, "--centers", &c, "--labels", &l], "predict"),
        (vec!["gmm-predict", &empty, "--model", &model, "--labels", &l], "predict"),
    ] {
        let o = memfit(&args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(&format!("{empty} has shape (0, 2): nothing to {verb}")), "{args:?}: {e}");
    }
    assert!(!Path::new(&l).exists());
}

/// Issue 9 (6): `memfit generate` refuses before writing when the target
/// filesystem cannot hold the output, naming the path, the bytes needed and
/// the bytes available; on a small tmpfs (root only) the data and labels
/// files are counted together.
#[test]
fn generate_checks_free_disk_space_before_writing() {
    let t = tempfile::tempdir().unwrap();
    let out = p(t.path(), "huge.npy");
    // 10^12 × 1000 float64: 8 PB, more than any disk here.
    let o = memfit(&["generate", "blobs", "--n-samples", "1000000000000", "--n-features", "1000", "--out", &out]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    let needed = 8_000_000_000_000_000u64 + 128;
    assert!(
        e.contains(&format!(
            "{out}: not enough free disk space: the files written on its file system need {needed} bytes"
        )) && e.contains("available"),
        "{e}"
    );
    assert!(entries(t.path()).is_empty(), "left {:?}", entries(t.path()));

    let mnt = t.path().join("small");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
        .arg(&mnt)
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("skipped the tmpfs part: cannot mount a tmpfs here (needs root)");
        return;
    }
    let (data, labels) = (mnt.join("x.npy"), mnt.join("y.npy"));
    // 10,000 × 2 float64 (160 KB) fits alone; with its int32 labels (40 KB)
    // it still fits; 14,000 rows (224 KB + 56 KB) do not fit together.
    let gen = |n: &str| {
        memfit(&[
            "generate",
            "blobs",
            "--n-samples",
            n,
            "--out",
            data.to_str().unwrap(),
            "--labels",
            labels.to_str().unwrap(),
        ])
    };
    let ok = gen("10000");
    let refused = gen("14000");
    let left = entries(&mnt);
    let _ = Command::new("umount").arg(&mnt).status();
    assert!(ok.status.success(), "{}", stderr(&ok));
    let e = stderr(&refused);
    assert_eq!(refused.status.code(), Some(2), "{e}");
    assert!(e.contains("not enough free disk space: the files written on its file system need"), "{e}");
    assert_eq!(left.len(), 2, "{left:?}");
}

fn memfit_os(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memfit")).args(args).output().expect("run memfit")
}

/// A tmpfs of `size` (e.g. `512k`) mounted on a new folder in `dir`,
/// unmounted when dropped; `None` where mounting is refused (not root).
struct SmallFs(PathBuf);

impl SmallFs {
    fn new(dir: &Path, name: &str, size: &str) -> Option<SmallFs> {
        let mnt = dir.join(name);
        std::fs::create_dir(&mnt).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&mnt)
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(SmallFs(mnt))
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// T3-05 and its kind: any name a file system accepts (bytes that are not
/// UTF-8, spaces, newlines, a leading '-') works for the input, every
/// output, the initial centres, the model folder and the scratch folder;
/// summaries render such names lossily.
#[test]
fn any_path_the_file_system_accepts_works() {
    use std::ffi::{OsStr, OsString};
    use std::os::unix::ffi::OsStrExt;
    let t = tempfile::tempdir().unwrap();
    let odd = |name: &[u8]| -> OsString { t.path().join(OsStr::from_bytes(name)).into_os_string() };
    let x = odd(b"x\xff.npy");
    write_f64(&p(t.path(), "plain.npy"), &[300, 2], &blobs(300));
    std::fs::copy(t.path().join("plain.npy"), &x).unwrap();
    let o = memfit_os(&[
        OsStr::new("kmeans"),
        &x,
        OsStr::new("-k"),
        OsStr::new("3"),
        OsStr::new("--labels"),
        OsStr::new("l.npy"),
        OsStr::new("--quiet"),
    ]);
    let _ = std::fs::remove_file("l.npy");
    assert!(o.status.success(), "{}", stderr(&o));
    for names in [
        [&b"l\xfe.npy"[..], b"c\xfd.npy", b"s\xfc.json", b"m\xfb", b"scr\xfa"],
        [b"l l.npy", b"c\nc.npy", b"-s.json", b"-m", b"-scr"],
    ] {
        let [labels, centers, summary, model, scratch] = names.map(odd);
        std::fs::create_dir(&scratch).unwrap();
        let arg = |flag: &str, v: &OsString| {
            let mut a = OsString::from(format!("--{flag}="));
            a.push(v);
            a
        };
        let o = memfit_os(&[
            OsStr::new("kmeans"),
            OsStr::new("--quiet"),
            OsStr::new("-k"),
            OsStr::new("3"),
            &arg("labels", &labels),
            &arg("centers", &centers),
            &arg("summary", &summary),
            OsStr::new("--"),
            &x,
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let s: serde_json::Value = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
        assert!(s["input"].as_str().unwrap().ends_with("x\u{fffd}.npy"), "{s}");
        assert_eq!(std::fs::read(&labels).unwrap().len(), 128 + 300 * 4);
        // The centres file as --init.
        let o = memfit_os(&[
            OsStr::new("kmeans"),
            &x,
            OsStr::new("-k"),
            OsStr::new("3"),
            &arg("init", &centers),
            OsStr::new("--quiet"),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let o = memfit_os(&[
            OsStr::new("gmm"),
            &x,
            OsStr::new("-k"),
            OsStr::new("2"),
            OsStr::new("--quiet"),
            &arg("model", &model),
            &arg("scratch-dir", &scratch),
            &arg("labels", &labels),
            &arg("summary", &summary),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(Path::new(&model).join("model.json").is_file());
        let o = memfit_os(&[
            OsStr::new("gmm-predict"),
            &x,
            &arg("model", &model),
            &arg("labels", &labels),
            OsStr::new("--quiet"),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
}

/// A scratch folder that is missing, a file or read-only is reported first,
/// before the data are read (this input's NaN would be reported otherwise).
#[test]
fn a_bad_scratch_folder_is_reported_before_the_data_are_read() {
    let t = tempfile::tempdir().unwrap();
    let x = p(t.path(), "x.npy");
    let mut v = blobs(300);
    v[599] = f64::NAN;
    write_f64(&x, &[300, 2], &v);
    let ro = SmallFs::new(t.path(), "ro", "64k");
    if let Some(ro) = &ro {
        Command::new("mount").args(["-o", "remount,ro"]).arg(&ro.0).status().unwrap();
    }
    let mut cases = vec![
        (p(t.path(), "missing"), "the folder does not exist; hint: create it or name an existing folder"),
        (x.clone(), "it is not a folder; hint: name a folder"),
    ];
    if let Some(ro) = &ro {
        cases.push((ro.0.to_string_lossy().into_owned(), "cannot create files there"));
    } else {
        eprintln!("read-only case skipped: cannot mount a tmpfs here (needs root)");
    }
    for (dir, why) in cases {
        let o = memfit(&["gmm", &x, "-k", "2", "--quiet", "--scratch-dir", &dir]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{e}");
        assert!(e.contains(&format!("{dir}: use as the scratch folder failed: {why}")), "{e}");
    }
}

/// An output in a folder whose file system takes no new file (procfs says
/// "not found" for it) is not reported as a missing path.
#[test]
fn a_folder_that_takes_no_file_is_not_called_missing() {
    let t = tempfile::tempdir().unwrap();
    let x = p(t.path(), "x.npy");
    write_f64(&x, &[300, 2], &blobs(300));
    let o = memfit(&["kmeans", &x, "-k", "2", "--quiet", "--labels", "/proc/memfit-labels.npy"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(!e.contains("does not exist"), "{e}");
    assert!(e.contains("folder /proc cannot hold new files") || e.contains("permission"), "{e}");
}

/// Negative numbers reach the commands' own checks (clap would take `-1`
/// for a flag and suggest `-- -1`, which does not work for an option), and
/// `generate` takes `--quiet` as every command does.
#[test]
fn negative_numbers_reach_the_checks_and_generate_takes_quiet() {
    let t = tempfile::tempdir().unwrap();
    let x = p(t.path(), "x.npy");
    write_f64(&x, &[300, 2], &blobs(300));
    for (args, why) in [
        (vec!["kmeans", &x, "-k", "-1"], "invalid value '-1' for '--n-clusters <K>'"),
        (vec!["kmeans", &x, "-k", "2", "--memory-limit", "-1"], "a negative size"),
        (vec!["gmm", &x, "--max-iter", "-3"], "invalid value '-3' for '--max-iter <N>'"),
        (
            vec!["generate", "blobs", "--n-samples", "10", "--cluster-std", "-1", "--out", &x],
            "must be finite and >= 0, got -1",
        ),
    ] {
        let o = memfit(&args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(why) && !e.contains("-- -"), "{args:?}: {e}");
    }
    let out = p(t.path(), "g.npy");
    let o = memfit(&["generate", "blobs", "--n-samples", "10", "--out", &out, "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// T3-04's kind: scratch files and every output are added up per file
/// system and refused before any work when they do not fit together (each
/// fits alone); on separate file systems the same job runs.
#[test]
fn scratch_and_outputs_are_checked_together_per_file_system() {
    let t = tempfile::tempdir().unwrap();
    let (Some(a), Some(b)) = (SmallFs::new(t.path(), "a", "512k"), SmallFs::new(t.path(), "b", "512k")) else {
        eprintln!("skipped: cannot mount a tmpfs here (needs root)");
        return;
    };
    let x = p(t.path(), "x.npy");
    let o = memfit(&["generate", "blobs", "--n-samples", "3000", "--n-features", "48", "--centers", "12", "--out", &x]);
    assert!(o.status.success(), "{}", stderr(&o));
    let fit = |scratch: &Path, model: &Path, dry_run: bool| {
        let mut args = vec![
            "gmm",
            &x,
            "-k",
            "12",
            "--memory-limit",
            "1500KiB",
            "--max-iter",
            "2",
            "--init",
            "random_from_data",
            "--quiet",
            "--scratch-dir",
            scratch.to_str().unwrap(),
            "--model",
            model.to_str().unwrap(),
        ];
        if dry_run {
            args.push("--dry-run");
        }
        memfit(&args)
    };
    // Scratch files 220.50 KiB and the model 442.59 KiB: not both in 512 KiB;
    // a dry run prints the plan and says so too.
    for dry_run in [false, true] {
        let o = fit(&a.0, &a.0.join("m"), dry_run);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{e}");
        assert!(
            e.contains("not enough free disk space: the files written on its file system (scratch files 220.50 KiB, --model 442.59 KiB) need ")
                && e.contains("but 524288 bytes (512.00 KiB) are available; nothing was written"),
            "{e}"
        );
        assert!(!e.contains("iteration"), "{e}");
        assert_eq!(String::from_utf8_lossy(&o.stdout).starts_with("memory plan for gmm"), dry_run);
        assert!(entries(&a.0).is_empty());
    }
    let o = fit(&a.0, &b.0.join("m"), false);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(b.0.join("m/model.json").is_file());
    // Outputs of kmeans alike: labels and centres add up.
    let o =
        memfit(&["kmeans", &x, "-k", "3", "--quiet", "--labels", &p(&a.0, "l.npy"), "--centers", &p(&a.0, "c.npy")]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// Malformed or ambiguous memory sizes are refused (`1e` was 10^18
/// bytes); `1e9` is bytes.
#[test]
fn malformed_memory_sizes_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let x = p(t.path(), "x.npy");
    write_f64(&x, &[300, 2], &blobs(300));
    for bad in ["1e", "1..5GiB", "5 GiBs", "inf", "1e-3"] {
        let o = memfit(&["kmeans", &x, "-k", "3", "--memory-limit", bad, "--dry-run"]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{bad}: {e}");
        assert!(e.starts_with("memfit: error: invalid --memory-limit: "), "{bad}: {e}");
    }
    let o = memfit(&["kmeans", &x, "-k", "3", "--memory-limit", "1e9", "--dry-run"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("limit 953.67 MiB = 1000000000 bytes"), "{}", stderr(&o));
}

/// A limit above the machine's memory is accepted, with a warning on
/// stderr before any work, when the plan needs more memory than there is
/// (centres of 400 GB here; the input is a sparse file).
#[test]
fn a_limit_beyond_memory_warns_when_the_plan_needs_more_than_there_is() {
    let t = tempfile::tempdir().unwrap();
    let x = t.path().join("huge.npy");
    let header = write_header(Dtype::F64, &[1_000_000, 100_000]);
    let f = std::fs::File::create(&x).unwrap();
    std::io::Write::write_all(&mut &f, &header).unwrap();
    f.set_len(header.len() as u64 + 8 * 100_000_000_000).unwrap();
    let x = x.to_str().unwrap();
    let o = memfit(&["kmeans", x, "-k", "500000", "--memory-limit", "4EiB", "--dry-run"]);
    let e = stderr(&o);
    assert!(o.status.success(), "{e}");
    assert!(
        e.starts_with("warning: the memory limit (")
            && e.contains("is above the memory available (")
            && e.contains("hint: lower --memory-limit to at most"),
        "{e}"
    );
    // A limit within the memory there is says nothing.
    let o = memfit(&["kmeans", x, "-k", "3", "--memory-limit", "1GiB", "--dry-run"]);
    assert!(o.status.success() && stderr(&o).is_empty(), "{}", stderr(&o));
}

/// A named pipe is refused at once (opening it would wait for a writer).
#[test]
fn a_named_pipe_input_is_refused_without_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = p(dir.path(), "fifo.npy");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let mut child = Command::new(env!("CARGO_BIN_EXE_memfit"))
        .args(["kmeans", &fifo, "-k", "3"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > std::time::Duration::from_secs(30) {
            child.kill().unwrap();
            panic!("memfit waited on the pipe");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(err.contains("not a regular file"), "{err}");
}

/// On a machine with a CUDA driver and device (`MEMFIT_HAS_CUDA_DRIVER`
/// set, as `bench/device_run.sh` sets it): k-means fits and predictions on
/// the device have the CPU's labels, centres and inertia, bit for bit, in
/// float64 and float32, with whole tiles and with tiles smaller than a
/// block. Elsewhere the test has nothing to run on and passes.
#[test]
#[cfg(feature = "cuda")]
fn a_cuda_kmeans_fit_has_the_cpu_bits() {
    if std::env::var_os("MEMFIT_HAS_CUDA_DRIVER").is_none() {
        eprintln!("note: no CUDA driver (MEMFIT_HAS_CUDA_DRIVER unset): nothing to compare");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let (n, d, k) = (50_000, 3, 64);
    // Rows with ties and duplicates: a grid, with a spread-out second half.
    let values: Vec<f64> =
        (0..n * d).map(|i| ((i * 7919) % 1009) as f64 * if i < n * d / 2 { 1.0 } else { 0.37 }).collect();
    let x = p(t.path(), "x.npy");
    write_f64(&x, &[n, d], &values);
    let c = p(t.path(), "c.npy");
    write_f64(&c, &[k, d], &values[..k * d]);
    let read = |name: &str| std::fs::read(p(t.path(), name)).unwrap();
    for dtype in ["float64", "float32"] {
        let mut outs = Vec::new();
        for device in
            [&["--device", "cpu"][..], &["--device", "cuda"], &["--device", "cuda", "--device-memory-limit", "1MiB"]]
        {
            let tag = format!("{dtype}{}", outs.len());
            let (l, cc) = (p(t.path(), &format!("l{tag}.npy")), p(t.path(), &format!("c{tag}.npy")));
            let mut args = vec!["kmeans", &x, "-k", "64", "--init", &c, "--max-iter", "20", "--dtype", dtype];
            args.extend(["--labels", &l, "--centers", &cc, "--quiet"]);
            args.extend(device);
            let o = memfit(&args);
            assert!(o.status.success(), "{args:?}: {}", stderr(&o));
            let inertia = String::from_utf8_lossy(&o.stdout).split("inertia=").nth(1).map(|s| s[..20].to_string());
            let pl = p(t.path(), &format!("p{tag}.npy"));
            let mut args = vec!["predict", &x, "--centers", &cc, "--labels", &pl, "--quiet"];
            args.extend(device);
            let o = memfit(&args);
            assert!(o.status.success(), "{args:?}: {}", stderr(&o));
            outs.push((
                read(&format!("l{tag}.npy")),
                read(&format!("c{tag}.npy")),
                inertia,
                read(&format!("p{tag}.npy")),
            ));
        }
        assert!(outs.iter().all(|o| *o == outs[0]), "{dtype}: a device fit differs from the CPU's");
    }
}

/// On a machine with a CUDA driver and device (`MEMFIT_HAS_CUDA_DRIVER`
/// set): Gaussian mixtures of every covariance type fitted with their
/// log-densities on the device reach the CPU's fit to rounding (lower
/// bound within 1e-9 relative in float64, 1e-5 in float32, whose CPU
/// log-densities are float32 products; the same iterations and labels),
/// whole tiles and tiles smaller than a block; `gmm-predict` on the device
/// gives the CPU's labels. Elsewhere the test passes with a note.
#[test]
#[cfg(feature = "cuda")]
fn a_cuda_gmm_fit_is_the_cpu_fit_to_rounding() {
    if std::env::var_os("MEMFIT_HAS_CUDA_DRIVER").is_none() {
        eprintln!("note: no CUDA driver (MEMFIT_HAS_CUDA_DRIVER unset): nothing to compare");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let (n, d) = (20_000, 7);
    // Four separated clusters with correlated, unequal spreads.
    let values: Vec<f64> = (0..n)
        .flat_map(|i| {
            let c = (i % 4) as f64;
            let u = ((i * 7919) % 1009) as f64 / 1009.0 - 0.5;
            let v = ((i * 104_729) % 997) as f64 / 997.0 - 0.5;
            (0..d).map(move |j| c * 10.0 + u * (1.0 + j as f64 * 0.3) + v * (j % 3) as f64 * (c + 1.0))
        })
        .collect();
    let x = p(t.path(), "x.npy");
    write_f64(&x, &[n, d], &values);
    let read = |name: &str| std::fs::read(p(t.path(), name)).unwrap();
    for dtype in ["float64", "float32"] {
        for cov in ["full", "tied", "diag", "spherical"] {
            let mut outs = Vec::new();
            for device in [
                &["--device", "cpu"][..],
                &["--device", "cuda"],
                &["--device", "cuda", "--device-memory-limit", "1MiB"],
            ] {
                let tag = format!("{dtype}{cov}{}", outs.len());
                let (l, m, s) = (format!("l{tag}.npy"), format!("m{tag}"), format!("s{tag}.json"));
                let (l, m, s) = (p(t.path(), &l), p(t.path(), &m), p(t.path(), &s));
                let mut args = vec!["gmm", &x, "-k", "4", "--covariance-type", cov, "--dtype", dtype, "--seed", "3"];
                args.extend(["--max-iter", "30", "--labels", &l, "--model", &m, "--summary", &s, "--quiet"]);
                args.extend(device);
                let o = memfit(&args);
                assert!(o.status.success(), "{args:?}: {}", stderr(&o));
                let summary: serde_json::Value = serde_json::from_slice(&std::fs::read(&s).unwrap()).unwrap();
                let pl = p(t.path(), &format!("p{tag}.npy"));
                let mut args = vec!["gmm-predict", &x, "--model", &m, "--labels", &pl, "--quiet"];
                args.extend(device);
                let o = memfit(&args);
                assert!(o.status.success(), "{args:?}: {}", stderr(&o));
                outs.push((
                    summary["lower_bound"].as_f64().unwrap(),
                    summary["n_iter"].as_u64().unwrap(),
                    read(&format!("l{tag}.npy")),
                    read(&format!("p{tag}.npy")),
                ));
            }
            let (lb, iters, labels, predicted) = &outs[0];
            for o in &outs[1..] {
                let rel = (o.0 - lb).abs() / lb.abs();
                assert!(
                    rel <= if dtype == "float64" { 1e-9 } else { 1e-5 },
                    "{dtype} {cov}: lower bound {} against the CPU's {lb}",
                    o.0
                );
                assert_eq!((&o.1, &o.2, &o.3), (iters, labels, predicted), "{dtype} {cov}: the device fit differs");
            }
        }
    }
}

#[test]
#[cfg(feature = "cuda")]
fn a_stub_cuda_driver_library_is_a_clear_error_not_a_panic() {
    // A libcuda that loads but lacks the driver's functions (a stub, or a
    // driver older than memfit's CUDA): an error with the remedy, exit 2.
    let t = tempfile::tempdir().unwrap();
    let src = p(t.path(), "stub.c");
    std::fs::write(&src, "int memfit_stub_only;\n").unwrap();
    let lib = p(t.path(), "libcuda.so");
    let cc = Command::new("cc").args(["-shared", "-fPIC", "-o", &lib, &src]).status().expect("run cc");
    assert!(cc.success(), "cc failed");
    let x = p(t.path(), "x.npy");
    write_f64(&x, &[300, 2], &blobs(300));
    let o = Command::new(env!("CARGO_BIN_EXE_memfit"))
        .args(["kmeans", &x, "-k", "3", "--device", "cuda", "--dry-run"])
        .env("LD_LIBRARY_PATH", t.path())
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("cuda:0: cannot be used: the CUDA driver library is incomplete or older"), "{err}");
    assert!(err.contains("Missing symbol") && !err.contains("panicked"), "{err}");
    assert!(err.trim_end().ends_with("hint: use --device cpu"), "{err}");
}

#[test]
fn a_cuda_device_without_a_driver_is_a_clear_error_before_any_output() {
    // CI has no GPU: every job asked to run on CUDA says why it cannot, with
    // the remedy, writes nothing, and a bad device name is refused alike.
    let t = tempfile::tempdir().unwrap();
    let x = p(t.path(), "x.npy");
    write_f64(&x, &[300, 2], &blobs(300));
    let c = p(t.path(), "c.npy");
    write_f64(&c, &[3, 2], &blobs(3));
    let l = p(t.path(), "l.npy");
    let why = if cfg!(feature = "cuda") { "no CUDA driver library" } else { "built without CUDA support" };
    let before = entries(t.path());
    // On a machine with a driver (the device run) these jobs can run.
    let driver = cfg!(feature = "cuda") && std::env::var_os("MEMFIT_HAS_CUDA_DRIVER").is_some();
    for args in [
        vec!["kmeans", &x, "-k", "3", "--labels", &l, "--device", "cuda"],
        vec!["kmeans", &x, "-k", "3", "--device", "cuda:1", "--device-memory-limit", "256MiB", "--dry-run"],
        vec!["predict", &x, "--centers", &c, "--labels", &l, "--device", "cuda"],
        vec!["gmm", &x, "--n-components", "3", "--labels", &l, "--device", "CUDA"],
    ]
    .into_iter()
    .filter(|_| !driver)
    {
        let o = memfit(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(": cannot be used: ") && err.contains(why), "{args:?}: {err}");
        assert!(err.trim_end().ends_with("hint: use --device cpu"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    for (args, says) in [
        (vec!["kmeans", &x, "-k", "3", "--device", "gpu"], "invalid --device: must be 'cpu', 'cuda' or 'cuda:N'"),
        (vec!["kmeans", &x, "-k", "3", "--device", "cuda:+1"], "invalid --device: must be 'cpu', 'cuda' or 'cuda:N'"),
        (vec!["kmeans", &x, "-k", "3", "--device-memory-limit", "1GiB"], "--device-memory-limit needs --device cuda"),
        // The limit is read before the device is opened, and named as given.
        (
            vec!["kmeans", &x, "-k", "3", "--device", "cuda", "--device-memory-limit", "abc"],
            "invalid --device-memory-limit: no number in \"abc\"",
        ),
        (
            vec!["gmm", &x, "--n-components", "3", "--device", "cuda", "--device-memory-limit", "0"],
            "invalid --device-memory-limit: the size must be at least 1 byte",
        ),
        (
            vec!["predict", &x, "--centers", &c, "--labels", &l, "--device", "cuda", "--device-memory-limit", "1e"],
            "invalid --device-memory-limit: an exponent without digits",
        ),
    ] {
        let o = memfit(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(says), "{}", stderr(&o));
    }
    // A long device name is quoted cut, not echoed whole.
    let long = format!("cuda:{}", "9".repeat(5000));
    let o = memfit(&["kmeans", &x, "-k", "3", "--device", &long]);
    assert!(stderr(&o).len() < 400 && stderr(&o).contains("…"), "{}", stderr(&o));
    if !driver {
        assert_eq!(entries(t.path()), before);
    }
    // `--device cpu` is the default.
    let o = memfit(&["kmeans", &x, "-k", "3", "--device", "cpu", "--labels", &l, "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// A CSR folder (an unzipped `scipy.sparse.save_npz`: int32 offsets and
/// columns, float64 values, int64 shape) of `x` (`n × d`), and `x` as a
/// dense `.npy`.
fn write_csr(dir: &Path, x: &[f64], n: usize, d: usize) {
    std::fs::create_dir_all(dir).unwrap();
    let (mut indptr, mut indices, mut data) = (vec![0i32], Vec::new(), Vec::new());
    for row in x.chunks(d) {
        for (j, &v) in row.iter().enumerate() {
            if v != 0.0 {
                indices.push(j as i32);
                data.push(v);
            }
        }
        indptr.push(data.len() as i32);
    }
    let le32 = |v: i32| v.to_le_bytes().to_vec();
    write_ints(&p(dir, "indptr.npy"), Dtype::I32, &[n + 1], &indptr, le32);
    write_ints(&p(dir, "indices.npy"), Dtype::I32, &[indices.len()], &indices, le32);
    write_f64(&p(dir, "data.npy"), &[data.len()], &data);
    write_ints(&p(dir, "shape.npy"), Dtype::I64, &[2], &[n as i64, d as i64], |v: i64| v.to_le_bytes().to_vec());
    write_format(dir, "csr");
}

/// `format.npy` saying `name` (3 characters), as scipy writes it: a 0-d
/// `<U3` array.
fn write_format(dir: &Path, name: &str) {
    let mut format = write_header(Dtype::U8, &[]);
    let at = format.windows(3).position(|w| w == b"|u1").unwrap();
    format.splice(at..at + 3, *b"<U3");
    format.extend(name.chars().flat_map(|c| (c as u32).to_le_bytes()));
    std::fs::write(dir.join("format.npy"), format).unwrap();
}

#[test]
fn a_sparse_folder_gives_the_dense_files_labels() {
    let dir = tempfile::tempdir().unwrap();
    let (n, d) = (3_000, 40);
    // Each row: a few values in its group's band of columns.
    let x: Vec<f64> = (0..n * d)
        .map(|k| {
            let (i, j) = (k / d, k % d);
            if j / 8 == i % 5 && (i * 7 + j * 3) % 4 != 0 {
                ((i * 13 + j * 5) % 9) as f64 * 0.5 + 0.5
            } else {
                0.0
            }
        })
        .collect();
    let csr = dir.path().join("X");
    write_csr(&csr, &x, n, d);
    let dense = p(dir.path(), "x.npy");
    write_f64(&dense, &[n, d], &x);
    let run = |input: &str, out: &str| {
        let o = memfit(&[
            "kmeans",
            input,
            "-k",
            "5",
            "--seed",
            "3",
            "--memory-limit",
            "64MiB",
            "--quiet",
            "--labels",
            &p(dir.path(), &format!("{out}.labels.npy")),
            "--centers",
            &p(dir.path(), &format!("{out}.centers.npy")),
            "--summary",
            &p(dir.path(), &format!("{out}.json")),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let s = summary(&p(dir.path(), &format!("{out}.json")));
        (
            read_f64(&p(dir.path(), &format!("{out}.labels.npy"))).0,
            read_f64(&p(dir.path(), &format!("{out}.centers.npy"))).0,
            s,
        )
    };
    let (sl, sc, ss) = run(&csr.to_string_lossy(), "sparse");
    let (dl, dc, ds) = run(&dense, "dense");
    assert_eq!(sl, dl);
    assert_eq!(sc, dc);
    assert_eq!(ss["n_iter"], ds["n_iter"]);
    let (a, b) = (ss["inertia"].as_f64().unwrap(), ds["inertia"].as_f64().unwrap());
    assert!((a - b).abs() <= 1e-12 * b, "{a} {b}");
    // predict reads the folder too.
    let o = memfit(&[
        "predict",
        &csr.to_string_lossy(),
        "--centers",
        &p(dir.path(), "dense.centers.npy"),
        "--labels",
        &p(dir.path(), "pred.npy"),
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(read_f64(&p(dir.path(), "pred.npy")).0, dl);
    // A mixture does not read it; a folder missing an array names it; a
    // row with unsorted columns is refused with its row.
    let o = memfit(&["gmm", &csr.to_string_lossy(), "-k", "2", "--model", &p(dir.path(), "m")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("only kmeans and predict read a sparse (CSR) matrix"), "{}", stderr(&o));
    // A CSC matrix saved by scipy (format.npy says so) is not read as its transpose.
    let csc = dir.path().join("csc");
    write_csr(&csc, &x[..4 * d], 4, d);
    write_format(&csc, "csc");
    let o = memfit(&["kmeans", &csc.to_string_lossy(), "-k", "2"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("the matrix is stored as \"csc\"; only CSR is read"), "{}", stderr(&o));
    // Without format.npy, the arrays could be a CSC matrix's: refused.
    std::fs::remove_file(csc.join("format.npy")).unwrap();
    let o = memfit(&["kmeans", &csc.to_string_lossy(), "-k", "2"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("format.npy: missing; a sparse (CSR) matrix's arrays come with format.npy"),
        "{}",
        stderr(&o)
    );
    std::fs::remove_file(csr.join("shape.npy")).unwrap();
    let o = memfit(&["kmeans", &csr.to_string_lossy(), "-k", "2"]);
    assert!(stderr(&o).contains("shape.npy is missing"), "{}", stderr(&o));
    let bad = dir.path().join("bad");
    write_csr(&bad, &x[..2 * d], 2, d);
    let mut indices = read_f64(&p(&bad, "indices.npy")).0;
    indices.swap(0, 1);
    let swapped: Vec<i32> = indices.iter().map(|&v| v as i32).collect();
    write_ints(&p(&bad, "indices.npy"), Dtype::I32, &[swapped.len()], &swapped, |v: i32| v.to_le_bytes().to_vec());
    let o = memfit(&["kmeans", &bad.to_string_lossy(), "-k", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("row 0's column indices are not strictly increasing"), "{}", stderr(&o));
    // A Zarr array is named as one (it was taken for a sparse folder
    // missing its shape.npy).
    let z = dir.path().join("x.zarr");
    std::fs::create_dir(&z).unwrap();
    std::fs::write(z.join("zarr.json"), "{}").unwrap();
    for cmd in ["kmeans", "gmm"] {
        let o = memfit(&[cmd, &z.to_string_lossy(), "-k", "2"]);
        assert!(!o.status.success() && stderr(&o).contains("x.zarr: is a Zarr array or group"), "{}", stderr(&o));
    }
}

/// Outputs and model folders inside an existing model folder are refused
/// (a later fit would not replace that folder); the folder is unchanged.
#[test]
fn outputs_inside_another_model_folder_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let x = p(t.path(), "x.npy");
    write_f64(&x, &[300, 2], &blobs(300));
    let model = p(t.path(), "mdl");
    let o = memfit(&["gmm", &x, "-k", "2", "--model", &model, "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let before = entries(Path::new(&model));
    let (sub, labels) = (p(Path::new(&model), "sub"), p(Path::new(&model), "l.npy"));
    for (args, flag) in [
        (vec!["gmm", &x, "-k", "2", "--model", &sub], "--model"),
        (vec!["gmm", &x, "-k", "2", "--model", &p(t.path(), "other"), "--labels", &labels], "--labels"),
        (vec!["kmeans", &x, "-k", "2", "--labels", &labels], "--labels"),
    ] {
        let o = memfit(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let e = stderr(&o);
        assert!(e.contains(&format!("{flag} lies inside the memfit model folder")), "{e}");
    }
    assert_eq!(entries(Path::new(&model)), before);
    // The folder itself is still replaced by a fit.
    let o = memfit(&["gmm", &x, "-k", "3", "--model", &model, "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// A scatter's plan tiles rows only (it said "tile: 256 rows × 0 centres").
#[test]
fn a_scatter_plan_names_no_centres() {
    let t = tempfile::tempdir().unwrap();
    let x = p(t.path(), "x.npy");
    write_f64(&x, &[10, 2], &[1.0; 20]);
    let o = memfit(&["scatter", &x, "--out", &p(t.path(), "s.npy"), "--dry-run"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && out.contains("; tile: ") && !out.contains("centres;"), "{out}");
}
