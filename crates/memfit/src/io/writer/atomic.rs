//! Files written beside their destination and put in place only when
//! complete.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::paths::{check_output_path, resolve_output};
use super::staged::Staged;
use crate::error::{Error, Result};

/// Bytes of the write buffer an [`AtomicFile`] holds.
pub const WRITE_BUFFER_BYTES: usize = 256 << 10;

/// A file being written beside its destination, which it replaces only
/// when complete (see `Staged`: unnamed until then where the system
/// allows). Dropping it without [`AtomicFile::commit`] leaves nothing.
#[derive(Debug)]
pub struct AtomicFile {
    path: PathBuf,
    writer: BufWriter<Staged>,
}

impl AtomicFile {
    /// Starts a file that [`AtomicFile::commit`] puts at `path` (a symlink
    /// is followed, so its target is replaced and the link stays).
    ///
    /// # Errors
    /// As [`check_output_path`]; [`Error::Io`] when the folder is not
    /// writable.
    pub fn create(path: impl AsRef<Path>) -> Result<Self> {
        Self::create_buffered(path, WRITE_BUFFER_BYTES)
    }

    /// As [`AtomicFile::create`], with a write buffer of `buffer_bytes`
    /// bytes (a small file needs no more than its own size).
    ///
    /// # Errors
    /// As [`AtomicFile::create`].
    pub fn create_buffered(path: impl AsRef<Path>, buffer_bytes: usize) -> Result<Self> {
        check_output_path(path.as_ref())?;
        let (path, staged) = stage_beside(path.as_ref())?;
        Ok(AtomicFile { path, writer: BufWriter::with_capacity(buffer_bytes, staged) })
    }

    /// Starts a file staged in the folder `dir`, to be put at `dest` (in a
    /// folder that may not exist yet) by its owner.
    pub(super) fn staged_in(dir: &Path, dest: PathBuf) -> Result<Self> {
        let staged =
            Staged::create_in(dir, dest.file_name().unwrap_or_default()).map_err(|e| Error::io(&dest, "create", e))?;
        Ok(Self::new(dest, staged))
    }

    fn new(path: PathBuf, staged: Staged) -> Self {
        AtomicFile { path, writer: BufWriter::with_capacity(WRITE_BUFFER_BYTES, staged) }
    }

    /// Appends bytes.
    ///
    /// # Errors
    /// [`Error::Io`] on a write failure (for example a full disk).
    pub fn write_all(&mut self, bytes: &[u8]) -> Result<()> {
        self.writer.write_all(bytes).map_err(|e| Error::io(&self.path, "write", e))
    }

    /// Flushes, syncs and puts the file at its destination.
    ///
    /// # Errors
    /// [`Error::Io`] when flushing, syncing or linking fails; nothing is
    /// left.
    pub fn commit(self) -> Result<()> {
        let (path, staged) = self.finish()?;
        staged.persist(&path).map_err(|e| Error::io(&path, "rename", e))
    }

    /// Flushes and syncs the file, for its owner to put in place.
    ///
    /// # Errors
    /// As [`AtomicFile::commit`].
    pub(super) fn finish(self) -> Result<(PathBuf, Staged)> {
        let path = self.path;
        let staged = self.writer.into_inner().map_err(|e| Error::io(&path, "write", e.into_error()))?;
        staged.file().sync_all().map_err(|e| Error::io(&path, "sync", e))?;
        Ok((path, staged))
    }

    /// The destination path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The destination `path` finally names (see [`resolve_output`]) and a new
/// file staged beside it.
pub(super) fn stage_beside(path: &Path) -> Result<(PathBuf, Staged)> {
    let path = resolve_output(path);
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let staged =
        Staged::create_in(&dir, path.file_name().unwrap_or_default()).map_err(|e| Error::io(&path, "create", e))?;
    Ok((path, staged))
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

    fn named(path: &Path) -> AtomicFile {
        let staged = Staged::named_in(path.parent().unwrap(), path.file_name().unwrap()).unwrap();
        AtomicFile::new(path.to_path_buf(), staged)
    }

    /// The temporary files a second Ctrl-C removes are those of the named
    /// fallback's outputs still open: listed from creation until commit or
    /// drop. (Calling `remove_unfinished_outputs` here would race with the
    /// other tests' outputs; the CLI test of a second Ctrl-C covers it.)
    #[test]
    fn unfinished_outputs_are_listed_until_committed_or_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let listed = || UNFINISHED.lock().unwrap().iter().filter(|(p, _)| p.starts_with(dir.path())).count();
        let mut open = named(&dir.path().join("a.npy"));
        open.write_all(b"partial").unwrap();
        let done = named(&dir.path().join("b.npy"));
        assert_eq!(listed(), 2);
        done.commit().unwrap();
        assert_eq!(listed(), 1);
        drop(open);
        assert_eq!(listed(), 0);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    /// While written, an output is invisible (unnamed; Linux) and unlisted;
    /// a commit creates or replaces the destination, a symlink's target
    /// included; a drop leaves the folder as it was.
    #[cfg(target_os = "linux")]
    #[test]
    fn outputs_are_invisible_until_committed() {
        let dir = tempfile::tempdir().unwrap();
        let count = || std::fs::read_dir(dir.path()).unwrap().count();
        let listed = || UNFINISHED.lock().unwrap().iter().filter(|(p, _)| p.starts_with(dir.path())).count();
        let path = dir.path().join("a.json");
        for text in ["first", "second, longer"] {
            let mut f = AtomicFile::create(&path).unwrap();
            f.write_all(&vec![b'x'; 3 * WRITE_BUFFER_BYTES]).unwrap();
            assert_eq!((count(), listed()), (usize::from(text != "first"), 0));
            drop(f);
            write_bytes_atomic(&path, text.as_bytes()).unwrap();
            assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
            assert_eq!(count(), 1);
        }
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink("a.json", &link).unwrap();
        write_bytes_atomic(&link, b"through the link").unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "through the link");
        assert_eq!(count(), 2);
    }
}
