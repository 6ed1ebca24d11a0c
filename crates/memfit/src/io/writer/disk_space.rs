//! Free disk space checked before anything is written, per file system.

use std::path::{Path, PathBuf};

use super::paths::resolve_output;
use crate::error::{Error, Result};

/// A file or folder a job will write, with its bytes, for
/// [`check_disk_space`].
#[derive(Debug, Clone, serde::Serialize)]
pub struct PlannedWrite {
    /// What it is, in the caller's words (`"labels"`, `"model folder"`,
    /// `"scratch files"`); may be empty.
    pub name: String,
    /// The file or folder created, or (with `inside`) the folder files are
    /// created in.
    #[serde(serialize_with = "lossy_path")]
    pub path: PathBuf,
    /// Whether the files are created inside `path` (scratch files) rather
    /// than at `path`.
    pub inside: bool,
    /// Bytes written.
    pub bytes: u64,
}

impl PlannedWrite {
    /// An output file or folder created at `path`.
    pub fn at(name: impl Into<String>, path: impl Into<PathBuf>, bytes: u64) -> Self {
        PlannedWrite { name: name.into(), path: path.into(), inside: false, bytes }
    }

    /// Files created inside the folder `dir`.
    pub fn inside(name: impl Into<String>, dir: impl Into<PathBuf>, bytes: u64) -> Self {
        PlannedWrite { name: name.into(), path: dir.into(), inside: true, bytes }
    }

    /// The folder whose file system receives the bytes.
    fn folder(&self) -> PathBuf {
        if self.inside {
            return self.path.clone();
        }
        match resolve_output(&self.path).parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        }
    }
}

/// A path as JSON text: its bytes as UTF-8, invalid sequences replaced.
fn lossy_path<S: serde::Serializer>(path: &Path, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&path.to_string_lossy())
}

/// Checks that each output's filesystem has room for it, before anything is
/// written: `outputs` pairs a path with the bytes it will hold (see
/// [`check_disk_space`]).
///
/// # Errors
/// As [`check_disk_space`].
pub fn check_free_space(outputs: &[(&Path, u64)]) -> Result<()> {
    let writes: Vec<PlannedWrite> = outputs.iter().map(|&(p, b)| PlannedWrite::at("", p, b)).collect();
    check_disk_space(&writes)
}

/// Checks, before anything is written, that every file system has room for
/// what `writes` puts there: writes on the same file system are added up
/// (outputs and scratch files may lie on different ones). Free space is
/// what `statvfs` says an unprivileged writer may use (`f_bavail ×
/// f_frsize`) in the receiving folder; an existing file being replaced is
/// not counted, since the new one is written beside it before the rename.
/// A folder whose free space cannot be read (no `statvfs`, a missing
/// folder, reported elsewhere) or whose file system has no blocks at all
/// (`/proc`, `/sys`: the write itself then fails with the system's reason)
/// is not checked.
///
/// # Errors
/// [`Error::NoDiskSpace`] for the first file system short of room, naming
/// its first path, the bytes needed and available, and what goes there.
pub fn check_disk_space(writes: &[PlannedWrite]) -> Result<()> {
    let mut per_fs: Vec<(u64, u64, Vec<&PlannedWrite>)> = Vec::new(); // (fsid, available, writes)
    for w in writes.iter().filter(|w| w.bytes > 0) {
        let Ok(st) = rustix::fs::statvfs(w.folder()) else { continue };
        if st.f_blocks == 0 {
            continue;
        }
        match per_fs.iter_mut().find(|f| f.0 == st.f_fsid) {
            Some(f) => f.2.push(w),
            None => per_fs.push((st.f_fsid, st.f_bavail.saturating_mul(st.f_frsize), vec![w])),
        }
    }
    per_fs.iter().try_for_each(|(_, available, ws)| check_room(*available, ws))
}

/// Fails when `writes`, all on one file system, need more than `available`
/// bytes.
///
/// # Errors
/// [`Error::NoDiskSpace`].
fn check_room(available: u64, writes: &[&PlannedWrite]) -> Result<()> {
    let needed = writes.iter().fold(0u64, |a, w| a.saturating_add(w.bytes));
    if needed <= available {
        return Ok(());
    }
    Err(Error::NoDiskSpace {
        path: writes[0].path.clone(),
        needed_bytes: needed,
        available_bytes: available,
        writes: writes.iter().map(|w| (w.name.clone(), w.bytes)).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{npy_file_bytes, Dtype, NpyWriter};

    #[test]
    fn free_space_is_checked_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.npy"), dir.path().join("b.npy"));
        let st = rustix::fs::statvfs(dir.path()).unwrap();
        let available = st.f_bavail * st.f_frsize;
        assert!(check_free_space(&[(&a, 1 << 20)]).is_ok());
        // Each fits alone, not together: outputs on one filesystem add up.
        let half = available / 2 + available / 8 + 1;
        assert!(check_free_space(&[(&a, half)]).is_ok());
        let e = check_free_space(&[(&a, half), (&b, half)]).unwrap_err();
        assert!(matches!(&e, Error::NoDiskSpace { needed_bytes, .. } if *needed_bytes == 2 * half), "{e}");
        let text = e.to_string();
        assert!(text.contains("a.npy") && text.contains(&format!("{} bytes", 2 * half)), "{text}");
        // An array larger than any disk is refused by its writer, leaving nothing.
        let e = NpyWriter::create(&a, Dtype::F64, &[1 << 40, 1 << 20]).unwrap_err().to_string();
        assert!(e.contains("not enough free disk space") && e.contains("available"), "{e}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        assert_eq!(npy_file_bytes(Dtype::F64, &[usize::MAX, 2]), u64::MAX);
        assert_eq!(npy_file_bytes(Dtype::I32, &[10]), 128 + 40);
    }

    /// A pseudo file system (no blocks at all) has no free space to check:
    /// writing there fails with the system's own reason instead.
    #[test]
    fn a_file_system_without_blocks_is_not_called_full() {
        let proc = Path::new("/proc/version");
        if rustix::fs::statvfs("/proc").is_ok_and(|st| st.f_blocks == 0) {
            assert!(check_free_space(&[(proc, 1 << 40)]).is_ok());
        }
    }

    /// Outputs and scratch files are added up per file system, each against
    /// its own free space; the error names what goes there.
    #[test]
    fn room_is_counted_per_file_system() {
        let scratch = PlannedWrite::inside("scratch files", "/s", 30 << 20);
        let model = PlannedWrite::at("model folder", "/s/model", 15 << 20);
        let labels = PlannedWrite::at("labels", "/o/labels.npy", 1 << 20);
        assert!(check_room(40 << 20, &[&scratch]).is_ok());
        assert!(check_room(40 << 20, &[&labels]).is_ok());
        let e = check_room(40 << 20, &[&scratch, &model]).unwrap_err();
        assert!(
            matches!(&e, Error::NoDiskSpace { needed_bytes, available_bytes, writes, .. }
                if *needed_bytes == 45 << 20 && *available_bytes == 40 << 20 && writes.len() == 2),
            "{e}"
        );
        let text = e.to_string();
        assert!(
            text.starts_with("/s: not enough free disk space")
                && text.contains("(scratch files 30.00 MiB, model folder 15.00 MiB) need 47185920 bytes (45.00 MiB)")
                && text.contains("41943040 bytes (40.00 MiB) are available; nothing was written"),
            "{text}"
        );
        // Scratch files are created inside their folder, outputs beside their path.
        assert_eq!(scratch.folder(), Path::new("/s"));
        assert_eq!(model.folder(), Path::new("/s"));
        assert_eq!(PlannedWrite::at("", "l.npy", 1).folder(), Path::new("."));
    }
}
