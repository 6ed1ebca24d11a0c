//! Files written under a temporary name beside their destination and
//! renamed over it only when complete.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::paths::{check_output_path, resolve_output};
use super::unfinished::Unfinished;
use crate::error::{Error, Result};

/// Bytes of the write buffer an [`AtomicFile`] holds.
pub const WRITE_BUFFER_BYTES: usize = 256 << 10;

/// A file being written under a temporary name beside its destination.
/// Dropping it without [`AtomicFile::commit`] deletes the temporary file.
#[derive(Debug)]
pub struct AtomicFile {
    path: PathBuf,
    writer: BufWriter<tempfile::NamedTempFile>,
    _unfinished: Unfinished,
}

impl AtomicFile {
    /// Creates a temporary file in `path`'s folder.
    ///
    /// # Errors
    /// [`Error::Io`] when the folder does not exist or is not writable.
    pub fn create(path: impl AsRef<Path>) -> Result<Self> {
        check_output_path(path.as_ref())?;
        let (path, tmp) = temp_beside(path.as_ref())?;
        let unfinished = Unfinished::new(tmp.path());
        Ok(AtomicFile { path, writer: BufWriter::with_capacity(WRITE_BUFFER_BYTES, tmp), _unfinished: unfinished })
    }

    /// Appends bytes.
    ///
    /// # Errors
    /// [`Error::Io`] on a write failure (for example a full disk).
    pub fn write_all(&mut self, bytes: &[u8]) -> Result<()> {
        self.writer.write_all(bytes).map_err(|e| Error::io(&self.path, "write", e))
    }

    /// Flushes, syncs and renames the temporary file over the destination.
    ///
    /// # Errors
    /// [`Error::Io`] when flushing, syncing or renaming fails; the temporary
    /// file is removed.
    pub fn commit(self) -> Result<()> {
        let path = self.path;
        let tmp = self.writer.into_inner().map_err(|e| Error::io(&path, "write", e.into_error()))?;
        tmp.as_file().sync_all().map_err(|e| Error::io(&path, "sync", e))?;
        tmp.persist(&path).map_err(|e| Error::io(&path, "rename", e.error))?;
        Ok(())
    }

    /// The destination path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The destination `path` finally names (see [`resolve_output`]) and a new
/// temporary file beside it, named `.NAME.XXXX.tmp`.
pub(super) fn temp_beside(path: &Path) -> Result<(PathBuf, tempfile::NamedTempFile)> {
    let path = resolve_output(path);
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        // New files get 0666 less the umask, as with any other program.
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666))
        .tempfile_in(&dir)
        .map_err(|e| Error::io(&path, "create", e))?;
    Ok((path, tmp))
}

/// Writes bytes (a JSON summary, a PNG) to `path` atomically.
///
/// # Errors
/// As [`AtomicFile`].
pub fn write_bytes_atomic(path: impl AsRef<Path>, bytes: &[u8]) -> Result<()> {
    let mut f = AtomicFile::create(path)?;
    f.write_all(bytes)?;
    f.commit()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::writer::unfinished::UNFINISHED;

    /// The temporary files a second Ctrl-C removes are those of the outputs
    /// still open: listed from creation until commit or drop. (Calling
    /// `remove_unfinished_outputs` here would race with the other tests'
    /// outputs; the CLI test of a second Ctrl-C covers it.)
    #[test]
    fn unfinished_outputs_are_listed_until_committed_or_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let listed = || UNFINISHED.lock().unwrap().iter().filter(|(p, _)| p.starts_with(dir.path())).count();
        let mut open = AtomicFile::create(dir.path().join("a.npy")).unwrap();
        open.write_all(b"partial").unwrap();
        let done = AtomicFile::create(dir.path().join("b.npy")).unwrap();
        assert_eq!(listed(), 2);
        done.commit().unwrap();
        assert_eq!(listed(), 1);
        drop(open);
        assert_eq!(listed(), 0);
    }
}
