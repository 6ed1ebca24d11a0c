//! Output paths checked before a job: where a file may be created, and
//! outputs that must not coincide with each other or with inputs.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The file an output path finally names: a symlink is followed, so the
/// atomic rename replaces its target and the link stays.
pub(crate) fn resolve_output(path: &Path) -> PathBuf {
    let mut p = path.to_path_buf();
    // Bounded, in case of a link cycle.
    for _ in 0..40 {
        match std::fs::read_link(&p) {
            Ok(target) => p = p.parent().map_or(target.clone(), |dir| dir.join(&target)),
            Err(_) => break,
        }
    }
    p
}

/// The absolute path `path` names, for comparing paths: a final symlink
/// followed ([`resolve_output`]), its folder made canonical; a path that
/// does not exist yet is its absolute folder and name.
pub(crate) fn resolved_path(path: &Path) -> PathBuf {
    let p = resolve_output(path);
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
    dir.join(p.file_name().unwrap_or_default())
}

/// Why a file cannot be created in `dir`, which is not a folder: it is a
/// file (kind `NotADirectory`), or it does not exist (`NotFound`).
pub(crate) fn missing_folder(dir: &Path) -> std::io::Error {
    if dir.exists() {
        let why = format!("{} is not a folder (it is a file); hint: name a file in a folder", dir.display());
        return std::io::Error::new(std::io::ErrorKind::NotADirectory, why);
    }
    std::io::Error::new(std::io::ErrorKind::NotFound, format!("folder {} does not exist", dir.display()))
}

/// Longest file name, in bytes (Linux's `NAME_MAX`).
const NAME_MAX: usize = 255;

/// Refuses an output whose name is longer than file systems allow, which
/// would fail only when the finished output is linked into place, after
/// the work (and after the job's other outputs).
///
/// # Errors
/// [`Error::Io`] saying how long the name is.
pub(crate) fn check_name_length(path: &Path) -> Result<()> {
    let name = path.file_name().map_or(0, |n| n.as_encoded_bytes().len());
    if name > NAME_MAX {
        let why = format!(
            "its name is {name} bytes long, more than the {NAME_MAX} file systems allow; hint: use a shorter name"
        );
        return Err(Error::io(path, "create", std::io::Error::other(why)));
    }
    Ok(())
}

/// Checks, before any long computation, that an output file could be created:
/// its folder exists and takes a new file (a read-only file system or a
/// folder without write permission is found now, by creating and removing
/// an empty hidden file there, not after the work), and the path is either
/// absent or a regular file (a symlink to one is followed) that this user
/// may replace. Devices, pipes and directories are refused, since the
/// atomic rename would replace them; so are read-only files (as `numpy.save`
/// refuses them) and another user's file in a sticky folder.
///
/// # Errors
/// [`Error::Io`] with kind `NotFound` when the folder is missing
/// (`NotADirectory` when it is a file), a message saying why the folder
/// takes no file, or why the path may not be replaced.
pub fn check_output_path(path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    if path == Path::new("-") {
        return Err(Error::io(
            path,
            "create",
            std::io::Error::other("this output cannot go to stdout; hint: name a file"),
        ));
    }
    // An empty path, or one ending in a separator, names no file.
    if path.as_os_str().is_empty() || path.as_os_str().as_encoded_bytes().ends_with(b"/") {
        return Err(Error::io(path, "create", std::io::Error::other("this path names no file; hint: name a file")));
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(Error::io(path, "create", missing_folder(dir)));
    }
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => Err(Error::io(
            path,
            "create",
            std::io::Error::other(
                "it exists and is not a regular file (a directory, device or pipe); hint: name a new file",
            ),
        )),
        existing => {
            // Where the file `path` finally names is written (its temporary beside it).
            let target = resolve_output(path);
            let folder = match target.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            if let Ok(file) = existing {
                check_replaceable(path, &target, &file, folder)?;
            }
            probe_dir(folder, path)
        }
    }
}

/// Checks that the existing file `target` (what `path` names) may be
/// replaced: it is writable by this user, as `numpy.save` and the shell's
/// `>` need (a rename could replace a read-only file), and it does not
/// belong to another user in a sticky folder such as `/tmp`, where the
/// rename would fail after the work.
fn check_replaceable(path: &Path, target: &Path, file: &std::fs::Metadata, folder: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let refuse = |why: &str| Err(Error::io(path, "replace", std::io::Error::other(why.to_string())));
    if rustix::fs::access(target, rustix::fs::Access::WRITE_OK).is_err() {
        return refuse("the file exists and is read-only; hint: make it writable (chmod u+w) or name another file");
    }
    let me = rustix::process::geteuid().as_raw();
    let sticky = std::fs::metadata(folder).is_ok_and(|d| d.mode() & 0o1000 != 0 && d.uid() != me);
    if sticky && me != 0 && file.uid() != me {
        return refuse(
            "the file belongs to another user, in a folder where only a file's owner may replace it (sticky, \
             as /tmp); hint: name another file",
        );
    }
    Ok(())
}

/// Checks that the output `path` has a legal name ([`check_name_length`])
/// and that the folder `dir` takes a new file, by creating and removing
/// an empty hidden one; errors name the output `path`.
///
/// # Errors
/// [`Error::Io`] with the creation's error (a read-only file system, no
/// permission).
pub(crate) fn probe_dir(dir: &Path, path: &Path) -> Result<()> {
    check_name_length(path)?;
    static PROBES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = PROBES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let probe = dir.join(format!(".memfit-probe-{}-{n}", std::process::id()));
    match std::fs::OpenOptions::new().write(true).create_new(true).open(&probe) {
        Ok(file) => {
            drop(file);
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        // The folder exists, so "not found" is its file system refusing
        // new files (procfs, sysfs), not a missing path.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let why = format!("folder {} cannot hold new files ({e}); hint: write elsewhere", dir.display());
            Err(Error::io(path, "create", std::io::Error::other(why)))
        }
        // The file may not exist yet: the folder is what refuses.
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            let why = format!(
                "folder {} does not let this user create files ({e}); hint: write elsewhere or change the folder's \
                 permissions",
                dir.display()
            );
            Err(Error::io(path, "create", std::io::Error::new(e.kind(), why)))
        }
        Err(e) => Err(Error::io(path, "create", e)),
    }
}

/// The error for `role`'s `path`, which lies inside the model folder `model`.
fn inside_model((role, path): (&'static str, &Path), model: &Path) -> Error {
    Error::param(
        role,
        format!(
            "{role} lies inside the memfit model folder {} ({}); hint: keep inputs and outputs outside model folders",
            model.display(),
            path.display()
        ),
    )
}

/// Name of the description file that makes a folder a memfit model folder.
pub const MODEL_JSON: &str = "model.json";

/// Whether `dir` is a memfit model folder: it holds a [`MODEL_JSON`] whose
/// `format` starts with `memfit-`.
pub fn is_model_folder(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join(MODEL_JSON))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .is_some_and(|j| j["format"].as_str().is_some_and(|f| f.starts_with("memfit-")))
}

/// Fails when an output names the same file as another output or as an
/// input (inputs may coincide with each other), or lies inside one of
/// `folders` (a model folder that is replaced or read) or inside another
/// memfit model folder ([`is_model_folder`]: a later fit would not replace
/// it); inputs may not lie inside a folder that is replaced (the `bool` of
/// its entry), which may not lie inside a model folder either. Each entry
/// pairs a role (how the front-end names it, e.g. `labels`) with a path;
/// paths that do not exist yet are compared by their absolute folder and
/// name.
///
/// # Errors
/// [`Error::InvalidParameter`] naming both roles.
pub fn check_outputs_distinct(
    outputs: &[(&'static str, &Path)],
    inputs: &[(&'static str, &Path)],
    folders: &[(&'static str, &Path, bool)],
) -> Result<()> {
    let key = resolved_path;
    let clash = |a: &(&'static str, &Path), b: &(&'static str, &Path), how: &str| {
        Error::param(
            a.0,
            format!(
                "{} {how} {} ({}); hint: give each output its own file, and keep inputs and outputs outside model folders",
                a.0,
                b.0,
                a.1.display()
            ),
        )
    };
    let outs: Vec<PathBuf> = outputs.iter().map(|(_, p)| key(p)).collect();
    for (i, o) in outs.iter().enumerate() {
        if let Some(j) = outs[..i].iter().position(|q| q == o) {
            return Err(clash(&outputs[i], &outputs[j], "names the same file as"));
        }
        if let Some(input) = inputs.iter().find(|(_, p)| key(p) == *o) {
            return Err(clash(&outputs[i], input, "names the same file as"));
        }
        if let Some(&(role, f, _)) = folders.iter().find(|(_, f, _)| o.starts_with(key(f))) {
            return Err(clash(&outputs[i], &(role, f), "lies inside the folder of"));
        }
        if let Some(m) = o.ancestors().skip(1).find(|a| is_model_folder(a)) {
            return Err(inside_model(outputs[i], m));
        }
    }
    for &(role, f, _) in folders.iter().filter(|(_, _, replaced)| *replaced) {
        if let Some(m) = key(f).ancestors().skip(1).find(|a| is_model_folder(a)) {
            return Err(inside_model((role, f), m));
        }
    }
    for input in inputs {
        if let Some(&(role, f, _)) =
            folders.iter().find(|(_, f, replaced)| *replaced && key(input.1).starts_with(key(f)))
        {
            return Err(clash(input, &(role, f), "lies inside the folder of"));
        }
    }
    Ok(())
}
