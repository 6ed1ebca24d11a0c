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

use super::writer::check_free_space;
use crate::error::{Error, Result};

/// Values converted per positioned read or write (a 64 KiB stack buffer).
const IO_VALUES: usize = 8192;

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
    /// [`Error::Io`] of kind [`std::io::ErrorKind::StorageFull`] when the free
    /// space is short (nothing is created); [`Error::Io`] when the folder
    /// does not exist or is not writable.
    pub fn create(dir: &Path, values: u64) -> Result<Self> {
        check_free_space(&[(&dir.join("memfit-scratch"), values.saturating_mul(8))])?;
        let file = tempfile::tempfile_in(dir).map_err(|e| Error::io(dir, "use as the scratch folder", e))?;
        Ok(ScratchFile { file, dir: dir.to_path_buf(), values })
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
    fn a_scratch_larger_than_the_disk_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = ScratchFile::create(dir.path(), u64::MAX / 8).unwrap_err();
        assert!(format!("{err}").contains("not enough free disk space"), "{err}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
