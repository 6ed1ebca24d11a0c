//! The source readers through the public API (`memfit::io`): `.npy` files of
//! every supported dtype in both byte orders and both memory orders,
//! in-memory `ArrayRef` views, `read_rows` with a shift into `f32` and `f64`,
//! row ranges at the end, truncated files, non-finite values, `BlockReader`,
//! and the shared real data sets.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

use half::f16;
use memfit::exec::Cancel;
use memfit::io::{write_npy, ArrayRef, BlockReader, Dtype, Endian, NpyFile, Source, Values};
use memfit::{Error, Real};

/// Every dtype memfit reads.
const DTYPES: [Dtype; 12] = Dtype::ALL;

/// The dtypes Python hands to the estimators in place (the others are
/// converted first).
const IN_PLACE: [Dtype; 9] =
    [Dtype::U8, Dtype::I16, Dtype::I32, Dtype::I64, Dtype::U32, Dtype::U64, Dtype::F16, Dtype::F32, Dtype::F64];

/// More rows than one parallel conversion chunk (4096 rows), so chunk
/// boundaries are crossed; 3 columns.
const N: usize = 4101;
const D: usize = 3;

/// Values each dtype holds exactly, extremes included (the f16, f32 and f64
/// ones are exactly representable in their type).
fn palette(dtype: Dtype) -> Vec<f64> {
    match dtype {
        Dtype::Bool => vec![0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0],
        Dtype::I8 => vec![-128.0, 127.0, -1.0, 0.0, 42.0, -7.0, 100.0],
        Dtype::U16 => vec![0.0, 65535.0, 1.0, 256.0, 4321.0, 7.0, 32768.0],
        Dtype::U8 => vec![0.0, 1.0, 127.0, 128.0, 200.0, 255.0, 42.0],
        Dtype::I16 => vec![-32768.0, 32767.0, -1.0, 0.0, 1234.0, -4321.0, 255.0],
        Dtype::I32 => vec![i32::MIN as f64, i32::MAX as f64, -1.0, 0.0, 16_777_217.0, -7.0, 65536.0],
        Dtype::I64 => vec![-(2f64.powi(53)), 2f64.powi(53), -1.0, 0.0, 123_456_789_012.0, -5.0, 1e15],
        Dtype::U32 => vec![0.0, u32::MAX as f64, 1.0, 16_777_216.0, 7.0, 99.0, 3e9],
        Dtype::U64 => vec![0.0, 2f64.powi(53), 1.0, 2f64.powi(40), 7.0, 99.0, 1e12],
        Dtype::F16 => vec![0.5, -2.0, 65504.0, -0.0, 1.0 / 1024.0, 3.140625, -6.103515625e-5],
        Dtype::F32 => {
            vec![1.5, -1e30f32 as f64, f32::MAX as f64, 1e-40f32 as f64, 0.1f32 as f64, -0.0, 16_777_217.0f32 as f64]
        }
        Dtype::F64 => vec![0.1, -1e300, 5e-324, 1e16 + 2.0, -0.0, 123.456, f64::MAX],
    }
}

/// Element `(i, j)` of the test matrix of `dtype`.
fn element(dtype: Dtype, i: usize, j: usize) -> f64 {
    let p = palette(dtype);
    p[(i * 5 + j * 3 + i / 7) % p.len()]
}

/// One element's bytes in the given byte order.
fn encode(dtype: Dtype, x: f64, endian: Endian) -> Vec<u8> {
    macro_rules! bytes {
        ($v:expr) => {
            match endian {
                Endian::Little => $v.to_le_bytes().to_vec(),
                Endian::Big => $v.to_be_bytes().to_vec(),
            }
        };
    }
    match dtype {
        Dtype::Bool | Dtype::U8 => vec![x as u8],
        Dtype::I8 => vec![x as i8 as u8],
        Dtype::U16 => bytes!(x as u16),
        Dtype::I16 => bytes!(x as i16),
        Dtype::I32 => bytes!(x as i32),
        Dtype::I64 => bytes!(x as i64),
        Dtype::U32 => bytes!(x as u32),
        Dtype::U64 => bytes!(x as u64),
        Dtype::F16 => bytes!(f16::from_f64(x)),
        Dtype::F32 => bytes!(x as f32),
        Dtype::F64 => bytes!(x),
    }
}

/// The `.npy` descriptor of `dtype` in byte order `endian`.
fn descr(dtype: Dtype, endian: Endian) -> String {
    let little = dtype.descr();
    match (dtype, endian) {
        (Dtype::U8 | Dtype::I8 | Dtype::Bool, _) | (_, Endian::Little) => little.to_string(),
        (_, Endian::Big) => format!(">{}", &little[1..]),
    }
}

/// A version 1.0 `.npy` header, padded to 64 bytes as NumPy writes it.
fn header(descr: &str, fortran: bool, shape: &[usize]) -> Vec<u8> {
    let shape = match shape {
        [n] => format!("({n},)"),
        _ => format!("({})", shape.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")),
    };
    let fortran = if fortran { "True" } else { "False" };
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}");
    while (10 + dict.len() + 1) % 64 != 0 {
        dict.push(' ');
    }
    dict.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out
}

/// Writes the `n × d` matrix `get(i, j)` of `dtype` as a `.npy` file in the
/// given byte order and memory order.
fn write_matrix(
    path: &Path,
    dtype: Dtype,
    endian: Endian,
    fortran: bool,
    n: usize,
    d: usize,
    get: impl Fn(usize, usize) -> f64,
) {
    let mut bytes = header(&descr(dtype, endian), fortran, &[n, d]);
    if fortran {
        for j in 0..d {
            for i in 0..n {
                bytes.extend(encode(dtype, get(i, j), endian));
            }
        }
    } else {
        for i in 0..n {
            for j in 0..d {
                bytes.extend(encode(dtype, get(i, j), endian));
            }
        }
    }
    std::fs::write(path, bytes).unwrap();
}

/// Reads rows `[start, start + rows)` as `T` with `shift`, through a scratch
/// buffer sized exactly as the engine sizes it.
fn read<T: Real>(src: &Source<'_>, start: usize, rows: usize, shift: &[f64]) -> memfit::Result<Vec<T>> {
    let mut scratch = vec![0u8; rows * src.scratch_bytes_per_row()];
    let mut out = vec![T::default(); rows * src.n_features()];
    src.read_rows(start, rows, shift, &mut scratch, &mut out)?;
    Ok(out)
}

/// Bitwise equality of `f64`s (so that -0.0 and 0.0 differ), any NaN equal.
fn same(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// Checks that `src` holds `get(i, j)`: every element, read as `T` with a
/// shift through several row ranges (whole, blocks with a short last one,
/// the last rows, the last row alone, nothing at the end), is
/// `T::from_f64(get(i, j) - shift[j])`.
fn check_rows<T: Real>(src: &Source<'_>, shift: &[f64], get: &dyn Fn(usize, usize) -> f64, what: &str) {
    let (n, d) = (src.n_samples(), src.n_features());
    let expect = |i: usize, j: usize| T::from_f64(get(i, j) - shift[j]).to_f64();
    let mut ranges = vec![(0, n)];
    ranges.extend((0..n).step_by(1000).map(|s| (s, 1000.min(n - s))));
    ranges.extend([(n - 3, 3), (n - 1, 1), (n, 0), (0, 1)]);
    for (start, rows) in ranges {
        let got = read::<T>(src, start, rows, shift).unwrap();
        assert_eq!(got.len(), rows * d);
        for (k, v) in got.iter().enumerate() {
            let (i, j) = (start + k / d, k % d);
            assert!(
                same(v.to_f64(), expect(i, j)),
                "{what}, as {}, rows {start}..{}: element ({i}, {j}) = {v:?}, expected {} (stored {}, shift {})",
                std::any::type_name::<T>(),
                start + rows,
                expect(i, j),
                get(i, j),
                shift[j]
            );
        }
    }
}

#[test]
fn npy_files_of_every_dtype_byte_order_and_memory_order() {
    let dir = tempfile::tempdir().unwrap();
    // A shift per column: zero, a fraction, and a negative integer.
    let shift = [0.0, 0.75, -3.0];
    for dtype in DTYPES {
        for endian in [Endian::Little, Endian::Big] {
            if dtype.itemsize() == 1 && endian == Endian::Big {
                continue; // single bytes have no byte order
            }
            for fortran in [false, true] {
                let what = format!("{} ({endian:?}, {})", descr(dtype, endian), if fortran { "F" } else { "C" });
                let path = dir.path().join(format!("{}_{endian:?}_{fortran}.npy", dtype.name()));
                let get = |i: usize, j: usize| element(dtype, i, j);
                write_matrix(&path, dtype, endian, fortran, N, D, get);
                let src = Source::open_matrix(&path).unwrap();
                assert_eq!((src.n_samples(), src.n_features(), src.dtype()), (N, D, dtype), "{what}");
                assert_eq!(src.scratch_bytes_per_row(), D * dtype.itemsize(), "{what}");
                assert_eq!(src.name(), path);
                let h = NpyFile::open(&path).unwrap();
                assert_eq!((h.header().endian, h.header().fortran_order), (endian, fortran), "{what}");
                check_rows::<f64>(&src, &shift, &get, &what);
                check_rows::<f32>(&src, &shift, &get, &what);
                check_rows::<f64>(&src, &[0.0; D], &get, &what);
                for (i, j) in [(0, 0), (1, 2), (N - 1, 0), (N - 1, D - 1), (4097, 1)] {
                    assert!(same(src.value(i, j).unwrap(), get(i, j)), "{what}: value({i}, {j})");
                }
            }
        }
    }
}

/// The palette of `dtype` as a typed in-memory buffer of `len` elements,
/// element `k` being `palette[k % len]`, wrapped as [`Values`] by `f`.
fn with_values<R>(dtype: Dtype, len: usize, at: impl Fn(usize) -> f64, f: impl FnOnce(Values<'_>) -> R) -> R {
    macro_rules! typed {
        ($variant:ident, $conv:expr) => {{
            let buf: Vec<_> = (0..len).map(|k| $conv(at(k))).collect();
            f(Values::$variant(&buf))
        }};
    }
    match dtype {
        Dtype::U8 => typed!(U8, |x: f64| x as u8),
        Dtype::I16 => typed!(I16, |x: f64| x as i16),
        Dtype::I32 => typed!(I32, |x: f64| x as i32),
        Dtype::I64 => typed!(I64, |x: f64| x as i64),
        Dtype::U32 => typed!(U32, |x: f64| x as u32),
        Dtype::U64 => typed!(U64, |x: f64| x as u64),
        Dtype::F16 => typed!(F16, f16::from_f64),
        Dtype::F32 => typed!(F32, |x: f64| x as f32),
        Dtype::F64 => typed!(F64, |x: f64| x),
        Dtype::Bool | Dtype::I8 | Dtype::U16 => unreachable!("not in IN_PLACE"),
    }
}

#[test]
fn in_memory_views_of_every_dtype_c_fortran_and_strided() {
    let shift = [1.0, -0.5, 1e3];
    for dtype in IN_PLACE {
        let get = |i: usize, j: usize| element(dtype, i, j);
        // C order.
        with_values(
            dtype,
            N * D,
            |k| get(k / D, k % D),
            |v| {
                let src = Source::memory(ArrayRef::c_order(v, N, D).unwrap());
                assert_eq!((src.n_samples(), src.n_features(), src.dtype()), (N, D, dtype));
                assert_eq!((src.scratch_bytes_per_row(), src.name()), (0, PathBuf::from("<memory>")));
                check_rows::<f64>(&src, &shift, &get, &format!("{} C order", dtype.name()));
                check_rows::<f32>(&src, &shift, &get, &format!("{} C order", dtype.name()));
                assert!(same(src.value(N - 1, 2).unwrap(), get(N - 1, 2)));
            },
        );
        // Fortran order: element (i, j) at i + j * N.
        with_values(
            dtype,
            N * D,
            |k| get(k % N, k / N),
            |v| {
                let src = Source::memory(ArrayRef::strided(v, N, D, 1, N).unwrap());
                check_rows::<f64>(&src, &shift, &get, &format!("{} Fortran order", dtype.name()));
                check_rows::<f32>(&src, &shift, &get, &format!("{} Fortran order", dtype.name()));
                assert!(same(src.value(N - 2, 1).unwrap(), get(N - 2, 1)));
            },
        );
        // A strided view, as X[1::2, 1::2] of a C-order (2N, 2D) array: the
        // buffer starts at element (1, 1), rows 4D apart, columns 2 apart.
        let (rs, cs) = (4 * D, 2);
        let parent = |k: usize| {
            let (pi, pj) = (k / (2 * D), k % (2 * D));
            if pi % 2 == 1 && pj % 2 == 1 {
                get(pi / 2, pj / 2)
            } else {
                palette(dtype)[0] // elements outside the view
            }
        };
        with_values(dtype, 4 * N * D, parent, |v| {
            let first = 2 * D + 1;
            let view = match v {
                Values::U8(b) => Values::U8(&b[first..]),
                Values::I16(b) => Values::I16(&b[first..]),
                Values::I32(b) => Values::I32(&b[first..]),
                Values::I64(b) => Values::I64(&b[first..]),
                Values::U32(b) => Values::U32(&b[first..]),
                Values::U64(b) => Values::U64(&b[first..]),
                Values::F16(b) => Values::F16(&b[first..]),
                Values::F32(b) => Values::F32(&b[first..]),
                Values::F64(b) => Values::F64(&b[first..]),
            };
            let src = Source::memory(ArrayRef::strided(view, N, D, rs, cs).unwrap());
            check_rows::<f64>(&src, &shift, &get, &format!("{} strided view", dtype.name()));
            check_rows::<f32>(&src, &shift, &get, &format!("{} strided view", dtype.name()));
        });
    }
}

#[test]
fn array_ref_refuses_a_buffer_smaller_than_its_shape() {
    let v = [0.0f64; 12];
    assert!(ArrayRef::c_order(Values::F64(&v), 4, 3).is_ok());
    let e = ArrayRef::c_order(Values::F64(&v), 5, 3).unwrap_err();
    assert!(matches!(&e, Error::ShapeMismatch { expected, .. } if expected == &[5, 3]), "{e}");
    // The last element of a strided view must lie inside the buffer.
    // Fortran order (4, 3) fits; column stride 5 puts the last element at 13.
    assert!(ArrayRef::strided(Values::F64(&v), 4, 3, 1, 4).is_ok());
    assert!(ArrayRef::strided(Values::F64(&v), 4, 3, 1, 5).is_err());
    // (2, 2) with row stride 7 ends at element 7 + 4 = 11, with 8 at 12.
    assert!(ArrayRef::strided(Values::F64(&v), 2, 2, 7, 4).is_ok());
    assert!(ArrayRef::strided(Values::F64(&v), 2, 2, 8, 4).is_err());
    // A shape whose extent overflows.
    assert!(ArrayRef::strided(Values::F64(&v), usize::MAX, 2, usize::MAX, 1).is_err());
    // Empty shapes need no elements.
    assert!(ArrayRef::strided(Values::F64(&[]), 0, 3, 3, 1).is_ok());
    let src = Source::memory(ArrayRef::c_order(Values::F64(&[]), 0, 3).unwrap());
    assert_eq!(read::<f64>(&src, 0, 0, &[0.0; 3]).unwrap(), Vec::<f64>::new());
}

#[test]
fn shift_is_applied_in_f64_before_rounding_to_f32() {
    // Values near 1e8 differ by less than float32's spacing there (8); shifted
    // first, they are small and exact in float32.
    let base = 1e8;
    let x: Vec<f64> = (0..8).map(|k| base + k as f64 * 0.25).collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.npy");
    write_npy(&path, Dtype::F64, &[8, 1], &x, |v: f64, o: &mut Vec<u8>| o.extend_from_slice(&v.to_le_bytes())).unwrap();
    let file = Source::open_matrix(&path).unwrap();
    let memory = Source::memory(ArrayRef::c_order(Values::F64(&x), 8, 1).unwrap());
    for src in [&file, &memory] {
        let got = read::<f32>(src, 0, 8, &[base]).unwrap();
        assert_eq!(got, (0..8).map(|k| k as f32 * 0.25).collect::<Vec<_>>());
        // Unshifted, float32 cannot tell them apart.
        let raw = read::<f32>(src, 0, 8, &[0.0]).unwrap();
        assert!(raw.iter().all(|&v| v == base as f32), "{raw:?}");
        let exact = read::<f64>(src, 0, 8, &[base]).unwrap();
        assert_eq!(exact, (0..8).map(|k| k as f64 * 0.25).collect::<Vec<_>>());
    }
    // Integers shifted by a fraction: uint8 centred on 127.5.
    let bytes: Vec<u8> = (0..=255).collect();
    let src = Source::memory(ArrayRef::c_order(Values::U8(&bytes), 256, 1).unwrap());
    let got = read::<f32>(&src, 0, 256, &[127.5]).unwrap();
    assert_eq!(got, (0..=255).map(|k| k as f32 - 127.5).collect::<Vec<_>>());
}

#[test]
fn non_finite_values_pass_through_unchanged() {
    // The readers convert; validation (naming the first non-finite value) is
    // the jobs' business, so NaN and ±inf reach them as stored.
    let specials = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, 1.0, -f64::NAN];
    let get = |i: usize, j: usize| specials[(i + 2 * j) % specials.len()];
    let dir = tempfile::tempdir().unwrap();
    let shift = [0.0, 2.5];
    for dtype in [Dtype::F16, Dtype::F32, Dtype::F64] {
        for endian in [Endian::Little, Endian::Big] {
            for fortran in [false, true] {
                let path = dir.path().join(format!("{}_{endian:?}_{fortran}.npy", dtype.name()));
                write_matrix(&path, dtype, endian, fortran, 50, 2, get);
                let src = Source::open_matrix(&path).unwrap();
                let what = format!("{} {endian:?} fortran={fortran}", dtype.name());
                for (start, rows) in [(0, 50), (47, 3)] {
                    let f64s = read::<f64>(&src, start, rows, &shift).unwrap();
                    let f32s = read::<f32>(&src, start, rows, &shift).unwrap();
                    for k in 0..rows * 2 {
                        let (i, j) = (start + k / 2, k % 2);
                        let want = get(i, j) - shift[j];
                        assert!(same(f64s[k], want), "{what}: ({i}, {j}) as f64 = {}, expected {want}", f64s[k]);
                        assert!(same(f64::from(f32s[k]), want), "{what}: ({i}, {j}) as f32 = {}", f32s[k]);
                    }
                }
                assert!(src.value(0, 0).unwrap().is_nan());
                assert_eq!(src.value(1, 0).unwrap(), f64::INFINITY);
            }
        }
    }
    let v: Vec<f32> = (0..100).map(|k| get(k / 2, k % 2) as f32).collect();
    let src = Source::memory(ArrayRef::c_order(Values::F32(&v), 50, 2).unwrap());
    let got = read::<f64>(&src, 0, 50, &shift).unwrap();
    assert!(got.iter().enumerate().all(|(k, &x)| same(x, get(k / 2, k % 2) - shift[k % 2])));
}

#[test]
fn truncated_files_are_refused_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.npy");
    write_matrix(&path, Dtype::F32, Endian::Little, false, 10, 3, |i, j| (i * 3 + j) as f64);
    let full = std::fs::read(&path).unwrap();
    let data_offset = full.len() - 10 * 3 * 4;
    // Cut inside the data: the error says how much the header promised.
    std::fs::write(&path, &full[..full.len() - 5]).unwrap();
    let e = Source::open_matrix(&path).unwrap_err();
    assert!(matches!(&e, Error::Truncated { expected_bytes: 120, found_bytes: 115, path: p } if p == &path), "{e:?}");
    assert!(e.to_string().contains("truncated"), "{e}");
    // No data at all.
    std::fs::write(&path, &full[..data_offset]).unwrap();
    assert!(matches!(Source::open_matrix(&path), Err(Error::Truncated { found_bytes: 0, .. })));
    // Cut inside the header, or inside the magic.
    for cut in [data_offset - 1, 30, 9, 3, 0] {
        std::fs::write(&path, &full[..cut]).unwrap();
        let e = Source::open_matrix(&path).unwrap_err();
        assert!(matches!(e, Error::NotNpy { .. }), "cut at {cut}: {e:?}");
    }
    // Trailing bytes after the data are tolerated (NumPy ignores them too).
    let mut longer = full.clone();
    longer.extend_from_slice(b"junk");
    std::fs::write(&path, &longer).unwrap();
    let src = Source::open_matrix(&path).unwrap();
    assert_eq!(read::<f64>(&src, 9, 1, &[0.0; 3]).unwrap(), [27.0, 28.0, 29.0]);
}

#[test]
fn a_file_cut_short_after_opening_is_reported_on_read() {
    let dir = tempfile::tempdir().unwrap();
    for fortran in [false, true] {
        let path = dir.path().join(format!("x{fortran}.npy"));
        let (n, d) = (1000, 4);
        write_matrix(&path, Dtype::F64, Endian::Little, fortran, n, d, |i, j| (i * d + j) as f64);
        let src = Source::open_matrix(&path).unwrap();
        let len = std::fs::metadata(&path).unwrap().len();
        let keep = len - 8 * (n * d) as u64 / 2; // half the data
        OpenOptions::new().write(true).open(&path).unwrap().set_len(keep).unwrap();
        let e = read::<f64>(&src, n - 10, 10, &[0.0; 4]).unwrap_err();
        assert!(
            matches!(&e, Error::Truncated { expected_bytes: 32000, found_bytes: 16000, .. }),
            "fortran={fortran}: {e:?}"
        );
        assert!(src.value(n - 1, d - 1).is_err());
        // C order: the first rows are still there; Fortran order: the first
        // columns are, the last are not.
        if fortran {
            assert!(read::<f64>(&src, 0, 10, &[0.0; 4]).is_err());
            assert_eq!(src.value(5, 0).unwrap(), 20.0);
        } else {
            assert_eq!(read::<f64>(&src, 0, 2, &[0.0; 4]).unwrap(), (0..8).map(f64::from).collect::<Vec<_>>());
        }
    }
}

#[test]
#[should_panic]
fn reading_past_the_last_row_is_a_programming_error() {
    let v = [1.0f64; 6];
    let src = Source::memory(ArrayRef::c_order(Values::F64(&v), 3, 2).unwrap());
    let _ = read::<f64>(&src, 2, 2, &[0.0; 2]);
}

#[test]
fn open_checks_dimensions_and_stacks() {
    let dir = tempfile::tempdir().unwrap();
    let put = |x: f64, o: &mut Vec<u8>| o.extend_from_slice(&x.to_le_bytes());
    let v: Vec<f64> = (0..24).map(f64::from).collect();
    let three = dir.path().join("s.npy");
    write_npy(&three, Dtype::F64, &[2, 3, 4], &v, put).unwrap();
    assert!(matches!(Source::open_matrix(&three), Err(Error::WrongDimensions { expected: 2, .. })));
    let (src, shape) = Source::open_stacked(&three, 3).unwrap();
    assert_eq!((shape, src.n_samples(), src.n_features()), (vec![2, 3, 4], 6, 4));
    assert_eq!(read::<f64>(&src, 5, 1, &[0.0; 4]).unwrap(), [20.0, 21.0, 22.0, 23.0]);
    assert_eq!(memfit::io::read_array_f64(&three, 3).unwrap(), (v.clone(), vec![2, 3, 4]));
    // A Fortran-order stack is refused with a hint; a Fortran matrix is read.
    let f3 = dir.path().join("f3.npy");
    let mut bytes = header("<f8", true, &[2, 3, 4]);
    v.iter().for_each(|x| bytes.extend_from_slice(&x.to_le_bytes()));
    std::fs::write(&f3, &bytes).unwrap();
    let e = Source::open_stacked(&f3, 3).unwrap_err().to_string();
    assert!(e.contains("Fortran order") && e.contains("ascontiguousarray"), "{e}");
    let f2 = dir.path().join("f2.npy");
    write_matrix(&f2, Dtype::F64, Endian::Big, true, 4, 6, |i, j| (i * 6 + j) as f64);
    assert_eq!(memfit::io::read_matrix_f64(&f2).unwrap(), ((0..24).map(f64::from).collect(), 4, 6));
}

#[test]
fn block_reader_visits_every_row_once_with_weights_and_a_short_last_block() {
    let dir = tempfile::tempdir().unwrap();
    let (n, d) = (N, D);
    let get = |i: usize, j: usize| element(Dtype::I32, i, j);
    let x = dir.path().join("x.npy");
    write_matrix(&x, Dtype::I32, Endian::Big, true, n, d, get);
    let w = dir.path().join("w.npy");
    let mut bytes = header("<f4", false, &[n]);
    (0..n).for_each(|i| bytes.extend_from_slice(&(i as f32 * 0.5).to_le_bytes()));
    std::fs::write(&w, bytes).unwrap();
    let (xs, ws) = (Source::open_matrix(&x).unwrap(), Source::open_vector(&w).unwrap());
    xs.check_weights(Some(&ws)).unwrap();
    let shift = [1.0, 2.0, 3.0];
    for block in [1000, n, 1, 4096] {
        let mut reader = BlockReader::<f64>::new(&xs, Some(&ws), block);
        assert_eq!((reader.block_rows(), reader.x().n_samples()), (block, n));
        assert!(reader.weights().is_some());
        let mut next = 0;
        reader
            .for_each(&shift, &Cancel::new(), |b| {
                let (start, values, weights) = (b.start, b.x, b.w);
                assert_eq!(start, next);
                let rows = values.len() / d;
                assert_eq!(rows, block.min(n - start));
                let weights = weights.unwrap();
                assert_eq!(weights.len(), rows);
                for r in 0..rows {
                    assert_eq!(weights[r], (start + r) as f64 * 0.5);
                    for j in 0..d {
                        assert_eq!(values[r * d + j], get(start + r, j) - shift[j], "block {block}");
                    }
                }
                next += rows;
                Ok(())
            })
            .unwrap();
        assert_eq!(next, n);
        let mut row = [0.0; D];
        reader.read_row(n - 1, &shift, &mut row).unwrap();
        assert_eq!(row.to_vec(), (0..d).map(|j| get(n - 1, j) - shift[j]).collect::<Vec<_>>());
    }
    // float32 blocks, as the kernels see them: read_row rounds to f32 first.
    let mut reader = BlockReader::<f32>::new(&xs, None, 512);
    let mut row = [0.0; D];
    reader.read_row(0, &[0.0; D], &mut row).unwrap();
    assert_eq!(row.to_vec(), (0..d).map(|j| f64::from(get(0, j) as f32)).collect::<Vec<_>>());
    // Cancelled before the first block; an error from the callback stops the pass.
    let e = reader
        .for_each(
            &[0.0; D],
            &{
                let c = Cancel::new();
                c.cancel();
                c
            },
            |_| panic!("no block after cancel"),
        )
        .unwrap_err();
    assert!(matches!(e, Error::Cancelled));
    let mut calls = 0;
    let e = reader
        .for_each(&[0.0; D], &Cancel::new(), |_| {
            calls += 1;
            Err(Error::Cancelled)
        })
        .unwrap_err();
    assert!(matches!(e, Error::Cancelled) && calls == 1);
    // Weights of another length are refused.
    let short = dir.path().join("short.npy");
    write_npy(&short, Dtype::F64, &[n - 1], &vec![1.0; n - 1], |v: f64, o: &mut Vec<u8>| {
        o.extend_from_slice(&v.to_le_bytes())
    })
    .unwrap();
    let e = xs.check_weights(Some(&Source::open_vector(&short).unwrap())).unwrap_err();
    assert!(matches!(&e, Error::ShapeMismatch { what, .. } if what == "sample_weight"), "{e}");
}

/// A shared real data set, or `None` (the test then passes, saying so) when
/// it is absent; absent while `MEMFIT_REQUIRE_DATASETS` is set (as `.ci/run`
/// sets it where `../shared/datasets` exists), the test fails.
fn shared_dataset(name: &str) -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/datasets");
    let path = dir.join(name);
    if path.is_file() {
        return Some(path);
    }
    let required = std::env::var("MEMFIT_REQUIRE_DATASETS").is_ok_and(|v| !v.is_empty() && v != "0");
    assert!(
        !required,
        "shared data set {name} not found in {}, but MEMFIT_REQUIRE_DATASETS is set (CI expects the shared data sets): restore the file, or unset the variable to skip",
        dir.display()
    );
    eprintln!("skipped: shared data set {name} not found in {}", dir.display());
    None
}

#[test]
fn shared_mnist_uint8_reads_to_its_last_row() {
    let Some(path) = shared_dataset("mnist_X_uint8.npy") else { return };
    let src = Source::open_matrix(&path).unwrap();
    let (n, d) = (src.n_samples(), src.n_features());
    assert_eq!((n, d, src.dtype()), (70_000, 784, Dtype::U8));
    let shift = vec![127.5; d];
    let rows = read::<f32>(&src, n - 5, 5, &shift).unwrap();
    for (k, v) in rows.iter().enumerate() {
        let stored = src.value(n - 5 + k / d, k % d).unwrap();
        assert!((0.0..=255.0).contains(&stored) && stored.fract() == 0.0);
        assert_eq!(f64::from(*v), stored - 127.5);
    }
    // Blocks over the whole file: every pixel in 0..=255, and some ink.
    let mut reader = BlockReader::<f32>::new(&src, None, 8192);
    let (mut max, mut seen) = (0f32, 0);
    reader
        .for_each(&vec![0.0; d], &Cancel::new(), |b| {
            let values = b.x;
            seen += values.len() / d;
            max = values.iter().fold(max, |m, &v| m.max(v));
            assert!(values.iter().all(|&v| (0.0..=255.0).contains(&v) && v.fract() == 0.0));
            Ok(())
        })
        .unwrap();
    assert_eq!((seen, max), (n, 255.0));
}

#[test]
fn shared_nycflights_keeps_its_missing_values() {
    let Some(path) = shared_dataset("nycflights13_numeric_with_nan_f64.npy") else { return };
    let src = Source::open_matrix(&path).unwrap();
    let (n, d) = (src.n_samples(), src.n_features());
    assert_eq!((n, d, src.dtype()), (336_776, 14, Dtype::F64));
    let mut reader = BlockReader::<f64>::new(&src, None, 50_000);
    let (mut nan, mut first) = (0usize, None);
    reader
        .for_each(&vec![0.0; d], &Cancel::new(), |b| {
            let (start, values) = (b.start, b.x);
            for (k, v) in values.iter().enumerate() {
                if v.is_nan() {
                    nan += 1;
                    first.get_or_insert((start + k / d, k % d));
                }
            }
            assert!(values.iter().all(|v| v.is_nan() || v.is_finite()));
            Ok(())
        })
        .unwrap();
    assert!(nan > 0, "the missing values (cancelled flights) are NaN");
    let (i, j) = first.unwrap();
    assert!(src.value(i, j).unwrap().is_nan());
    // The same values as f32, rows at the very end.
    let last64 = read::<f64>(&src, n - 2, 2, &vec![0.0; d]).unwrap();
    let last32 = read::<f32>(&src, n - 2, 2, &vec![0.0; d]).unwrap();
    assert!(last64.iter().zip(&last32).all(|(a, b)| same(f64::from(*a as f32), f64::from(*b))));
}
