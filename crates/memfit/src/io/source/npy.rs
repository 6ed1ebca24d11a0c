//! `.npy` files opened for positioned reads: the header validated against
//! the file's length, and reads that report a file that shrank.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::io::npy_header::{header_len, parse_header, HeaderError, NpyHeader, PREAMBLE_BYTES};

/// The largest header read (16 MiB); a larger one is refused, as NumPy
/// refuses headers beyond its `max_header_size`.
const MAX_HEADER_BYTES: usize = 1 << 24;

/// An opened `.npy` file: its header, validated against the file's length.
#[derive(Debug)]
pub struct NpyFile {
    pub(super) path: PathBuf,
    pub(super) file: File,
    pub(super) header: NpyHeader,
}

impl NpyFile {
    /// Opens `path` and parses its header.
    ///
    /// # Errors
    /// [`Error::Io`] if the file cannot be opened or read, [`Error::NotNpy`]
    /// for a directory, a pipe, socket or device, a bad magic or header, [`Error::UnsupportedDtype`], and
    /// [`Error::Truncated`] when the data is shorter than the shape says.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        // Before opening: opening a named pipe blocks until a writer comes.
        if let Ok(kind) = std::fs::metadata(&path).map(|m| m.file_type()) {
            if !kind.is_file() && !kind.is_dir() {
                let reason = "it is not a regular file (a pipe, socket or device); positioned reads need a file";
                return Err(Error::NotNpy { path, reason: reason.into() });
            }
        }
        let file = File::open(&path).map_err(|e| Error::io(&path, "open", e))?;
        Self::from_file(path, file)
    }

    /// Parses the header of the `.npy` data in `file`, named `path` in
    /// messages (an unpacked `.npz` member has no path of its own).
    ///
    /// # Errors
    /// As [`Self::open`].
    pub(super) fn from_file(path: PathBuf, file: File) -> Result<Self> {
        let meta = file.metadata().map_err(|e| Error::io(&path, "stat", e))?;
        if meta.is_dir() {
            return Err(Error::NotNpy { path, reason: "it is a directory".into() });
        }
        Self::from_part(path, file, 0, meta.len())
    }

    /// Parses the header of the `.npy` data at bytes `base..base + len` of
    /// `file` (a `.npz` member stored uncompressed), named `path` in
    /// messages; the header's `data_offset` is then the data's offset in
    /// `file`.
    ///
    /// # Errors
    /// As [`Self::open`], within those bytes.
    pub(super) fn from_part(path: PathBuf, file: File, base: u64, len: u64) -> Result<Self> {
        let mut header = parse_npy(&path, len, |buf, at| read_up_to(&file, buf, base + at))?;
        header.data_offset += base;
        Ok(NpyFile { path, file, header })
    }

    /// The parsed header.
    pub fn header(&self) -> &NpyHeader {
        &self.header
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open file, for positioned reads.
    pub fn file(&self) -> &File {
        &self.file
    }
}

/// Parses the header of `.npy` data of `len` bytes, named `path` in
/// messages, reading its bytes with `read` (up to the buffer's length at an
/// offset from the data's start; fewer only at their end), and checks that
/// the data are as long as the shape says.
///
/// # Errors
/// As [`NpyFile::open`] (a read error is [`Error::Io`]).
pub(super) fn parse_npy(
    path: &Path,
    len: u64,
    mut read: impl FnMut(&mut [u8], u64) -> std::io::Result<usize>,
) -> Result<NpyHeader> {
    let not_npy = |reason: String| Error::NotNpy { path: path.to_path_buf(), reason };
    let mut pre = [0u8; PREAMBLE_BYTES];
    let got = read(&mut pre[..len.min(PREAMBLE_BYTES as u64) as usize], 0).map_err(|e| Error::io(path, "read", e))?;
    let hlen = match header_len(&pre[..got]) {
        Ok(n) => n,
        Err(HeaderError::Short) => return Err(not_npy(format!("only {got} bytes, too short for a header"))),
        Err(HeaderError::Malformed(m) | HeaderError::Unsupported(m)) => return Err(not_npy(m)),
    };
    if hlen as u64 > len {
        return Err(not_npy(format!("the header claims {hlen} bytes but the file has {len}")));
    }
    if hlen > MAX_HEADER_BYTES {
        return Err(not_npy(format!(
            "its header is {hlen} bytes, more than the {MAX_HEADER_BYTES} bytes read (a header holds a dtype and a shape)"
        )));
    }
    let mut hbuf = vec![0u8; hlen];
    if read(&mut hbuf, 0).map_err(|e| Error::io(path, "read", e))? < hlen {
        return Err(not_npy("truncated header".into()));
    }
    let header = match parse_header(&hbuf) {
        Ok(h) => h,
        Err(HeaderError::Unsupported(descr)) => {
            return Err(Error::UnsupportedDtype { path: path.to_path_buf(), descr })
        }
        Err(HeaderError::Malformed(m)) => return Err(not_npy(m)),
        Err(HeaderError::Short) => return Err(not_npy("truncated header".into())),
    };
    let expected = header.data_bytes().ok_or_else(|| not_npy(format!("shape {:?} overflows", header.shape)))?;
    let found = len - header.data_offset;
    if found < expected {
        return Err(Error::Truncated { path: path.to_path_buf(), expected_bytes: expected, found_bytes: found });
    }
    Ok(header)
}

fn read_up_to(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Reads `buf.len()` bytes at `offset`, reporting a file that shrank since
/// it was opened as [`Error::Truncated`].
pub(super) fn read_exact(f: &NpyFile, buf: &mut [u8], offset: u64) -> Result<()> {
    f.file.read_exact_at(buf, offset).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            let len = f.file.metadata().map(|m| m.len()).unwrap_or(0);
            Error::Truncated {
                path: f.path.clone(),
                expected_bytes: f.header.data_bytes().unwrap_or(0),
                found_bytes: len.saturating_sub(f.header.data_offset),
            }
        } else {
            Error::io(&f.path, "read", e)
        }
    })
}
