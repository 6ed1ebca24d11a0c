//! Anonymous scratch files: `f64` values a run keeps on disk instead of in
//! memory, read and written with positioned I/O through small buffers.
//!
//! The file is created already unlinked (`O_TMPFILE`, or created and removed
//! at once), so it never has a name in its folder: the space returns to the
//! filesystem when the run ends, however it ends (success, error, Ctrl-C,
//! SIGTERM, even SIGKILL), and no clean-up code is needed.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::writer::{check_disk_space, PlannedWrite};
use crate::error::{Error, Result};

/// Values converted per positioned read or write (a 64 KiB stack buffer).
const IO_VALUES: usize = 8192;

/// The system's temporary folder: `TMPDIR` when it is set and not empty,
/// else `/tmp`, as Python's `tempfile` finds it (`std::env::temp_dir`
/// takes an empty `TMPDIR` as the empty path).
pub fn temp_dir() -> PathBuf {
    match std::env::var_os("TMPDIR") {
        Some(t) if !t.is_empty() => PathBuf::from(t),
        _ => PathBuf::from("/tmp"),
    }
}

/// Where `dir` came from, when it is `TMPDIR`'s: said in errors about it.
fn from_tmpdir(dir: &Path) -> &'static str {
    if std::env::var_os("TMPDIR").is_some_and(|t| !t.is_empty() && Path::new(&t) == dir) {
        " (the TMPDIR environment variable's)"
    } else {
        ""
    }
}

/// An unnamed file of `f64` values in a scratch folder.
#[derive(Debug)]
pub struct ScratchFile {
    file: File,
    dir: PathBuf,
    values: u64,
}

impl ScratchFile {
    /// Creates an unnamed file for `values` doubles in `dir`, after checking
    /// that the folder's filesystem has room for them.
    ///
    /// # Errors
    /// [`Error::NoDiskSpace`] when the free space is short (nothing is
    /// created); [`Error::Io`] when the folder does not exist or is not
    /// writable.
    pub fn create(dir: &Path, values: u64) -> Result<Self> {
        check_disk_space(&[PlannedWrite::inside("scratch files", dir, values.saturating_mul(8))])?;
        let file = tempfile::tempfile_in(dir).map_err(|e| Error::io(dir, "use as the scratch folder", e))?;
        Ok(ScratchFile { file, dir: dir.to_path_buf(), values })
    }

    /// Checks that `dir` can hold scratch files: an existing folder in which
    /// a file can be created (one is, unnamed, and vanishes at once). Run it
    /// before any work.
    ///
    /// # Errors
    /// [`Error::Io`] saying what is wrong with the folder: missing, a file,
    /// read-only or not writable.
    pub fn check_dir(dir: &Path) -> Result<()> {
        let bad = |kind: std::io::ErrorKind, why: String, hint: &str| {
            let why = format!("{why}{}; hint: {hint}", from_tmpdir(dir));
            Error::io(dir, "use as the scratch folder", std::io::Error::new(kind, why))
        };
        match std::fs::metadata(dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let hint = "create it or name an existing folder";
                return Err(bad(e.kind(), "the folder does not exist".into(), hint));
            }
            Ok(m) if !m.is_dir() => {
                return Err(bad(std::io::ErrorKind::NotADirectory, "it is not a folder".into(), "name a folder"))
            }
            _ => {}
        }
        tempfile::tempfile_in(dir)
            .map(drop)
            .map_err(|e| bad(e.kind(), format!("cannot create files there ({e})"), "name a folder you can write to"))
    }

    /// The folder the file was created in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes `v` at value offset `at`.
    ///
    /// # Errors
    /// [`Error::Io`] when the write fails (a full disk among others).
    pub fn write(&self, at: u64, v: &[f64]) -> Result<()> {
        debug_assert!(at + v.len() as u64 <= self.values);
        let mut buf = [0u8; IO_VALUES * 8];
        for (i, chunk) in v.chunks(IO_VALUES).enumerate() {
            for (b, x) in buf.chunks_exact_mut(8).zip(chunk) {
                b.copy_from_slice(&x.to_le_bytes());
            }
            let offset = (at + (i * IO_VALUES) as u64) * 8;
            self.file
                .write_all_at(&buf[..chunk.len() * 8], offset)
                .map_err(|e| Error::io(&self.dir, "write a scratch file in the folder", e))?;
        }
        Ok(())
    }

    /// Reads `out.len()` values from value offset `at`; values never
    /// written read as 0.
    ///
    /// # Errors
    /// [`Error::Io`] when the read fails.
    pub fn read(&self, at: u64, out: &mut [f64]) -> Result<()> {
        debug_assert!(at + out.len() as u64 <= self.values);
        let mut buf = [0u8; IO_VALUES * 8];
        for (i, chunk) in out.chunks_mut(IO_VALUES).enumerate() {
            let bytes = &mut buf[..chunk.len() * 8];
            let offset = (at + (i * IO_VALUES) as u64) * 8;
            let mut got = 0;
            // A file shorter than the range (never written there) reads as zeros.
            while got < bytes.len() {
                match self.file.read_at(&mut bytes[got..], offset + got as u64) {
                    Ok(0) => {
                        bytes[got..].fill(0);
                        break;
                    }
                    Ok(m) => got += m,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(Error::io(&self.dir, "read a scratch file in the folder", e)),
                }
            }
            for (x, b) in chunk.iter_mut().zip(bytes.chunks_exact(8)) {
                *x = f64::from_le_bytes(b.try_into().expect("8 bytes"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_the_file_has_no_name() {
        let dir = tempfile::tempdir().unwrap();
        let f = ScratchFile::create(dir.path(), 30_000).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let v: Vec<f64> = (0..20_000).map(|i| f64::from(i) * 0.5 - 3.25).collect();
        f.write(5_000, &v).unwrap();
        let mut back = vec![1.0; 25_000];
        f.read(0, &mut back).unwrap();
        assert!(back[..5_000].iter().all(|&x| x == 0.0));
        assert_eq!(&back[5_000..], &v[..]);
    }

    #[test]
    fn a_missing_file_or_read_only_scratch_folder_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert!(ScratchFile::check_dir(dir.path()).is_ok());
        let missing = ScratchFile::check_dir(&dir.path().join("no")).unwrap_err().to_string();
        assert!(missing.contains("no: use as the scratch folder failed: the folder does not exist"), "{missing}");
        let file = dir.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        let not_dir = ScratchFile::check_dir(&file).unwrap_err().to_string();
        assert!(not_dir.contains("it is not a folder; hint: name a folder"), "{not_dir}");
        let ro = dir.path().join("ro");
        std::fs::create_dir(&ro).unwrap();
        std::fs::set_permissions(&ro, std::os::unix::fs::PermissionsExt::from_mode(0o500)).unwrap();
        // root writes anywhere but on a read-only file system.
        let root = std::fs::write(ro.join("probe"), b"").is_ok();
        let _ = std::fs::remove_file(ro.join("probe"));
        let r = ScratchFile::check_dir(&ro);
        assert_eq!(r.is_ok(), root, "{r:?}");
        if let Err(e) = r {
            assert!(e.to_string().contains("cannot create files there"), "{e}");
        }
        assert_eq!(std::fs::read_dir(&ro).unwrap().count(), 0);
    }

    #[test]
    fn a_scratch_larger_than_the_disk_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = ScratchFile::create(dir.path(), u64::MAX / 8).unwrap_err();
        assert!(format!("{err}").contains("not enough free disk space"), "{err}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
