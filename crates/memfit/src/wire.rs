//! Exact, compact encodings of `f64` vectors for the wire format (postcard,
//! see [`crate::exec::remote`]), for `#[serde(with = "...")]` on the large
//! vectors that tasks send and return (centres, per-cluster sums):
//! - [`bytes`]: a `Vec<u8>` as one byte string, which postcard copies whole
//!   (serde's default for a `Vec<u8>` is a sequence, written and read byte
//!   by byte);
//! - [`f64_le`]: the values' little-endian bytes as one byte string;
//! - [`zero_runs`]: runs of `+0.0` as their lengths and the other values as
//!   [`f64_le`] bytes: per-cluster sums of wide sparse rows, most of which a
//!   range never touches, travel as the values it touched.
//!
//! Both are exact: every value is sent as its bits (a `-0.0` or a NaN is
//! not a `+0.0`), and the decoded vector equals the encoded one bit for bit.

use serde::de::{Error, Visitor};
use serde::{Deserializer, Serializer};

/// `Vec<u8>` as one byte string.
pub(crate) mod bytes {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(v)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        d.deserialize_bytes(BytesWith(|b: &[u8]| Ok(b.to_vec())))
    }
}

/// `Vec<f64>` as one string of little-endian bytes.
pub(crate) mod f64_le {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(v: &[f64], s: S) -> Result<S::Ok, S::Error> {
        if cfg!(target_endian = "little") {
            s.serialize_bytes(bytemuck::cast_slice(v))
        } else {
            s.serialize_bytes(&v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>())
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
        d.deserialize_bytes(BytesWith(|b: &[u8]| {
            if !b.len().is_multiple_of(8) {
                return Err(format!("{} bytes are not f64 values", b.len()));
            }
            Ok(b.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes"))).collect())
        }))
    }
}

/// A visitor of one byte string, which `F` turns into the value (or the
/// reason it cannot).
struct BytesWith<F>(F);

impl<V, F: FnOnce(&[u8]) -> Result<V, String>> Visitor<'_> for BytesWith<F> {
    type Value = V;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a byte string")
    }
    fn visit_bytes<E: Error>(self, b: &[u8]) -> Result<V, E> {
        (self.0)(b).map_err(E::custom)
    }
}

/// `Vec<f64>` as runs of `+0.0` and of other values.
pub(crate) mod zero_runs {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// The encoded form: the length, then `(zeros, values)` run lengths in
    /// order, and the values of the value runs.
    #[derive(Serialize, Deserialize)]
    struct Runs {
        len: u64,
        runs: Vec<(u64, u64)>,
        #[serde(with = "super::f64_le")]
        values: Vec<f64>,
    }

    pub(crate) fn serialize<S: Serializer>(v: &[f64], s: S) -> Result<S::Ok, S::Error> {
        let is_zero = |x: &f64| x.to_bits() == 0;
        let (mut runs, mut values, mut at) = (Vec::new(), Vec::new(), 0);
        while at < v.len() {
            let zeros = v[at..].iter().take_while(|x| is_zero(x)).count();
            let taken = v[at + zeros..].iter().take_while(|x| !is_zero(x)).count();
            values.extend_from_slice(&v[at + zeros..at + zeros + taken]);
            runs.push((zeros as u64, taken as u64));
            at += zeros + taken;
        }
        Runs { len: v.len() as u64, runs, values }.serialize(s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
        use serde::de::Error;
        let Runs { len, runs, values } = Runs::deserialize(d)?;
        let len = usize::try_from(len).map_err(D::Error::custom)?;
        let mut out = Vec::with_capacity(len);
        let mut rest = &values[..];
        for (zeros, taken) in runs {
            let zeros = usize::try_from(zeros).map_err(D::Error::custom)?;
            let taken = usize::try_from(taken).map_err(D::Error::custom)?;
            if zeros > len - out.len() || taken > rest.len().min(len - out.len() - zeros) {
                return Err(D::Error::custom("zero runs longer than their vector"));
            }
            out.resize(out.len() + zeros, 0.0);
            out.extend_from_slice(&rest[..taken]);
            rest = &rest[taken..];
        }
        if out.len() != len || !rest.is_empty() {
            return Err(D::Error::custom("zero runs shorter than their vector"));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Runs(#[serde(with = "super::zero_runs")] Vec<f64>);

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Le(#[serde(with = "super::f64_le")] Vec<f64>);

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Bytes(#[serde(with = "super::bytes")] Vec<u8>);

    fn bits(v: &[f64]) -> Vec<u64> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    #[test]
    fn every_value_comes_back_with_its_bits() {
        let cases = [
            vec![],
            vec![0.0; 5],
            vec![1.0, -0.0, 0.0, 0.0, f64::NAN, 2.5, 0.0, f64::MIN_POSITIVE / 2.0, f64::INFINITY],
            (0..1000).map(|i| if i % 7 == 0 { i as f64 } else { 0.0 }).collect(),
            (1..100).map(|i| i as f64 / 3.0).collect(),
        ];
        for v in cases {
            let back: Runs = postcard::from_bytes(&postcard::to_stdvec(&Runs(v.clone())).unwrap()).unwrap();
            assert_eq!(bits(&back.0), bits(&v));
            let back: Le = postcard::from_bytes(&postcard::to_stdvec(&Le(v.clone())).unwrap()).unwrap();
            assert_eq!(bits(&back.0), bits(&v));
        }
        let b = Bytes((0..=255).collect());
        assert_eq!(postcard::from_bytes::<Bytes>(&postcard::to_stdvec(&b).unwrap()).unwrap(), b);
        // Mostly zeros: about the touched values' bytes.
        let sparse: Vec<f64> = (0..100_000).map(|i| if i % 100 == 0 { 1.5 } else { 0.0 }).collect();
        assert!(postcard::to_stdvec(&Runs(sparse)).unwrap().len() < 1_000 * 8 + 3_000);
    }

    #[test]
    fn encodings_that_do_not_fit_their_length_are_refused() {
        #[derive(serde::Serialize)]
        struct Raw {
            len: u64,
            runs: Vec<(u64, u64)>,
            #[serde(with = "super::f64_le")]
            values: Vec<f64>,
        }
        for raw in [
            Raw { len: 2, runs: vec![(3, 0)], values: vec![] },
            Raw { len: 3, runs: vec![(1, 2)], values: vec![1.0] },
            Raw { len: 3, runs: vec![(1, 1)], values: vec![1.0] },
            Raw { len: 1, runs: vec![(0, 1)], values: vec![1.0, 2.0] },
            Raw { len: 4, runs: vec![(u64::MAX, 1)], values: vec![1.0] },
        ] {
            assert!(postcard::from_bytes::<Runs>(&postcard::to_stdvec(&raw).unwrap()).is_err());
        }
        // Bytes that are not whole f64 values.
        let seven = postcard::to_stdvec(&serde_bytes_of(&[0u8; 7])).unwrap();
        assert!(postcard::from_bytes::<Le>(&seven).is_err());
    }

    /// Bytes serialised as a byte string.
    fn serde_bytes_of(b: &[u8]) -> impl serde::Serialize + '_ {
        struct B<'a>(&'a [u8]);
        impl serde::Serialize for B<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_bytes(self.0)
            }
        }
        B(b)
    }
}
