//! The registry of outputs still being written under temporary names, so a
//! process that must exit at once can remove them.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The temporary files and directories (`true`) of the outputs being
/// written in this process.
pub(super) static UNFINISHED: Mutex<Vec<(PathBuf, bool)>> = Mutex::new(Vec::new());

/// Deletes the temporary files and directories (of Zarr arrays) of every
/// output still being written, for a process that must exit at once (a
/// second Ctrl-C) without running destructors.
pub fn remove_unfinished_outputs() {
    if let Ok(list) = UNFINISHED.lock() {
        for (path, is_dir) in list.iter() {
            let _ = if *is_dir { std::fs::remove_dir_all(path) } else { std::fs::remove_file(path) };
        }
    }
}

/// A temporary file's or directory's entry in [`UNFINISHED`], removed when
/// dropped.
#[derive(Debug)]
pub(crate) struct Unfinished(PathBuf);

impl Unfinished {
    /// Lists the temporary file `path`.
    pub(super) fn new(path: &Path) -> Self {
        Self::listed(path, false)
    }

    /// Lists the temporary directory `path` (removed with its contents).
    pub(crate) fn new_dir(path: &Path) -> Self {
        Self::listed(path, true)
    }

    fn listed(path: &Path, is_dir: bool) -> Self {
        if let Ok(mut list) = UNFINISHED.lock() {
            list.push((path.to_path_buf(), is_dir));
        }
        Unfinished(path.to_path_buf())
    }

    /// Whether `path` is listed (for tests).
    #[cfg(test)]
    pub(crate) fn is_listed(path: &Path) -> bool {
        UNFINISHED.lock().unwrap().iter().any(|(p, _)| p == path)
    }
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        if let Ok(mut list) = UNFINISHED.lock() {
            list.retain(|(p, _)| p != &self.0);
        }
    }
}
