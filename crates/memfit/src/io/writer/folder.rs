//! Folders of files (a model folder) put in place whole, only when complete.
//!
//! Every file is staged beside the destination folder, unnamed where the
//! system allows (see [`Staged`]), so however long the writing takes, a
//! process killed meanwhile, by SIGKILL included, leaves nothing. The
//! commit then takes a few system calls: a hidden folder
//! `.NAME.XXXXXX.tmp` is created, the files are linked into it, and it is
//! renamed to the destination, or atomically exchanged with an existing
//! one (`renameat2(RENAME_EXCHANGE)`), whose files are then removed under
//! the hidden name. A kill within those calls leaves that hidden folder:
//! the only window. While it exists it is listed for
//! [`remove_unfinished_outputs`](super::remove_unfinished_outputs).

use std::path::{Path, PathBuf};

use super::atomic::AtomicFile;
use super::disk_space::{check_disk_space, PlannedWrite};
use super::npy::{npy_file_bytes, NpyWriter};
use super::staged::{hidden_prefix, Staged};
use super::unfinished::Unfinished;
use crate::error::{Error, Result};
use crate::io::dtype::Dtype;

/// A folder being written: files are added to it one by one, and
/// [`AtomicFolder::commit`] puts them at the destination together,
/// replacing a folder there. Dropping it uncommitted leaves nothing.
#[derive(Debug)]
pub struct AtomicFolder {
    dest: PathBuf,
    parent: PathBuf,
    files: Vec<(PathBuf, Staged)>,
}

impl AtomicFolder {
    /// Starts a folder to be put at `dest`, whose parent folder must exist
    /// (the caller decides whether a folder at `dest` may be replaced).
    pub fn new(dest: impl AsRef<Path>) -> Self {
        let dest = dest.as_ref().to_path_buf();
        let parent = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        AtomicFolder { dest, parent, files: Vec::new() }
    }

    /// Starts the file `name` of the folder; hand it back with
    /// [`AtomicFolder::add`] once written.
    ///
    /// # Errors
    /// [`Error::Io`] when the parent folder is missing or not writable.
    pub fn file(&self, name: &str) -> Result<AtomicFile> {
        AtomicFile::staged_in(&self.parent, self.dest.join(name))
    }

    /// Starts the `.npy` array `name` of `dtype` and `shape`; hand it back
    /// with [`AtomicFolder::add_npy`] once written.
    ///
    /// # Errors
    /// As [`AtomicFolder::file`]; [`Error::NoDiskSpace`] when the file
    /// system lacks room for the array.
    pub fn npy(&self, name: &str, dtype: Dtype, shape: &[usize]) -> Result<NpyWriter> {
        check_disk_space(&[PlannedWrite::inside(name, &self.parent, npy_file_bytes(dtype, shape))])?;
        NpyWriter::start(self.file(name)?, dtype, shape)
    }

    /// Adds a written file to the folder.
    ///
    /// # Errors
    /// [`Error::Io`] when flushing or syncing it fails.
    pub fn add(&mut self, file: AtomicFile) -> Result<()> {
        let (path, staged) = file.finish()?;
        self.files.push((path, staged));
        Ok(())
    }

    /// Adds a written array to the folder.
    ///
    /// # Errors
    /// As [`AtomicFolder::add`].
    ///
    /// # Panics
    /// If fewer elements were written than its shape holds.
    pub fn add_npy(&mut self, array: NpyWriter) -> Result<()> {
        self.add(array.complete())
    }

    /// Puts the files added at the destination folder, replacing a folder
    /// there.
    ///
    /// # Errors
    /// [`Error::Io`] when the folder cannot be created, linked or renamed;
    /// nothing is left and a folder replaced is kept.
    pub fn commit(self) -> Result<()> {
        let dest = &self.dest;
        let name = dest.file_name().unwrap_or_default();
        remove_stale(&self.parent, name);
        // `.NAME.PID.XXXXXX.tmp`: the process that stages it is named.
        let tmp = tempfile::Builder::new()
            .prefix(&format!("{}{}.", hidden_prefix(name), std::process::id()))
            .suffix(".tmp")
            .tempdir_in(&self.parent)
            .map_err(|e| Error::io(dest, "create", e))?;
        let _listed = Unfinished::new_dir(tmp.path());
        // A replaced folder and its files keep their permission bits (the
        // folder's set once its files are in).
        for (path, staged) in self.files {
            let name = path.file_name().unwrap_or_default();
            staged.keep_mode_of(&dest.join(name));
            staged.persist(&tmp.path().join(name)).map_err(|e| Error::io(&path, "rename", e))?;
        }
        if let Ok(meta) = std::fs::metadata(dest) {
            if meta.is_dir() {
                let _ = std::fs::set_permissions(tmp.path(), super::staged::rwx_of(&meta));
            }
        }
        if std::fs::symlink_metadata(dest).is_err() {
            std::fs::rename(tmp.path(), dest).map_err(|e| Error::io(dest, "rename", e))?;
            let _kept = tmp.keep();
            return Ok(());
        }
        #[cfg(target_os = "linux")]
        {
            use rustix::fs::{renameat_with, RenameFlags, CWD};
            use rustix::io::Errno;
            match renameat_with(CWD, tmp.path(), CWD, dest.as_path(), RenameFlags::EXCHANGE) {
                // The old files, now under the hidden name, go with `tmp`.
                Ok(()) => return Ok(()),
                Err(Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) => {}
                Err(e) => return Err(Error::io(dest, "rename", e.into())),
            }
        }
        replace_by_renames(tmp.keep(), dest)
    }
}

/// Removes what a run killed (SIGKILL leaves it no time) while it replaced
/// the folder `name` in `parent` left there: its staging folder
/// `.NAME.PID.XXXXXX.tmp` (holding the new files, or the old ones after the
/// exchange) and an old copy `.NAME.old.PID`, where process `PID` is gone.
/// Linux only (a live process is one listed in `/proc`).
fn remove_stale(parent: &Path, name: &std::ffi::OsStr) {
    #[cfg(target_os = "linux")]
    {
        let prefix = hidden_prefix(name);
        let Ok(entries) = std::fs::read_dir(parent) else { return };
        for e in entries.flatten() {
            let file = e.file_name();
            let Some(rest) = file.to_str().and_then(|f| f.strip_prefix(&prefix)) else { continue };
            let parts: Vec<&str> = rest.split('.').collect();
            let pid = match parts[..] {
                [pid, random, "tmp"] if random.len() == 6 => pid,
                ["old", pid] => pid,
                _ => continue,
            };
            let Ok(pid) = pid.parse::<u32>() else { continue };
            if pid != std::process::id() && !Path::new("/proc").join(pid.to_string()).exists() {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (parent, name);
}

/// Replaces the folder `dest` by `staged` where the two cannot be exchanged
/// at once: `dest` is renamed aside (`.NAME.old.PID`), `staged` renamed in
/// its place, then the old one removed; on failure the old one comes back.
fn replace_by_renames(staged: PathBuf, dest: &Path) -> Result<()> {
    let prefix = hidden_prefix(dest.file_name().unwrap_or_default());
    let old = staged.with_file_name(format!("{prefix}old.{}", std::process::id()));
    let _listed = (Unfinished::new_dir(&staged), Unfinished::new_dir(&old));
    if let Err(e) = std::fs::rename(dest, &old) {
        let _ = std::fs::remove_dir_all(&staged);
        return Err(Error::io(dest, "rename", e));
    }
    if let Err(e) = std::fs::rename(&staged, dest) {
        let _ = std::fs::remove_dir_all(&staged);
        let _ = std::fs::rename(&old, dest);
        return Err(Error::io(dest, "rename", e));
    }
    let _ = std::fs::remove_dir_all(&old);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::writer::names;

    fn write(folder: &mut AtomicFolder, text: &str, values: &[f64]) {
        let mut a = folder.npy("a.npy", Dtype::F64, &[values.len()]).unwrap();
        a.write_with(values, |v, o| o.extend_from_slice(&v.to_le_bytes())).unwrap();
        folder.add_npy(a).unwrap();
        let mut j = folder.file("model.json").unwrap();
        j.write_all(text.as_bytes()).unwrap();
        folder.add(j).unwrap();
    }

    /// Nothing shows in the parent folder (Linux: unnamed files) until the
    /// commit, which creates or replaces the folder whole; a drop leaves
    /// nothing and keeps the folder replaced.
    #[test]
    fn folders_appear_whole_on_commit() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("model");
        let mut f = AtomicFolder::new(&dest);
        write(&mut f, "one", &[1.0, 2.0]);
        #[cfg(target_os = "linux")]
        assert!(names(dir.path()).is_empty(), "{:?}", names(dir.path()));
        f.commit().unwrap();
        assert_eq!(names(dir.path()), ["model"]);
        assert_eq!(names(&dest), ["a.npy", "model.json"]);
        assert_eq!(std::fs::read_to_string(dest.join("model.json")).unwrap(), "one");
        // Dropped: the folder stays as it was.
        let mut f = AtomicFolder::new(&dest);
        write(&mut f, "dropped", &[3.0]);
        drop(f);
        assert_eq!(names(dir.path()), ["model"]);
        assert_eq!(std::fs::read_to_string(dest.join("model.json")).unwrap(), "one");
        // Replaced whole, an old file not written again included.
        std::fs::write(dest.join("old.txt"), "old").unwrap();
        let mut f = AtomicFolder::new(&dest);
        write(&mut f, "two", &[4.0; 1000]);
        f.commit().unwrap();
        assert_eq!(names(dir.path()), ["model"]);
        assert_eq!(names(&dest), ["a.npy", "model.json"]);
        assert_eq!(std::fs::read_to_string(dest.join("model.json")).unwrap(), "two");
        assert_eq!(crate::io::read_array_f64(dest.join("a.npy"), 1).unwrap().0, vec![4.0; 1000]);
        // A replaced folder and its files keep their modes (helper 135: a
        // private model folder became readable by all).
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        std::fs::set_permissions(dest.join("a.npy"), std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o700)).unwrap();
        let mut f = AtomicFolder::new(&dest);
        write(&mut f, "three", &[5.0]);
        f.commit().unwrap();
        assert_eq!((mode(&dest), mode(&dest.join("a.npy"))), (0o700, 0o600));
        assert_ne!(mode(&dest.join("model.json")), 0o600);
    }

    /// What a killed run left (found by trying memfit: a 77 MB hidden
    /// folder after a SIGKILL during the model's exchange) goes with the
    /// next commit of that folder; a live run's and other folders' stay.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_killed_runs_staging_folders_go_with_the_next_commit() {
        let dir = tempfile::tempdir().unwrap();
        let dead = 4_194_305; // above Linux's largest pid
        let live = std::process::id();
        let gone = [format!(".model.{dead}.abc123.tmp"), format!(".model.old.{dead}")];
        let kept =
            [".model.1.abc123.tmp".to_string(), format!(".model.x.{dead}.abc123.tmp"), format!(".model.{live}.zz")];
        for n in gone.iter().chain(&kept) {
            std::fs::create_dir(dir.path().join(n)).unwrap();
            std::fs::write(dir.path().join(n).join("means.npy"), "x").unwrap();
        }
        let mut f = AtomicFolder::new(dir.path().join("model"));
        write(&mut f, "one", &[1.0]);
        f.commit().unwrap();
        let mut want: Vec<String> = kept.to_vec();
        want.push("model".into());
        want.sort();
        assert_eq!(names(dir.path()), want);
    }

    /// The fallback where folders cannot be exchanged at once.
    #[test]
    fn folders_are_replaced_by_renames_where_they_cannot_be_exchanged() {
        let dir = tempfile::tempdir().unwrap();
        let (dest, staged) = (dir.path().join("model"), dir.path().join(".model.x.tmp"));
        for (d, text) in [(&dest, "old"), (&staged, "new")] {
            std::fs::create_dir(d).unwrap();
            std::fs::write(d.join("model.json"), text).unwrap();
        }
        replace_by_renames(staged, &dest).unwrap();
        assert_eq!(names(dir.path()), ["model"]);
        assert_eq!(std::fs::read_to_string(dest.join("model.json")).unwrap(), "new");
        // A missing staged folder fails and keeps the old one.
        let e = replace_by_renames(dir.path().join(".model.y.tmp"), &dest).unwrap_err();
        assert!(matches!(e, Error::Io { .. }), "{e}");
        assert_eq!(names(dir.path()), ["model"]);
        assert_eq!(std::fs::read_to_string(dest.join("model.json")).unwrap(), "new");
    }
}
