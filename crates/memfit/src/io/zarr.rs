//! Placeholder until the Zarr module lands.
#![allow(missing_docs, clippy::missing_errors_doc)]
use crate::dtype::Dtype;
use crate::error::Result;
use std::path::{Path, PathBuf};
pub struct ZarrInput {
    path: PathBuf,
}
impl ZarrInput {
    pub fn open(path: &Path) -> Result<Self> {
        Ok(ZarrInput { path: path.to_path_buf() })
    }
    pub fn shape(&self) -> &[usize] {
        &[]
    }
    pub fn dtype(&self) -> Dtype {
        Dtype::F64
    }
    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn read_region(&self, _start: &[usize], _shape: &[usize], _out: &mut [u8]) -> Result<()> {
        Ok(())
    }
}
pub struct ZarrOutput {
    chunks: Vec<usize>,
}
impl ZarrOutput {
    pub fn create(_path: &Path, _shape: &[usize], _dtype: Dtype, chunks: &[usize], _overwrite: bool) -> Result<Self> {
        Ok(ZarrOutput { chunks: chunks.to_vec() })
    }
    pub fn chunk_shape(&self) -> &[usize] {
        &self.chunks
    }
    pub fn write_chunk(&self, _chunk_index: &[u64], _bytes: &[u8]) -> Result<()> {
        Ok(())
    }
    pub fn commit(self) -> Result<()> {
        Ok(())
    }
}
