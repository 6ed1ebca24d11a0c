//! Where results go: one trait, [`Sink`], for every output of a run (an
//! array stage's result in memory, a `.npy` file, a Zarr array, a row pass's
//! labels, probabilities or log-likelihoods), written a box at a time and
//! made whole by [`Sink::commit`].

use std::path::Path;
use std::sync::Mutex;

use crate::dtype::Dtype;
use crate::error::Result;
use crate::io::{PositionedNpy, ZarrOutput};

/// An output of `shape` elements of `dtype`, written a box at a time,
/// possibly from several threads at once (boxes never overlap), in any
/// order unless the sink says otherwise ([`Sink::chunk`]).
pub trait Sink: Send + Sync {
    /// The output's shape (elements per axis).
    fn shape(&self) -> &[usize];

    /// The element type of the bytes written.
    fn dtype(&self) -> Dtype;

    /// The box extents every write must have (a Zarr chunk; edge boxes are
    /// cut by the shape), or `None` for any box.
    fn chunk(&self) -> Option<&[usize]> {
        None
    }

    /// Writes the box `lo..hi` (inclusive–exclusive per axis): `bytes` are
    /// its elements in C order, little-endian, `dtype`'s item size each.
    ///
    /// # Errors
    /// [`crate::Error::Io`] or [`crate::Error::NoDiskSpace`] for a failed write.
    fn write(&self, lo: &[usize], hi: &[usize], bytes: &[u8]) -> Result<()>;

    /// Where element 0 lies in the sink's file, in bytes, for sinks that
    /// take C-order ranges by positioned writes ([`Sink::write_range`]
    /// being one write): `None` for others.
    fn file_offset(&self) -> Option<u64> {
        None
    }

    /// Writes the C-order range of elements `first..first + n` (`bytes`:
    /// `n` elements, little-endian): one positioned write for a `.npy`
    /// file, else the range's boxes ([`range_boxes`]) one by one, for
    /// sinks that take any box ([`Sink::chunk`] is `None`).
    ///
    /// # Errors
    /// As [`Sink::write`].
    fn write_range(&self, first: u64, bytes: &[u8]) -> Result<()> {
        let size = self.dtype().itemsize();
        let n = (bytes.len() / size) as u64;
        let mut from = 0;
        for (lo, hi) in range_boxes(self.shape(), first, first + n) {
            let len = lo.iter().zip(&hi).map(|(a, b)| b - a).product::<usize>() * size;
            self.write(&lo, &hi, &bytes[from..from + len])?;
            from += len;
        }
        Ok(())
    }

    /// Makes the output whole once every box is written: a file is renamed
    /// (or linked) into place, memory hands back its bytes (C-order,
    /// little-endian; `None` for files). Dropping a sink uncommitted leaves
    /// no output.
    ///
    /// # Errors
    /// [`crate::Error::Io`] when syncing or renaming fails.
    fn commit(self: Box<Self>) -> Result<Option<Vec<u8>>>;
}

impl dyn Sink + '_ {
    /// Writes rows `start..start + rows` whole (every column): `bytes` are
    /// `rows × (elements per row)` values in C order. For row passes, whose
    /// outputs are `(n_samples,)` or `(n_samples, k)`.
    ///
    /// # Errors
    /// As [`Sink::write`].
    pub fn write_rows(&self, start: usize, rows: usize, bytes: &[u8]) -> Result<()> {
        let shape = self.shape();
        let (mut lo, mut hi) = (vec![0; shape.len()], shape.to_vec());
        (lo[0], hi[0]) = (start, start + rows);
        self.write(&lo, &hi, bytes)
    }

    /// Writes columns `first_col..first_col + n_cols` of rows
    /// `first_row..first_row + rows` of a 2-D output (a group of
    /// components' probabilities): `bytes` row-major `(rows, n_cols)`.
    ///
    /// # Errors
    /// As [`Sink::write`].
    pub fn write_columns(
        &self,
        first_row: usize,
        rows: usize,
        first_col: usize,
        n_cols: usize,
        bytes: &[u8],
    ) -> Result<()> {
        self.write(&[first_row, first_col], &[first_row + rows, first_col + n_cols], bytes)
    }
}

/// The C-order runs of the box `lo..hi` of an array of `shape`: `(first
/// element, elements)` per run, in order (one run when the box spans every
/// axis after its outermost partial one).
pub fn box_runs(shape: &[usize], lo: &[usize], hi: &[usize]) -> Vec<(u64, usize)> {
    let nd = shape.len();
    // Axes after `k - 1` are whole: one run spans them and axis `k - 1`'s range.
    let mut k = nd;
    while k > 0 && lo[k - 1] == 0 && hi[k - 1] == shape[k - 1] {
        k -= 1;
    }
    let inner: usize = shape[k..].iter().product();
    if k == 0 {
        return vec![(0, inner)];
    }
    if lo[..k].iter().zip(&hi[..k]).any(|(a, b)| a >= b) {
        return Vec::new();
    }
    let run = (hi[k - 1] - lo[k - 1]) * inner;
    let mut strides = vec![inner as u64; k];
    for j in (0..k - 1).rev() {
        strides[j] = strides[j + 1] * shape[j + 1] as u64;
    }
    let mut at = lo[..k - 1].to_vec();
    let mut out = Vec::new();
    loop {
        let first: u64 =
            at.iter().zip(&strides).map(|(&c, &s)| c as u64 * s).sum::<u64>() + lo[k - 1] as u64 * strides[k - 1];
        out.push((first, run));
        // The next outer coordinate, C order.
        let mut j = k - 1;
        loop {
            if j == 0 {
                return out;
            }
            j -= 1;
            at[j] += 1;
            if at[j] < hi[j] {
                break;
            }
            at[j] = lo[j];
        }
    }
}

/// The boxes `(lo, hi)` that make up the C-order range of elements
/// `first..end` of an array of `shape`, in order: at most `2 · ndim - 1`
/// (a partial run of the innermost axes, whole blocks, a partial run).
pub fn range_boxes(shape: &[usize], first: u64, end: u64) -> Vec<(Vec<usize>, Vec<usize>)> {
    let mut out = Vec::new();
    push_range_boxes(shape, first, end, &mut Vec::new(), &mut out);
    out
}

fn push_range_boxes(
    shape: &[usize],
    first: u64,
    end: u64,
    outer: &mut Vec<usize>,
    out: &mut Vec<(Vec<usize>, Vec<usize>)>,
) {
    if first >= end {
        return;
    }
    let Some((&n, rest)) = shape.split_first() else {
        out.push((outer.clone(), outer.iter().map(|i| i + 1).collect()));
        return;
    };
    let inner: u64 = rest.iter().map(|&s| s as u64).product();
    let (mut r0, r1) = ((first / inner) as usize, (end / inner) as usize);
    let (a, b) = (first % inner, end % inner);
    let row = |r: usize, from: u64, to: u64, outer: &mut Vec<usize>, out: &mut Vec<(Vec<usize>, Vec<usize>)>| {
        outer.push(r);
        push_range_boxes(rest, from, to, outer, out);
        outer.pop();
    };
    if r0 == r1 {
        row(r0, a, b, outer, out);
        return;
    }
    if a > 0 {
        row(r0, a, inner, outer, out);
        r0 += 1;
    }
    if r1 > r0 {
        let (mut lo, mut hi) = (outer.clone(), outer.iter().map(|i| i + 1).collect::<Vec<_>>());
        lo.push(r0);
        hi.push(r1.min(n));
        lo.extend(rest.iter().map(|_| 0));
        hi.extend_from_slice(rest);
        out.push((lo, hi));
    }
    if b > 0 {
        row(r1, 0, b, outer, out);
    }
}

/// Hands `put` each C-order run of the box `lo..hi` of an array of `shape`
/// ([`box_runs`]) with its slice of `bytes` (the box's elements in C order,
/// `itemsize` bytes each): the one write loop of the sinks that place runs
/// themselves (memory, `.npy`).
///
/// # Errors
/// The first error `put` returns.
fn write_runs(
    shape: &[usize],
    itemsize: usize,
    lo: &[usize],
    hi: &[usize],
    bytes: &[u8],
    mut put: impl FnMut(u64, &[u8]) -> Result<()>,
) -> Result<()> {
    let mut from = 0;
    for (first, n) in box_runs(shape, lo, hi) {
        put(first, &bytes[from..from + n * itemsize])?;
        from += n * itemsize;
    }
    Ok(())
}

/// A result kept in memory.
#[derive(Debug)]
pub struct MemorySink {
    shape: Vec<usize>,
    dtype: Dtype,
    bytes: Mutex<Vec<u8>>,
}

impl MemorySink {
    /// Zeroed room for `shape` elements of `dtype` (allocated now: plan it).
    pub fn new(shape: &[usize], dtype: Dtype) -> Self {
        let n: usize = shape.iter().product();
        MemorySink { shape: shape.to_vec(), dtype, bytes: Mutex::new(vec![0; n * dtype.itemsize()]) }
    }
}

impl Sink for MemorySink {
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn write(&self, lo: &[usize], hi: &[usize], bytes: &[u8]) -> Result<()> {
        let size = self.dtype.itemsize();
        let mut out = self.bytes.lock().expect("no panics while writing");
        write_runs(&self.shape, size, lo, hi, bytes, |first, run| {
            let at = first as usize * size;
            out[at..at + run.len()].copy_from_slice(run);
            Ok(())
        })
    }
    fn commit(self: Box<Self>) -> Result<Option<Vec<u8>>> {
        Ok(Some(self.bytes.into_inner().expect("no panics while writing")))
    }
}

/// A `.npy` file written with positioned writes (boxes in any order, from
/// any thread), under a temporary name until committed.
#[derive(Debug)]
pub struct NpySink {
    file: PositionedNpy,
    shape: Vec<usize>,
    dtype: Dtype,
    /// The last range written by [`Sink::write_range`] (first, elements).
    last_range: Mutex<Option<(u64, u64)>>,
}

impl NpySink {
    /// Creates the file for `shape` elements of `dtype` at `path`.
    ///
    /// # Errors
    /// As [`PositionedNpy::create`] ([`crate::Error::OutputExists`] when
    /// `overwrite` is false and the path exists, disk space, I/O).
    pub fn create(path: &Path, dtype: Dtype, shape: &[usize], overwrite: bool) -> Result<Self> {
        let file = PositionedNpy::create(path, dtype, shape, overwrite)?;
        Ok(NpySink { file, shape: shape.to_vec(), dtype, last_range: Mutex::new(None) })
    }
}

impl Sink for NpySink {
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn write(&self, lo: &[usize], hi: &[usize], bytes: &[u8]) -> Result<()> {
        write_runs(&self.shape, self.dtype.itemsize(), lo, hi, bytes, |first, run| self.file.write_at(first, run))
    }
    fn file_offset(&self) -> Option<u64> {
        Some(self.file.data_offset())
    }
    /// One positioned write, then its write-back started at once; the
    /// previous range's pages, on disk by now, leave the page cache.
    fn write_range(&self, first: u64, bytes: &[u8]) -> Result<()> {
        self.file.write_at(first, bytes)?;
        let n = (bytes.len() / self.dtype.itemsize()) as u64;
        self.file.write_back(first, n);
        if let Some((p, m)) = self.last_range.lock().expect("no panics while writing").replace((first, n)) {
            self.file.write_back(p, m);
        }
        Ok(())
    }
    fn commit(self: Box<Self>) -> Result<Option<Vec<u8>>> {
        self.file.commit()?;
        Ok(None)
    }
}

/// A Zarr v3 array written a chunk at a time (each write one whole chunk,
/// or one whole shard when sharded, cut at the array's edges).
#[derive(Debug)]
pub struct ZarrSink {
    array: ZarrOutput,
    shape: Vec<usize>,
    dtype: Dtype,
}

impl ZarrSink {
    /// Creates the array (chunks of `chunks` elements per axis, grouped in
    /// shards of `shards` elements when given) at `path`.
    ///
    /// # Errors
    /// As [`ZarrOutput::create_sharded`].
    pub fn create(
        path: &Path,
        shape: &[usize],
        dtype: Dtype,
        chunks: &[usize],
        shards: Option<&[usize]>,
        overwrite: bool,
    ) -> Result<Self> {
        let array = ZarrOutput::create_sharded(path, shape, dtype, chunks, shards, overwrite)?;
        Ok(ZarrSink { array, shape: shape.to_vec(), dtype })
    }
}

impl Sink for ZarrSink {
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn chunk(&self) -> Option<&[usize]> {
        Some(self.array.chunk_shape())
    }
    fn write(&self, lo: &[usize], _hi: &[usize], bytes: &[u8]) -> Result<()> {
        let index: Vec<u64> = lo.iter().zip(self.array.chunk_shape()).map(|(&l, &c)| (l / c) as u64).collect();
        self.array.write_chunk(&index, bytes)
    }
    fn commit(self: Box<Self>) -> Result<Option<Vec<u8>>> {
        self.array.commit()?;
        Ok(None)
    }
}

/// A row pass's per-row output fed to a [`Sink`] block after block, in row
/// order (the callbacks `cluster::LabelSink`, `mixture::Outputs` take):
/// `put` writes the next rows, `columns` a box of rows and columns.
pub struct RowWriter<'s> {
    sink: &'s dyn Sink,
    next: usize,
    bytes: Vec<u8>,
}

impl<'s> RowWriter<'s> {
    /// Writes into `sink` from row 0 on.
    pub fn new(sink: &'s dyn Sink) -> Self {
        RowWriter { sink, next: 0, bytes: Vec::new() }
    }

    /// Writes `values` (whole rows, C order) as the next rows, each value
    /// encoded by `encode` into the sink's dtype.
    ///
    /// # Errors
    /// As [`Sink::write`].
    pub fn put<E: Copy>(&mut self, values: &[E], encode: impl Fn(E, &mut Vec<u8>)) -> Result<()> {
        let per_row: usize = self.sink.shape()[1..].iter().product();
        let rows = values.len() / per_row.max(1);
        self.bytes.clear();
        values.iter().for_each(|&v| encode(v, &mut self.bytes));
        self.sink.write_rows(self.next, rows, &self.bytes)?;
        self.next += rows;
        Ok(())
    }

    /// Writes `values` (row-major `(rows, n_cols)` `f64`) at rows
    /// `first_row..` and columns `first_col..first_col + n_cols` of a 2-D
    /// `float64` output.
    ///
    /// # Errors
    /// As [`Sink::write`].
    pub fn columns(&mut self, first_row: usize, first_col: usize, n_cols: usize, values: &[f64]) -> Result<()> {
        self.bytes.clear();
        values.iter().for_each(|v| self.bytes.extend_from_slice(&v.to_le_bytes()));
        self.sink.write_columns(first_row, values.len() / n_cols.max(1), first_col, n_cols, &self.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_cover_the_box_in_c_order() {
        assert_eq!(box_runs(&[4, 5], &[0, 0], &[4, 5]), vec![(0, 20)]);
        assert_eq!(box_runs(&[4, 5], &[1, 0], &[3, 5]), vec![(5, 10)]);
        assert_eq!(box_runs(&[4, 5], &[1, 2], &[3, 4]), vec![(7, 2), (12, 2)]);
        assert_eq!(box_runs(&[2, 3, 4], &[0, 1, 0], &[2, 3, 4]), vec![(4, 8), (16, 8)]);
        assert_eq!(box_runs(&[], &[], &[]), vec![(0, 1)]);
    }

    #[test]
    fn ranges_are_boxes_in_c_order() {
        let b = |lo: &[usize], hi: &[usize]| (lo.to_vec(), hi.to_vec());
        assert_eq!(range_boxes(&[4, 5], 0, 20), vec![b(&[0, 0], &[4, 5])]);
        assert_eq!(range_boxes(&[4, 5], 3, 17), vec![b(&[0, 3], &[1, 5]), b(&[1, 0], &[3, 5]), b(&[3, 0], &[4, 2])]);
        assert_eq!(range_boxes(&[4, 5], 6, 8), vec![b(&[1, 1], &[2, 3])]);
        assert_eq!(range_boxes(&[4, 5], 7, 7), vec![]);
        assert_eq!(range_boxes(&[], 0, 1), vec![b(&[], &[])]);
        // Every range of a 3-D array: the boxes' runs are the range, in order.
        let shape = [3, 4, 5];
        for first in 0..60u64 {
            for end in first..=60 {
                let runs: Vec<(u64, usize)> =
                    range_boxes(&shape, first, end).iter().flat_map(|(lo, hi)| box_runs(&shape, lo, hi)).collect();
                let mut at = first;
                for (f, n) in runs {
                    assert_eq!(f, at, "range {first}..{end}");
                    at += n as u64;
                }
                assert_eq!(at, end, "range {first}..{end}");
            }
        }
    }

    #[test]
    fn ranges_go_to_any_sink() {
        // A range written to memory lands where its elements belong; to
        // `.npy` it is one positioned write after the header.
        let m = MemorySink::new(&[3, 4], Dtype::U8);
        m.write_range(2, &[1, 2, 3, 4, 5, 6, 7]).unwrap();
        let got = (Box::new(m) as Box<dyn Sink>).commit().unwrap().unwrap();
        assert_eq!(got, vec![0, 0, 1, 2, 3, 4, 5, 6, 7, 0, 0, 0]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.npy");
        let f = NpySink::create(&path, Dtype::U8, &[3, 4], false).unwrap();
        let at = f.file_offset().unwrap() as usize;
        assert_eq!(at % 64, 0, "the header is padded");
        f.write_range(0, &[9; 5]).unwrap();
        f.write_range(5, &[8; 7]).unwrap();
        Box::new(f).commit().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[at..], &[9, 9, 9, 9, 9, 8, 8, 8, 8, 8, 8, 8]);
    }

    #[test]
    fn row_outputs_go_through_the_one_trait() {
        // Labels as int32 rows, probabilities by column groups, both read back.
        let dir = tempfile::tempdir().unwrap();
        let labels = NpySink::create(&dir.path().join("labels.npy"), Dtype::I32, &[5], false).unwrap();
        let proba = MemorySink::new(&[5, 3], Dtype::F64);
        {
            let mut w = RowWriter::new(&labels);
            w.put(&[1u32, 0, 2], |v, b| b.extend_from_slice(&(v as i32).to_le_bytes())).unwrap();
            w.put(&[2u32, 1], |v, b| b.extend_from_slice(&(v as i32).to_le_bytes())).unwrap();
            let mut p = RowWriter::new(&proba);
            p.columns(0, 0, 2, &[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]).unwrap();
            p.columns(0, 2, 1, &[1.1, 1.2, 1.3, 1.4, 1.5]).unwrap();
        }
        Box::new(labels).commit().unwrap();
        let got = crate::io::read_array_f64(dir.path().join("labels.npy"), 1).unwrap();
        assert_eq!(got.0, vec![1.0, 0.0, 2.0, 2.0, 1.0]);
        let bytes = (Box::new(proba) as Box<dyn Sink>).commit().unwrap().unwrap();
        let v: Vec<f64> = bytes.chunks_exact(8).map(|b| f64::from_le_bytes(b.try_into().unwrap())).collect();
        assert_eq!(v, vec![0.1, 0.2, 1.1, 0.3, 0.4, 1.2, 0.5, 0.6, 1.3, 0.7, 0.8, 1.4, 0.9, 1.0, 1.5]);
    }
}
