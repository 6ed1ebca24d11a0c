//! Files that appear at their destination only when complete, and leave
//! nothing behind when the process is killed before.
//!
//! On Linux a [`Staged`] file is created without a name (`O_TMPFILE`) in the
//! folder it will end up in, and [`Staged::persist`] links it into place
//! (`linkat` of `/proc/self/fd/N`): a process killed at any moment before,
//! by SIGKILL included, leaves nothing, since the kernel frees an unnamed
//! file when its last descriptor closes. A new destination is linked at
//! once; replacing an existing one takes a link under a hidden unique name
//! (`.NAME.XXXXXX.tmp`) and a rename over the destination, and a kill
//! between those two system calls leaves that complete hidden file: the
//! only window.
//!
//! Where the file system or the kernel cannot (`EOPNOTSUPP`, `EISDIR`
//! before Linux 3.11, `EINVAL`), where `/proc/self/fd` is missing, and on
//! other systems, the file is named `.NAME.XXXXXX.tmp` from the start,
//! listed for [`remove_unfinished_outputs`](super::remove_unfinished_outputs),
//! removed when dropped and renamed into place: a process killed without
//! running destructors (SIGKILL) leaves that temporary behind.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

use super::unfinished::Unfinished;

/// A new file written beside its destination (see the module's docs).
/// Dropping it without [`Staged::persist`] leaves nothing.
#[derive(Debug)]
pub(crate) struct Staged {
    file: File,
    /// The temporary name of a file that could not be created unnamed.
    named: Option<(tempfile::TempPath, Unfinished)>,
}

impl Staged {
    /// A new empty file in the folder `dir`, for the destination `name`
    /// there, with mode 0666 less the umask as any other program's: unnamed
    /// where the system allows it, else named `.NAME.XXXXXX.tmp`.
    ///
    /// # Errors
    /// The system's, when the folder is missing or not writable.
    pub(crate) fn create_in(dir: &Path, name: &OsStr) -> io::Result<Self> {
        #[cfg(target_os = "linux")]
        if let Some(file) = unnamed_in(dir)? {
            return Ok(Staged { file, named: None });
        }
        Self::named_in(dir, name)
    }

    /// A new empty file named `.NAME.XXXXXX.tmp` in `dir` (the fallback of
    /// [`Staged::create_in`]).
    ///
    /// # Errors
    /// As [`Staged::create_in`].
    pub(crate) fn named_in(dir: &Path, name: &OsStr) -> io::Result<Self> {
        let tmp = tempfile::Builder::new()
            .prefix(&hidden_prefix(name))
            .suffix(".tmp")
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666))
            .tempfile_in(dir)?;
        let (file, path) = tmp.into_parts();
        let listed = Unfinished::new(&path);
        Ok(Staged { file, named: Some((path, listed)) })
    }

    /// The open file, for positioned writes, syncing and resizing.
    pub(crate) fn file(&self) -> &File {
        &self.file
    }

    /// Whether the file has no name yet (it was created `O_TMPFILE`).
    #[cfg(test)]
    pub(crate) fn is_unnamed(&self) -> bool {
        self.named.is_none()
    }

    /// Gives the file the read, write and execute bits of the regular file
    /// at `old` (links followed), if one is there: a replaced output keeps
    /// its mode, as with `numpy.save`, which rewrites the file in place (a
    /// private 0600 file stays private); never set-user-ID, set-group-ID or
    /// sticky bits, which a write clears.
    pub(crate) fn keep_mode_of(&self, old: &Path) {
        if let Ok(meta) = std::fs::metadata(old) {
            if meta.is_file() {
                // Best effort: a file that cannot take the mode keeps the default.
                let _ = self.file.set_permissions(rwx_of(&meta));
            }
        }
    }

    /// Puts the file at `dest` (in the folder it was created in), replacing
    /// a file there, whose permission bits it takes
    /// ([`Staged::keep_mode_of`]). The caller syncs the file first.
    ///
    /// # Errors
    /// The system's; the file is then dropped, leaving nothing.
    pub(crate) fn persist(self, dest: &Path) -> io::Result<()> {
        self.keep_mode_of(dest);
        match self.named {
            Some((path, _listed)) => path.persist(dest).map_err(|e| e.error),
            #[cfg(target_os = "linux")]
            None => link_into_place(&self.file, dest),
            #[cfg(not(target_os = "linux"))]
            None => unreachable!("unnamed files are created on Linux only"),
        }
    }
}

impl Write for Staged {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// The read, write and execute bits of `meta`'s mode, as permissions.
pub(crate) fn rwx_of(meta: &std::fs::Metadata) -> std::fs::Permissions {
    use std::os::unix::fs::PermissionsExt;
    std::fs::Permissions::from_mode(meta.permissions().mode() & 0o777)
}

/// The prefix of hidden temporary names `.NAME.XXXXXX.tmp`.
pub(crate) fn hidden_prefix(name: &OsStr) -> String {
    let name = name.to_string_lossy();
    // A legal name of up to 255 bytes keeps its temporaries legal too
    // (their suffix adds at most 24 bytes).
    let mut end = name.len().min(NAME_IN_TEMPORARIES);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!(".{}.", &name[..end])
}

/// Most bytes of an output's name its temporaries' names repeat.
const NAME_IN_TEMPORARIES: usize = 200;

/// `/proc/self/fd/N` of an open file: linking it with `AT_SYMLINK_FOLLOW`
/// names the file itself (no privilege needed, unlike `AT_EMPTY_PATH`).
#[cfg(target_os = "linux")]
fn proc_fd_path(file: &File) -> String {
    format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(file))
}

/// An unnamed file in `dir`, or `None` where the file system, the kernel or
/// a missing `/proc` does not allow one.
#[cfg(target_os = "linux")]
fn unnamed_in(dir: &Path) -> io::Result<Option<File>> {
    use rustix::fs::{Mode, OFlags, CWD};
    use rustix::io::Errno;
    let flags = OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC;
    match rustix::fs::openat(CWD, dir, flags, Mode::from_bits_truncate(0o666)) {
        Ok(fd) => {
            let file = File::from(fd);
            Ok(std::fs::metadata(proc_fd_path(&file)).is_ok().then_some(file))
        }
        Err(Errno::OPNOTSUPP | Errno::ISDIR | Errno::INVAL) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Links the unnamed `file` at `dest`: at once where nothing is there, else
/// under a hidden unique name renamed over `dest`.
#[cfg(target_os = "linux")]
fn link_into_place(file: &File, dest: &Path) -> io::Result<()> {
    let fd_path = proc_fd_path(file);
    let link = |to: &Path| -> io::Result<()> {
        rustix::fs::linkat(rustix::fs::CWD, fd_path.as_str(), rustix::fs::CWD, to, rustix::fs::AtFlags::SYMLINK_FOLLOW)
            .map_err(io::Error::from)
    };
    match link(dest) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let dir = match dest.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            let prefix = hidden_prefix(dest.file_name().unwrap_or_default());
            let linked = tempfile::Builder::new().prefix(&prefix).suffix(".tmp").make_in(dir, |p| link(p))?;
            linked.persist(dest).map(drop).map_err(|e| e.error)
        }
        done => done,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::writer::names;
    use std::io::Read;

    fn read(path: &Path) -> String {
        let mut s = String::new();
        File::open(path).unwrap().read_to_string(&mut s).unwrap();
        s
    }

    /// Both ways of staging: unnamed (where the system allows) and the
    /// named fallback. Nothing is visible before `persist`; `persist`
    /// creates or replaces the destination and leaves no temporary; a drop
    /// leaves nothing.
    #[test]
    fn staged_files_appear_only_when_persisted() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("out.npy");
        let name = OsStr::new("out.npy");
        let unnamed = Staged::create_in(dir.path(), name).unwrap();
        #[cfg(target_os = "linux")]
        assert!(unnamed.is_unnamed(), "the test folder's file system has O_TMPFILE");
        let named = Staged::named_in(dir.path(), name).unwrap();
        assert!(!named.is_unnamed());
        assert_eq!(names(dir.path()).len(), 1, "only the fallback has a name: {:?}", names(dir.path()));
        for (mut staged, text) in [(unnamed, "first"), (named, "second")] {
            staged.write_all(text.as_bytes()).unwrap();
            staged.persist(&dest).unwrap();
            assert_eq!(read(&dest), text);
        }
        assert_eq!(names(dir.path()), ["out.npy"]);
        // A replaced file keeps its mode, as numpy.save keeps it.
        use std::os::unix::fs::PermissionsExt;
        for (named, mode, kept) in [(false, 0o600, 0o600), (true, 0o640, 0o640), (false, 0o4755, 0o755)] {
            std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(mode)).unwrap();
            let create = if named { Staged::named_in } else { Staged::create_in };
            let mut staged = create(dir.path(), name).unwrap();
            staged.write_all(b"private").unwrap();
            staged.persist(&dest).unwrap();
            assert_eq!(std::fs::metadata(&dest).unwrap().permissions().mode() & 0o7777, kept);
            assert_eq!(read(&dest), "private");
        }
        // Dropped unpersisted: nothing stays, the destination is untouched.
        let other = dir.path().join("other.npy");
        for named in [false, true] {
            let create = if named { Staged::named_in } else { Staged::create_in };
            let mut staged = create(dir.path(), name).unwrap();
            staged.write_all(b"partial").unwrap();
            drop(staged);
            assert_eq!(names(dir.path()), ["out.npy"]);
        }
        // A new destination beside an existing one.
        let mut staged = Staged::create_in(dir.path(), OsStr::new("other.npy")).unwrap();
        staged.write_all(b"third").unwrap();
        staged.persist(&other).unwrap();
        assert_eq!((read(&dest), read(&other)), ("private".into(), "third".into()));
        assert_eq!(names(dir.path()), ["other.npy", "out.npy"]);
        // A missing folder is an error, not a fallback.
        let missing = dir.path().join("missing");
        assert_eq!(Staged::create_in(&missing, name).unwrap_err().kind(), io::ErrorKind::NotFound);
    }
}
