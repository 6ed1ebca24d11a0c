//! Atomic output files: everything is written to a temporary file in the
//! destination's folder and renamed over the destination only when complete,
//! so a failure (bad input found late, a full disk, Ctrl-C) never leaves a
//! half-written output behind.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::dtype::Dtype;
use super::npy_header::write_header;
use crate::error::{Error, Result};

/// Bytes of the write buffer an [`AtomicFile`] holds.
pub const WRITE_BUFFER_BYTES: usize = 256 << 10;

/// The temporary files and directories (`true`) of the outputs being
/// written in this process.
static UNFINISHED: Mutex<Vec<(PathBuf, bool)>> = Mutex::new(Vec::new());

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
pub(super) struct Unfinished(PathBuf);

impl Unfinished {
    /// Lists the temporary file `path`.
    fn new(path: &Path) -> Self {
        Self::listed(path, false)
    }

    /// Lists the temporary directory `path` (removed with its contents).
    pub(super) fn new_dir(path: &Path) -> Self {
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
    pub(super) fn is_listed(path: &Path) -> bool {
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
fn temp_beside(path: &Path) -> Result<(PathBuf, tempfile::NamedTempFile)> {
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

/// The file an output path finally names: a symlink is followed, so the
/// atomic rename replaces its target and the link stays.
pub(super) fn resolve_output(path: &Path) -> PathBuf {
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

/// Checks, before any long computation, that an output file could be created:
/// its folder exists, and the path is either absent or a regular file (a
/// symlink to one is followed). Devices, pipes and directories are refused,
/// since the atomic rename would replace them.
///
/// # Errors
/// [`Error::Io`] with kind `NotFound` when the folder is missing, or a
/// message saying the path is not a regular file.
pub fn check_output_path(path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    if path == Path::new("-") {
        return Err(Error::io(
            path,
            "create",
            std::io::Error::other("this output cannot go to stdout; hint: name a file"),
        ));
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(Error::io(
            path,
            "create",
            std::io::Error::new(std::io::ErrorKind::NotFound, format!("folder {} does not exist", dir.display())),
        ));
    }
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => Err(Error::io(
            path,
            "create",
            std::io::Error::other(
                "it exists and is not a regular file (a directory, device or pipe); hint: name a new file",
            ),
        )),
        _ => Ok(()),
    }
}

/// Fails when an output names the same file as another output or as an
/// input (inputs may coincide with each other), or lies inside one of
/// `folders` (a model folder that is replaced or read); inputs may not lie
/// inside a folder that is replaced (the `bool` of its entry). Each entry
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
    let key = |p: &Path| -> PathBuf {
        let p = resolve_output(p);
        let dir = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
        dir.join(p.file_name().unwrap_or_default())
    };
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

/// Bytes of a whole `.npy` file holding an array of `dtype` and `shape`
/// (header and data; `u64::MAX` if that overflows).
pub fn npy_file_bytes(dtype: Dtype, shape: &[usize]) -> u64 {
    (write_header(dtype, shape).len() as u64).saturating_add(npy_data_bytes(dtype, shape))
}

fn npy_data_bytes(dtype: Dtype, shape: &[usize]) -> u64 {
    shape.iter().try_fold(dtype.itemsize() as u64, |acc, &s| acc.checked_mul(s as u64)).unwrap_or(u64::MAX)
}

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
/// folder, reported elsewhere) is not checked.
///
/// # Errors
/// [`Error::NoDiskSpace`] for the first file system short of room, naming
/// its first path, the bytes needed and available, and what goes there.
pub fn check_disk_space(writes: &[PlannedWrite]) -> Result<()> {
    let mut per_fs: Vec<(u64, u64, Vec<&PlannedWrite>)> = Vec::new(); // (fsid, available, writes)
    for w in writes.iter().filter(|w| w.bytes > 0) {
        let Ok(st) = rustix::fs::statvfs(w.folder()) else { continue };
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

/// Streams a C-order little-endian `.npy` array of a known shape to disk in
/// pieces, atomically.
#[derive(Debug)]
pub struct NpyWriter {
    file: AtomicFile,
    remaining_bytes: u64,
    encode: Vec<u8>,
}

impl NpyWriter {
    /// Starts an array of `dtype` and `shape` at `path`.
    ///
    /// # Errors
    /// As [`AtomicFile::create`].
    /// Refuses, before creating anything, when the destination's filesystem
    /// has less free space than the whole array needs.
    ///
    /// # Errors
    /// As [`AtomicFile::create`] and [`check_free_space`].
    pub fn create(path: impl AsRef<Path>, dtype: Dtype, shape: &[usize]) -> Result<Self> {
        let header = write_header(dtype, shape);
        let data_bytes = npy_data_bytes(dtype, shape);
        check_free_space(&[(path.as_ref(), (header.len() as u64).saturating_add(data_bytes))])?;
        let mut file = AtomicFile::create(path)?;
        file.write_all(&header)?;
        Ok(NpyWriter { file, remaining_bytes: data_bytes, encode: Vec::new() })
    }

    /// Appends elements already encoded as little-endian bytes.
    ///
    /// # Errors
    /// [`Error::Io`] on a write failure.
    ///
    /// # Panics
    /// If more bytes are written than the shape holds.
    pub fn write_bytes(&mut self, bytes: &[u8]) -> Result<()> {
        assert!(bytes.len() as u64 <= self.remaining_bytes, "more data than the declared shape");
        self.remaining_bytes -= bytes.len() as u64;
        self.file.write_all(bytes)
    }

    /// Appends elements, encoding each with `put` into a reused buffer of at
    /// most [`WRITE_BUFFER_BYTES`] bytes.
    ///
    /// # Errors
    /// [`Error::Io`] on a write failure.
    pub fn write_with<E: Copy>(&mut self, values: &[E], put: impl Fn(E, &mut Vec<u8>)) -> Result<()> {
        let mut enc = std::mem::take(&mut self.encode);
        for chunk in values.chunks(WRITE_BUFFER_BYTES / 8) {
            enc.clear();
            for &v in chunk {
                put(v, &mut enc);
            }
            self.write_bytes(&enc)?;
        }
        self.encode = enc;
        Ok(())
    }

    /// Finishes the array and renames it into place.
    ///
    /// # Errors
    /// [`Error::Io`] on failure.
    ///
    /// # Panics
    /// If fewer elements were written than the shape holds.
    pub fn commit(self) -> Result<()> {
        assert_eq!(self.remaining_bytes, 0, "fewer elements written than the declared shape");
        self.file.commit()
    }
}

/// Writes a whole small array (`values` in C order) to `path` atomically.
///
/// # Errors
/// As [`NpyWriter`].
pub fn write_npy<E: Copy>(
    path: impl AsRef<Path>,
    dtype: Dtype,
    shape: &[usize],
    values: &[E],
    put: impl Fn(E, &mut Vec<u8>),
) -> Result<()> {
    let mut w = NpyWriter::create(path, dtype, shape)?;
    w.write_with(values, put)?;
    w.commit()
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

/// A C-order little-endian `.npy` array written by positioned writes from
/// any number of threads (each writing its own elements), under a temporary
/// name beside the destination, renamed into place by
/// [`PositionedNpy::commit`]. Dropping it uncommitted deletes the temporary
/// file; so does [`remove_unfinished_outputs`].
#[derive(Debug)]
pub struct PositionedNpy {
    path: PathBuf,
    tmp: tempfile::NamedTempFile,
    data_offset: u64,
    itemsize: u64,
    _unfinished: Unfinished,
}

impl PositionedNpy {
    /// Creates the temporary file with the header and room for every
    /// element. `overwrite = false` refuses an existing destination.
    ///
    /// # Errors
    /// [`Error::OutputExists`]; as [`check_output_path`] and
    /// [`check_free_space`]; [`Error::Io`] when the file cannot be created.
    pub fn create(path: impl AsRef<Path>, dtype: Dtype, shape: &[usize], overwrite: bool) -> Result<Self> {
        let path = path.as_ref();
        if !overwrite && std::fs::symlink_metadata(path).is_ok() {
            return Err(Error::OutputExists { path: path.to_path_buf() });
        }
        check_output_path(path)?;
        let header = write_header(dtype, shape);
        let total = (header.len() as u64).saturating_add(npy_data_bytes(dtype, shape));
        check_free_space(&[(path, total)])?;
        let (path, tmp) = temp_beside(path)?;
        let unfinished = Unfinished::new(tmp.path());
        let file = tmp.as_file();
        file.set_len(total).map_err(|e| Error::io(&path, "write", e))?;
        std::os::unix::fs::FileExt::write_all_at(file, &header, 0).map_err(|e| Error::io(&path, "write", e))?;
        Ok(PositionedNpy {
            path,
            tmp,
            data_offset: header.len() as u64,
            itemsize: dtype.itemsize() as u64,
            _unfinished: unfinished,
        })
    }

    /// Writes encoded elements starting at element `first` (C order).
    ///
    /// # Errors
    /// [`Error::Io`] on a write failure (a full disk).
    pub fn write_at(&self, first: u64, bytes: &[u8]) -> Result<()> {
        std::os::unix::fs::FileExt::write_all_at(self.tmp.as_file(), bytes, self.data_offset + first * self.itemsize)
            .map_err(|e| Error::io(&self.path, "write", e))
    }

    /// Syncs and renames the file into place.
    ///
    /// # Errors
    /// [`Error::Io`] when syncing or renaming fails.
    pub fn commit(self) -> Result<()> {
        let path = self.path;
        self.tmp.as_file().sync_all().map_err(|e| Error::io(&path, "sync", e))?;
        self.tmp.persist(&path).map_err(|e| Error::io(&path, "rename", e.error))?;
        Ok(())
    }
}
