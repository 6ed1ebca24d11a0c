//! The CUDA side of [`crate::device`] (the `cuda` feature): probing the
//! driver without crashing, and the kernels' CUDA C sources, compiled at run
//! time by NVRTC.
//!
//! `cudarc` loads the driver (`libcuda`) and NVRTC (`libnvrtc`) when first
//! used and panics when they are missing, so [`probe`] and [`compile`] ask
//! whether each library is present first. It also panics when a library
//! loads but lacks a function it calls (a stub or a driver older than the
//! CUDA version memfit is built for): [`probe`] runs the driver's calls
//! under `without_panics`, which turns such a panic into an error.

use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

mod ops;

pub(crate) use ops::ops;

use cudarc::driver::{CudaContext, DriverError};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions, Ptx};

/// A kernel source: its name (the file it comes from) and its CUDA C text.
#[derive(Debug, Clone, Copy)]
pub struct KernelSource {
    /// The source's name, `kmeans.cu`.
    pub name: &'static str,
    /// The CUDA C text.
    pub text: &'static str,
    /// The kernels it defines (`extern "C"` names).
    pub kernels: &'static [&'static str],
}

/// Every kernel source of the backend.
pub const SOURCES: &[KernelSource] = &[
    KernelSource { name: "kmeans.cu", text: include_str!("kmeans.cu"), kernels: &["assign_float", "assign_double"] },
    KernelSource {
        name: "gaussian.cu",
        text: include_str!("gaussian.cu"),
        kernels: &["log_prob_float", "log_prob_double"],
    },
];

/// Whether NVRTC's library can be loaded.
pub fn nvrtc_present() -> bool {
    // SAFETY: only loads the library and looks its symbols up.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// Compiles `source` to PTX with the options that keep the host's bits: no
/// contraction of multiplies and adds into fused multiply-adds, IEEE
/// division and square roots, denormals kept.
///
/// # Errors
/// Why it could not be compiled: NVRTC missing, or the compiler's log.
pub fn compile(source: &KernelSource) -> std::result::Result<Ptx, String> {
    if !nvrtc_present() {
        return Err("no NVRTC library (libnvrtc) found".into());
    }
    let opts = CompileOptions {
        fmad: Some(false),
        prec_div: Some(true),
        prec_sqrt: Some(true),
        ftz: Some(false),
        name: Some(source.name.into()),
        ..Default::default()
    };
    compile_ptx_with_opts(source.text, opts).map_err(|e| format!("{}: {e}", source.name))
}

/// Opens CUDA device `ordinal` and returns its name and total memory in
/// bytes.
///
/// # Errors
/// Why it cannot be used, in words: no driver library, no device at that
/// ordinal, or the driver's error.
pub fn probe(ordinal: usize) -> std::result::Result<(String, u64), String> {
    // SAFETY: only loads the library and looks its symbols up.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(driver_library_error());
    }
    without_panics(INCOMPLETE_DRIVER, || {
        let count = CudaContext::device_count().map_err(driver_failed)?;
        if ordinal >= count.max(0) as usize {
            return Err(format!("no CUDA device {ordinal} (the driver sees {count})"));
        }
        let ctx = CudaContext::new(ordinal).map_err(driver_failed)?;
        let name = ctx.name().map_err(driver_failed)?;
        let total = ctx.total_mem().map_err(driver_failed)?;
        Ok((name, total as u64))
    })
}

/// Why no driver library loads: none of the names the driver bindings try
/// is there (no NVIDIA driver is installed), or one is and the loader
/// refuses it (a broken install, another architecture's library): the
/// loader's own words for the first refused.
fn driver_library_error() -> String {
    let names = ["cuda", "nvcuda"].into_iter().flat_map(cudarc::get_lib_name_candidates);
    let refused = names
        // SAFETY: as `is_culib_present`: only loads the library (and
        // unloads it).
        .filter_map(|name| unsafe { libloading::Library::new(&name) }.err())
        // The loader's description (`dlerror`'s), not libloading's summary.
        .map(|e| std::error::Error::source(&e).map_or_else(|| e.to_string(), ToString::to_string))
        .find(|why| !why.contains("No such file or directory"));
    match refused {
        None => "no CUDA driver library (libcuda) was found: no NVIDIA driver is installed".into(),
        Some(why) => format!("the CUDA driver library (libcuda) is there but does not load: {why}"),
    }
}

/// A driver error in words: the driver's own description and its code
/// (`the CUDA driver failed: no CUDA-capable device is detected
/// (CUDA_ERROR_NO_DEVICE)`).
fn driver_failed(e: DriverError) -> String {
    let text = |r: std::result::Result<&std::ffi::CStr, DriverError>| r.ok().map(|s| s.to_string_lossy().into_owned());
    match (text(e.error_string()), text(e.error_name())) {
        (Some(what), Some(code)) => format!("the CUDA driver failed: {what} ({code})"),
        (Some(what), None) => format!("the CUDA driver failed: {what} (error {})", e.0 as u32),
        _ => format!("the CUDA driver failed with error {}", e.0 as u32),
    }
}

thread_local! {
    /// Whether this thread's panics are being caught by [`without_panics`]
    /// (and so not printed).
    static CATCHING: Cell<bool> = const { Cell::new(false) };
}

/// What a panic of the driver bindings while probing means.
const INCOMPLETE_DRIVER: &str =
    "the CUDA driver library is incomplete or older than this memfit needs (CUDA 12.8 or later)";

/// Runs `f`, turning a panic inside it (`cudarc`'s, for a function missing
/// from the driver library, or a bug) into the error `"{meaning}: {the
/// panic's message}"`, without printing it. The panic hook is wrapped once:
/// other threads' panics, and this thread's outside `f`, are printed as
/// before.
fn without_panics<T>(
    meaning: &str,
    f: impl FnOnce() -> std::result::Result<T, String>,
) -> std::result::Result<T, String> {
    static WRAP_HOOK: Once = Once::new();
    WRAP_HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !CATCHING.with(Cell::get) {
                previous(info);
            }
        }));
    });
    let was = CATCHING.with(|c| c.replace(true));
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    CATCHING.with(|c| c.set(was));
    result.unwrap_or_else(|payload| {
        let why = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("a panic in the driver bindings");
        Err(format!("{meaning}: {why}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kernel source compiles with NVRTC, and defines its kernels.
    /// Without NVRTC the test passes with a note, unless
    /// `MEMFIT_REQUIRE_NVRTC` is set (CI installs NVRTC and sets it).
    #[test]
    fn kernel_sources_compile_with_nvrtc() {
        if !nvrtc_present() {
            assert!(
                std::env::var_os("MEMFIT_REQUIRE_NVRTC").is_none(),
                "MEMFIT_REQUIRE_NVRTC is set but no NVRTC library loads (check LD_LIBRARY_PATH)"
            );
            eprintln!("note: no NVRTC library: kernel sources not compiled");
            return;
        }
        for s in SOURCES {
            let ptx = compile(s).unwrap_or_else(|e| panic!("{e}"));
            let text = ptx.to_src();
            for k in s.kernels {
                assert!(text.contains(&format!(".entry {k}(")), "{}: no kernel {k}", s.name);
            }
            // No contraction: the distance kernels hold no fused
            // multiply-add (the sums' are written as fma()).
            for entry in text.split(".visible .entry ").skip(1).filter(|e| e.starts_with("assign_")) {
                assert!(!entry.contains("fma.rn"), "{}: a fused multiply-add in {}", s.name, &entry[..20]);
            }
        }
    }

    #[test]
    fn a_panic_in_the_driver_bindings_is_an_error() {
        let e = without_panics::<()>(INCOMPLETE_DRIVER, || panic!("Missing symbol cuDeviceGetCount: undefined symbol"))
            .unwrap_err();
        assert!(e.starts_with("the CUDA driver library is incomplete or older than this memfit needs"), "{e}");
        assert!(e.ends_with("Missing symbol cuDeviceGetCount: undefined symbol"), "{e}");
        assert_eq!(without_panics("x", || Ok(3)), Ok(3));
    }

    /// A `libcuda.so` the loader refuses is reported in the loader's words,
    /// not as a missing driver: this test runs itself again in a child
    /// process whose `LD_LIBRARY_PATH` holds a file of that name that is
    /// not a library. Skipped where a driver loads (a GPU machine's).
    #[test]
    fn a_driver_library_that_does_not_load_is_reported_as_such() {
        const CHILD: &str = "MEMFIT_TEST_PROBE_CHILD";
        if std::env::var_os(CHILD).is_some() {
            println!("probe: {}", probe(0).unwrap_err());
            return;
        }
        // SAFETY: only loads the library and looks its symbols up.
        if unsafe { cudarc::driver::sys::is_culib_present() } {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("libcuda.so"), b"not a shared library").unwrap();
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "device::cuda::tests::a_driver_library_that_does_not_load_is_reported_as_such"])
            .args(["--nocapture", "--test-threads", "1"])
            .env(CHILD, "1")
            .env("LD_LIBRARY_PATH", dir.path())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        // The harness may print the test's name on the same line first.
        let line = text.lines().find_map(|l| l.find("probe: ").map(|i| &l[i..])).unwrap_or_else(|| panic!("{text}"));
        assert!(line.contains("the CUDA driver library (libcuda) is there but does not load: "), "{line}");
        assert!(line.contains("libcuda.so"), "{line}");
        // And without it: not found.
        assert!(driver_library_error().starts_with("no CUDA driver library (libcuda) was found"));
    }

    #[test]
    fn a_bad_source_reports_the_compilers_log() {
        if !nvrtc_present() {
            return;
        }
        let bad = KernelSource {
            name: "bad.cu",
            text: "extern \"C\" __global__ void k() { undefined_name(); }",
            kernels: &[],
        };
        let e = compile(&bad).unwrap_err();
        assert!(e.starts_with("bad.cu: ") && e.contains("undefined_name"), "{e}");
    }
}
