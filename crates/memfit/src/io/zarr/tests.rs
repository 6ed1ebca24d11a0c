//! Round trips through [`ZarrOutput`] and [`ZarrInput`]; the `#[ignore]`d
//! tests exchange arrays with zarr-python (see `interop_*`).

use std::path::Path;

use rayon::prelude::*;

use super::*;
use crate::dtype::Dtype;
use crate::io::writer::Unfinished;

/// The little-endian bytes of element `i` of the test arrays: `i % 97`,
/// less 40 for signed and float types, `i % 3 == 0` for bool (what
/// `expected` in the interop script computes with NumPy).
fn value(dtype: Dtype, i: usize) -> Vec<u8> {
    let v = (i % 97) as i64 - if dtype.is_signed_int() || dtype.is_float() { 40 } else { 0 };
    match dtype {
        Dtype::Bool => vec![u8::from(i.is_multiple_of(3))],
        Dtype::I8 => (v as i8).to_le_bytes().to_vec(),
        Dtype::I16 => (v as i16).to_le_bytes().to_vec(),
        Dtype::I32 => (v as i32).to_le_bytes().to_vec(),
        Dtype::I64 => v.to_le_bytes().to_vec(),
        Dtype::U8 => (v as u8).to_le_bytes().to_vec(),
        Dtype::U16 => (v as u16).to_le_bytes().to_vec(),
        Dtype::U32 => (v as u32).to_le_bytes().to_vec(),
        Dtype::U64 => (v as u64).to_le_bytes().to_vec(),
        Dtype::F16 => half::f16::from_f64(v as f64).to_le_bytes().to_vec(),
        Dtype::F32 => (v as f32).to_le_bytes().to_vec(),
        Dtype::F64 => (v as f64).to_le_bytes().to_vec(),
    }
}

/// The whole test array of `shape`, C order.
fn values(dtype: Dtype, shape: &[usize]) -> Vec<u8> {
    (0..shape.iter().product()).flat_map(|i| value(dtype, i)).collect()
}

/// Every chunk index of a grid of `chunks` over `shape`.
fn chunk_indices(shape: &[usize], chunks: &[usize]) -> Vec<Vec<u64>> {
    let grid: Vec<u64> = shape.iter().zip(chunks).map(|(&n, &c)| n.div_ceil(c) as u64).collect();
    let mut all = vec![vec![]];
    for &g in &grid {
        all = all.into_iter().flat_map(|p: Vec<u64>| (0..g).map(move |i| [p.clone(), vec![i]].concat())).collect();
    }
    all
}

/// The bytes of `data` (of `shape`) in the box `start + extent`.
fn sub_box(data: &[u8], shape: &[usize], start: &[usize], extent: &[usize], itemsize: usize) -> Vec<u8> {
    let mut out = vec![0u8; extent.iter().product::<usize>() * itemsize];
    copy_box((data, shape, start), (&mut out, extent, &vec![0; extent.len()]), extent, itemsize);
    out
}

/// Writes `data` of `shape` as a Zarr array at `path`, chunks in parallel.
fn write(path: &Path, dtype: Dtype, shape: &[usize], chunks: &[usize], data: &[u8], overwrite: bool) {
    let out = ZarrOutput::create(path, shape, dtype, chunks, overwrite).unwrap();
    chunk_indices(shape, chunks).par_iter().for_each(|index| {
        let start: Vec<usize> = index.iter().zip(chunks).map(|(&i, &c)| i as usize * c).collect();
        let extent: Vec<usize> = (0..shape.len()).map(|d| chunks[d].min(shape[d] - start[d])).collect();
        out.write_chunk(index, &sub_box(data, shape, &start, &extent, dtype.itemsize())).unwrap();
    });
    out.commit().unwrap();
}

fn read_all(path: &Path) -> (ZarrInput, Vec<u8>) {
    let input = ZarrInput::open(path).unwrap();
    let mut out = vec![0u8; input.shape().iter().product::<usize>() * input.dtype().itemsize()];
    input.read_region(&vec![0; input.shape().len()], input.shape(), &mut out, &ChunkCache::default()).unwrap();
    // Through a cache of two chunks: the same bytes.
    let chunk = input.chunk_shape().iter().product::<usize>() * input.dtype().itemsize();
    let mut cached = vec![0u8; out.len()];
    input
        .read_region(&vec![0; input.shape().len()], input.shape(), &mut cached, &ChunkCache::new(2 * chunk as u64))
        .unwrap();
    assert_eq!(cached, out);
    (input, out)
}

#[test]
fn every_dtype_round_trips_in_1_to_4_dimensions_with_edge_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[usize], &[usize]); 5] = [
        (&[10], &[4]),
        (&[5, 7], &[2, 3]),
        (&[3, 4, 5], &[2, 3, 2]),
        (&[2, 3, 4, 5], &[1, 2, 3, 2]),
        (&[3, 5], &[10, 10]), // one chunk, larger than the array
    ];
    for dtype in Dtype::ALL {
        for (k, (shape, chunks)) in cases.iter().enumerate() {
            let path = dir.path().join(format!("{}-{k}.zarr", dtype.name()));
            let data = values(dtype, shape);
            write(&path, dtype, shape, chunks, &data, false);
            let (input, back) = read_all(&path);
            assert_eq!((input.shape(), input.dtype(), input.chunk_shape()), (*shape, dtype, chunks.to_vec()));
            assert_eq!(back, data, "{} {shape:?}", dtype.name());
        }
    }
    let meta = std::fs::read_to_string(dir.path().join("float64-1.zarr/zarr.json")).unwrap();
    assert!(meta.contains("\"zstd\"") && meta.contains("\"little\"") && meta.contains("\"fill_value\": 0.0"), "{meta}");
    // Nothing but the arrays is left beside them.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), Dtype::ALL.len() * cases.len());
}

#[test]
fn regions_across_chunk_boundaries_read_back_and_unwritten_chunks_are_zero() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.zarr");
    let (shape, dtype) = ([10, 9, 3], Dtype::I32);
    let data = values(dtype, &shape);
    write(&path, dtype, &shape, &[4, 4, 2], &data, false);
    let input = ZarrInput::open(&path).unwrap();
    // Without a cache, with one of a chunk (4 · 4 · 2 values) and of all.
    for cache in [ChunkCache::default(), ChunkCache::new(32 * 4), ChunkCache::new(1 << 20)] {
        for (start, extent) in
            [([3, 2, 1], [6, 5, 2]), ([0, 0, 0], [10, 9, 3]), ([9, 8, 2], [1, 1, 1]), ([4, 4, 0], [0, 3, 3])]
        {
            let mut out = vec![0u8; extent.iter().product::<usize>() * 4];
            input.read_region(&start, &extent, &mut out, &cache).unwrap();
            assert_eq!(out, sub_box(&data, &shape, &start, &extent, 4), "{start:?} + {extent:?}");
        }
    }
    // Chunks never written (here: all but one) read as the fill value.
    let out = ZarrOutput::create(&dir.path().join("b.zarr"), &[5, 5], Dtype::F64, &[2, 2], false).unwrap();
    out.write_chunk(&[2, 2], &7f64.to_le_bytes()).unwrap();
    out.commit().unwrap();
    let (_, back) = read_all(&dir.path().join("b.zarr"));
    let mut expected = vec![0u8; 25 * 8];
    expected[24 * 8..].copy_from_slice(&7f64.to_le_bytes());
    assert_eq!(back, expected);
}

#[test]
fn concurrent_chunk_writes_from_many_threads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.zarr");
    let (shape, chunks) = ([203, 61], [8, 16]);
    let data = values(Dtype::F64, &shape);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(8).build().unwrap();
    pool.install(|| write(&path, Dtype::F64, &shape, &chunks, &data, false));
    assert_eq!(read_all(&path).1, data);
}

#[test]
fn an_existing_array_is_replaced_only_when_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.zarr");
    let old = values(Dtype::U16, &[4, 4]);
    write(&path, Dtype::U16, &[4, 4], &[2, 2], &old, false);
    let e = ZarrOutput::create(&path, &[3], Dtype::F32, &[2], false).unwrap_err();
    assert!(matches!(&e, Error::OutputExists { .. }), "{e}");
    assert!(!e.to_string().contains("--") && !e.to_string().contains("overwrite"), "{e}");
    assert_eq!(read_all(&path).1, old);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);

    let new = values(Dtype::F32, &[3]);
    write(&path, Dtype::F32, &[3], &[2], &new, true);
    let (input, back) = read_all(&path);
    assert_eq!((input.dtype(), back), (Dtype::F32, new));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "the replaced array is removed");

    // A folder that is not a Zarr array is never replaced.
    let other = dir.path().join("folder");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("precious.txt"), b"x").unwrap();
    let e = ZarrOutput::create(&other, &[3], Dtype::F32, &[2], true).unwrap_err();
    assert!(matches!(&e, Error::Io { cause, .. } if cause.kind() == io::ErrorKind::IsADirectory), "{e}");
    assert!(other.join("precious.txt").exists());
}

#[test]
fn dropping_without_commit_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = ZarrOutput::create(&dir.path().join("a.zarr"), &[6, 6], Dtype::I64, &[4, 4], false).unwrap();
    out.write_chunk(&[0, 1], &values(Dtype::I64, &[4, 2])).unwrap();
    let tmp: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(tmp.len(), 1);
    assert!(Unfinished::is_listed(&tmp[0]), "listed for remove_unfinished_outputs");
    drop(out);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    assert!(!Unfinished::is_listed(&tmp[0]));
}

#[test]
fn bad_arguments_and_inputs_are_error_values() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.zarr");
    for chunks in [&[][..], &[0, 2], &[2]] {
        let e = ZarrOutput::create(&path, &[4, 4], Dtype::F32, chunks, false).unwrap_err();
        assert!(matches!(e, Error::InvalidParameter { .. }), "{e}");
    }
    let e = ZarrOutput::create(&path, &[1 << 40, 1 << 20], Dtype::F64, &[1 << 10, 1 << 10], false).unwrap_err();
    assert!(matches!(&e, Error::NoDiskSpace { .. }), "{e}");
    let e = ZarrOutput::create(&dir.path().join("no/a.zarr"), &[4], Dtype::F32, &[2], false).unwrap_err();
    assert!(matches!(&e, Error::Io { cause, .. } if cause.kind() == io::ErrorKind::NotFound), "{e}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "nothing was created");

    let e = ZarrInput::open(&path).unwrap_err();
    assert!(matches!(&e, Error::Io { cause, .. } if cause.kind() == io::ErrorKind::NotFound), "{e}");
    std::fs::create_dir(&path).unwrap();
    assert!(matches!(ZarrInput::open(&path).unwrap_err(), Error::NotZarr { .. }));
    std::fs::write(path.join("zarr.json"), br#"{"zarr_format": 3, "node_type": "group"}"#).unwrap();
    let e = ZarrInput::open(&path).unwrap_err();
    assert!(matches!(e, Error::NotZarr { .. }), "{e:?}");
    let complex = r#"{"zarr_format": 3, "node_type": "array", "shape": [2], "data_type": "complex64",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": [0.0, 0.0],
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]}"#;
    std::fs::write(path.join("zarr.json"), complex).unwrap();
    let e = ZarrInput::open(&path).unwrap_err();
    assert!(matches!(&e, Error::UnsupportedDtype { descr, .. } if descr == "complex64"), "{e}");
}

/// Writes one array per dtype (shape 7×5, chunks 3×2, values of [`value`])
/// under `$MEMFIT_ZARR_OUT`, for zarr-python to check.
#[test]
#[ignore = "interop with zarr-python: run by hand"]
fn interop_write() {
    let dir = std::path::PathBuf::from(std::env::var("MEMFIT_ZARR_OUT").expect("MEMFIT_ZARR_OUT"));
    for dtype in Dtype::ALL {
        write(&dir.join(dtype.name()), dtype, &[7, 5], &[3, 2], &values(dtype, &[7, 5]), true);
    }
}

/// Reads the arrays zarr-python wrote under `$MEMFIT_ZARR_IN`
/// (`v2-<dtype>`, `v3-<dtype>`, `v2-big-endian-float64`, shape 7×5, values
/// of [`value`]) and refuses `v2-blosc` (a codec not built in).
#[test]
#[ignore = "interop with zarr-python: run by hand"]
fn interop_read() {
    let dir = std::path::PathBuf::from(std::env::var("MEMFIT_ZARR_IN").expect("MEMFIT_ZARR_IN"));
    for version in ["v2", "v3"] {
        for dtype in Dtype::ALL {
            let (input, back) = read_all(&dir.join(format!("{version}-{}", dtype.name())));
            assert_eq!((input.shape(), input.dtype()), (&[7, 5][..], dtype));
            assert_eq!(back, values(dtype, &[7, 5]), "{version} {}", dtype.name());
            let mut part = vec![0u8; 4 * 3 * dtype.itemsize()];
            input.read_region(&[2, 1], &[4, 3], &mut part, &ChunkCache::default()).unwrap();
            assert_eq!(part, sub_box(&back, &[7, 5], &[2, 1], &[4, 3], dtype.itemsize()));
        }
    }
    assert_eq!(read_all(&dir.join("v2-big-endian-float64")).1, values(Dtype::F64, &[7, 5]));
    let e = ZarrInput::open(&dir.join("v2-blosc")).unwrap_err();
    assert!(matches!(e, Error::NotZarr { .. }), "{e:?}");
    eprintln!("{e}");
}

#[test]
fn sharded_arrays_round_trip_with_edge_shards_one_file_each() {
    let dir = tempfile::tempdir().unwrap();
    let (shape, chunks, shards) = ([23, 10, 3], [2, 5, 3], [8, 10, 3]);
    for dtype in [Dtype::F64, Dtype::I16, Dtype::Bool] {
        let path = dir.path().join(format!("{}.zarr", dtype.name()));
        let data = values(dtype, &shape);
        let out = ZarrOutput::create_sharded(&path, &shape, dtype, &chunks, Some(&shards), false).unwrap();
        assert_eq!(out.chunk_shape(), shards);
        let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        pool.install(|| {
            chunk_indices(&shape, &shards).par_iter().for_each(|index| {
                let start: Vec<usize> = index.iter().zip(&shards).map(|(&i, &c)| i as usize * c).collect();
                let extent: Vec<usize> = (0..3).map(|d| shards[d].min(shape[d] - start[d])).collect();
                out.write_chunk(index, &sub_box(&data, &shape, &start, &extent, dtype.itemsize())).unwrap();
            })
        });
        out.commit().unwrap();
        assert_eq!(read_all(&path).1, data, "{}", dtype.name());
        let files = walk_files(&path);
        assert_eq!(files, 1 + 3, "zarr.json and 3 shards");
        let meta = std::fs::read_to_string(path.join("zarr.json")).unwrap();
        assert!(meta.contains("sharding_indexed") && meta.contains("\"zstd\""), "{meta}");
    }
    for bad in [&[3, 10, 3][..], &[8, 10][..], &[0, 10, 3][..]] {
        let e = ZarrOutput::create_sharded(&dir.path().join("bad.zarr"), &shape, Dtype::F64, &chunks, Some(bad), false)
            .unwrap_err();
        assert!(matches!(&e, Error::InvalidParameter { name, .. } if *name == "shards"), "{e:?}");
    }
    assert!(!dir.path().join("bad.zarr").exists());
}

fn walk_files(root: &Path) -> usize {
    std::fs::read_dir(root)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                walk_files(&e.path())
            } else {
                1
            }
        })
        .sum()
}
