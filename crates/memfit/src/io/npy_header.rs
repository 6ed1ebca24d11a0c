//! Parsing and writing the `.npy` header (format versions 1.0, 2.0 and 3.0).
//!
//! Reference: NumPy's `numpy/lib/format.py` and NEP 1. The header is the
//! magic `\x93NUMPY`, a major and minor version byte, a little-endian header
//! length (2 bytes in v1, 4 bytes in v2/v3), then a Python dict literal such
//! as `{'descr': '<f8', 'fortran_order': False, 'shape': (3, 2), }`
//! padded with spaces and a newline so the data starts 64-byte aligned.

use super::dtype::{Dtype, Endian};

/// The magic bytes every `.npy` file starts with.
pub const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// A parsed `.npy` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpyHeader {
    /// Element type.
    pub dtype: Dtype,
    /// Byte order of the elements.
    pub endian: Endian,
    /// `true` when the data is stored column-major (Fortran order).
    pub fortran_order: bool,
    /// Array shape, outermost first.
    pub shape: Vec<usize>,
    /// Byte offset of the first data byte from the start of the file.
    pub data_offset: u64,
}

impl NpyHeader {
    /// Number of elements (product of the shape; 1 for a 0-d array).
    ///
    /// Returns `None` on overflow.
    pub fn n_elements(&self) -> Option<u64> {
        self.shape.iter().try_fold(1u64, |acc, &s| acc.checked_mul(s as u64))
    }

    /// Bytes of data the header promises, or `None` on overflow.
    pub fn data_bytes(&self) -> Option<u64> {
        self.n_elements()?.checked_mul(self.dtype.itemsize() as u64)
    }
}

/// Why a header could not be parsed. `Unsupported` carries the dtype
/// descriptor when the header is well formed but the dtype is not one we read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderError {
    /// Malformed header; the string says what is wrong.
    Malformed(String),
    /// Well-formed header with a dtype memfit does not read.
    Unsupported(String),
    /// Fewer bytes than the header needs.
    Short,
}

/// How many bytes to read before [`parse_header`] can tell the full header
/// length: magic (6) + version (2) + length field (up to 4).
pub const PREAMBLE_BYTES: usize = 12;

/// Returns the total header length (preamble + dict) from the first
/// [`PREAMBLE_BYTES`] bytes of a file.
///
/// # Errors
/// [`HeaderError::Malformed`] when the magic or the version is wrong,
/// [`HeaderError::Short`] when fewer than 10 bytes are given.
pub fn header_len(preamble: &[u8]) -> Result<usize, HeaderError> {
    if preamble.len() < 8 {
        return Err(HeaderError::Short);
    }
    if &preamble[..6] != MAGIC {
        return Err(HeaderError::Malformed("the file does not start with the .npy magic \\x93NUMPY".into()));
    }
    match preamble[6] {
        1 => {
            if preamble.len() < 10 {
                return Err(HeaderError::Short);
            }
            Ok(10 + u16::from_le_bytes([preamble[8], preamble[9]]) as usize)
        }
        2 | 3 => {
            if preamble.len() < 12 {
                return Err(HeaderError::Short);
            }
            let len = u32::from_le_bytes([preamble[8], preamble[9], preamble[10], preamble[11]]) as usize;
            Ok(12 + len)
        }
        v => Err(HeaderError::Malformed(format!("unknown format version {v}.{}", preamble[7]))),
    }
}

/// Parses a complete header (the first [`header_len`] bytes of the file).
///
/// # Errors
/// [`HeaderError::Malformed`] for a bad magic, version, dict syntax, missing
/// keys or a negative/non-integer shape; [`HeaderError::Unsupported`] for a
/// dtype outside [`Dtype`]; [`HeaderError::Short`] when `bytes` is shorter
/// than the length field says.
pub fn parse_header(bytes: &[u8]) -> Result<NpyHeader, HeaderError> {
    let total = header_len(bytes)?;
    if bytes.len() < total {
        return Err(HeaderError::Short);
    }
    let dict_start = if bytes[6] == 1 { 10 } else { 12 };
    let text = if bytes[6] == 3 {
        std::str::from_utf8(&bytes[dict_start..total])
            .map_err(|_| HeaderError::Malformed("header is not UTF-8".into()))?
    } else {
        std::str::from_utf8(&bytes[dict_start..total])
            .ok()
            .filter(|s| s.is_ascii())
            .ok_or_else(|| HeaderError::Malformed("header is not ASCII".into()))?
    };
    let dict = DictParser { s: text.as_bytes(), i: 0 }.parse()?;
    let mut descr = None;
    let mut fortran = None;
    let mut shape = None;
    for (key, value) in dict {
        match (key.as_str(), value) {
            ("descr", Value::Str(s)) => descr = Some(s),
            ("descr", _) => return Err(HeaderError::Unsupported("(a structured or subarray dtype)".into())),
            ("fortran_order", Value::Bool(b)) => fortran = Some(b),
            ("shape", Value::Tuple(t)) => shape = Some(t),
            ("fortran_order" | "shape", _) => {
                return Err(HeaderError::Malformed(format!("'{key}' has a value of the wrong type")))
            }
            (k, _) => {
                return Err(HeaderError::Malformed(format!(
                    "unknown key '{k}' (a .npy header holds 'descr', 'fortran_order' and 'shape' only)"
                )))
            }
        }
    }
    let descr = descr.ok_or_else(|| HeaderError::Malformed("missing 'descr'".into()))?;
    let fortran_order = fortran.ok_or_else(|| HeaderError::Malformed("missing 'fortran_order'".into()))?;
    let shape = shape.ok_or_else(|| HeaderError::Malformed("missing 'shape'".into()))?;
    let (dtype, endian) = Dtype::from_descr(&descr).ok_or(HeaderError::Unsupported(descr))?;
    Ok(NpyHeader { dtype, endian, fortran_order, shape, data_offset: total as u64 })
}

/// Builds a version 1.0 header (or 2.0 if the dict needs more than 65535
/// bytes) for a C-order little-endian array, padded so that the data starts
/// on a 64-byte boundary as NumPy does.
pub fn write_header(dtype: Dtype, shape: &[usize]) -> Vec<u8> {
    let shape_str = match shape {
        [n] => format!("({n},)"),
        _ => format!("({})", shape.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")),
    };
    let dict = format!("{{'descr': '{}', 'fortran_order': False, 'shape': {shape_str}, }}", dtype.descr());
    let (version, pre) = if dict.len() + 11 < 65536 { (1u8, 10) } else { (2u8, 12) };
    let unpadded = pre + dict.len() + 1;
    let total = unpadded.div_ceil(64) * 64;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[version, 0]);
    let hlen = total - pre;
    if version == 1 {
        out.extend_from_slice(&(hlen as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(hlen as u32).to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    out.resize(total - 1, b' ');
    out.push(b'\n');
    out
}

enum Value {
    Str(String),
    Bool(bool),
    Tuple(Vec<usize>),
    Other,
}

/// A parser for the subset of Python literal syntax NumPy writes in headers.
struct DictParser<'a> {
    s: &'a [u8],
    i: usize,
}

impl DictParser<'_> {
    fn err<T>(&self, what: &str) -> Result<T, HeaderError> {
        // A dict cut short most likely has a wrong length field.
        let cut = if self.i >= self.s.len() { " (the header ends there: its length field may be wrong)" } else { "" };
        Err(HeaderError::Malformed(format!("{what} at header byte {}{cut}", self.i)))
    }
    fn ws(&mut self) {
        while self.i < self.s.len() && (self.s[self.i] as char).is_ascii_whitespace() {
            self.i += 1;
        }
    }
    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn parse(mut self) -> Result<Vec<(String, Value)>, HeaderError> {
        if !self.eat(b'{') {
            return self.err("expected '{'");
        }
        let mut items = Vec::new();
        loop {
            if self.eat(b'}') {
                break;
            }
            let key = self.string()?;
            if !self.eat(b':') {
                return self.err("expected ':'");
            }
            let value = self.value(&key)?;
            items.push((key, value));
            if self.eat(b',') {
                continue;
            }
            if self.eat(b'}') {
                break;
            }
            return self.err("expected ',' or '}'");
        }
        self.ws();
        if self.i != self.s.len() {
            return self.err("unexpected text after the dict");
        }
        Ok(items)
    }
    fn string(&mut self) -> Result<String, HeaderError> {
        self.ws();
        let Some(&q) = self.s.get(self.i) else {
            return self.err("unexpected end");
        };
        if q != b'\'' && q != b'"' {
            return self.err("expected a quoted string");
        }
        let start = self.i + 1;
        let Some(len) = self.s[start..].iter().position(|&c| c == q) else {
            return self.err("unterminated string");
        };
        self.i = start + len + 1;
        Ok(String::from_utf8_lossy(&self.s[start..start + len]).into_owned())
    }
    /// The value of `key`: `shape`'s tuple of integers is read; a tuple or
    /// list under another key (a subarray or structured dtype) is skipped,
    /// as is a number or `None`, so that the caller names what is wrong.
    fn value(&mut self, key: &str) -> Result<Value, HeaderError> {
        self.ws();
        match self.s.get(self.i) {
            Some(b'\'' | b'"') => Ok(Value::Str(self.string()?)),
            Some(b'(') if key == "shape" => {
                self.i += 1;
                let mut dims = Vec::new();
                loop {
                    if self.eat(b')') {
                        break;
                    }
                    self.ws();
                    let start = self.i;
                    while self.i < self.s.len() && self.s[self.i].is_ascii_digit() {
                        self.i += 1;
                    }
                    // Python 2 era files may write `3L`.
                    let digits = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
                    if self.s.get(self.i) == Some(&b'L') {
                        self.i += 1;
                    }
                    let Ok(d) = digits.parse::<usize>() else {
                        return self.err("expected a non-negative integer in 'shape'");
                    };
                    dims.push(d);
                    if self.eat(b',') {
                        continue;
                    }
                    if self.eat(b')') {
                        break;
                    }
                    return self.err("expected ',' or ')' in 'shape'");
                }
                Ok(Value::Tuple(dims))
            }
            Some(b'T') if self.s[self.i..].starts_with(b"True") => {
                self.i += 4;
                Ok(Value::Bool(true))
            }
            Some(b'F') if self.s[self.i..].starts_with(b"False") => {
                self.i += 5;
                Ok(Value::Bool(false))
            }
            Some(b'[' | b'(') => {
                // A structured or subarray dtype: skip the balanced list so
                // the caller can report it as unsupported rather than
                // malformed.
                let mut depth = 0usize;
                while let Some(&c) = self.s.get(self.i) {
                    self.i += 1;
                    match c {
                        b'[' | b'(' => depth += 1,
                        b']' | b')' => {
                            depth -= 1;
                            if depth == 0 {
                                return Ok(Value::Other);
                            }
                        }
                        _ => {}
                    }
                }
                self.err("unterminated list")
            }
            Some(c) if c.is_ascii_alphanumeric() || matches!(c, b'-' | b'+' | b'.') => {
                while self.s.get(self.i).is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'+' | b'.')) {
                    self.i += 1;
                }
                Ok(Value::Other)
            }
            _ => self.err("unexpected value"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v1(dict: &str) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
        out.extend_from_slice(dict.as_bytes());
        out
    }

    #[test]
    fn parses_numpy_v1_header() {
        let h =
            parse_header(&v1("{'descr': '<f8', 'fortran_order': False, 'shape': (3000000, 3), }          \n")).unwrap();
        assert_eq!(h.dtype, Dtype::F64);
        assert_eq!(h.endian, Endian::Little);
        assert!(!h.fortran_order);
        assert_eq!(h.shape, vec![3_000_000, 3]);
        assert_eq!(h.data_bytes(), Some(72_000_000));
    }

    #[test]
    fn parses_all_supported_descrs_and_orders() {
        for (descr, dt) in [
            ("|u1", Dtype::U8),
            ("<i2", Dtype::I16),
            ("<i4", Dtype::I32),
            ("<i8", Dtype::I64),
            ("<u4", Dtype::U32),
            (">u8", Dtype::U64),
            ("<f2", Dtype::F16),
            ("<f4", Dtype::F32),
            (">f8", Dtype::F64),
        ] {
            let h = parse_header(&v1(&format!("{{\"descr\":\"{descr}\",\"fortran_order\":True,\"shape\":(5,)}}\n")))
                .unwrap();
            assert_eq!(h.dtype, dt);
            assert!(h.fortran_order);
            assert_eq!(h.shape, vec![5]);
        }
    }

    #[test]
    fn parses_v2_and_v3() {
        for version in [2u8, 3] {
            let dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }\n";
            let mut b = MAGIC.to_vec();
            b.extend_from_slice(&[version, 0]);
            b.extend_from_slice(&(dict.len() as u32).to_le_bytes());
            b.extend_from_slice(dict.as_bytes());
            let h = parse_header(&b).unwrap();
            assert_eq!((h.dtype, h.shape.clone(), h.data_offset), (Dtype::F32, vec![2, 4], b.len() as u64));
        }
    }

    #[test]
    fn roundtrips_written_header_aligned() {
        for shape in [vec![7usize], vec![3, 2], vec![0, 5], vec![123_456_789, 784]] {
            let b = write_header(Dtype::I32, &shape);
            assert_eq!(b.len() % 64, 0);
            let h = parse_header(&b).unwrap();
            assert_eq!(h.shape, shape);
            assert_eq!(h.dtype, Dtype::I32);
            assert_eq!(h.data_offset, b.len() as u64);
        }
    }

    #[test]
    fn rejects_corrupt_headers() {
        assert!(matches!(header_len(b"\x93NUMP"), Err(HeaderError::Short)));
        assert!(matches!(header_len(b"PK\x03\x04zipfile!"), Err(HeaderError::Malformed(_))));
        assert!(matches!(header_len(b"\x93NUMPY\x09\x00\x10\x00"), Err(HeaderError::Malformed(_))));
        let full = v1("{'descr': '<f8', 'fortran_order': False, 'shape': (3, 2), }\n");
        // Truncated inside the dict.
        assert!(matches!(parse_header(&full[..full.len() - 20]), Err(HeaderError::Short)));
        for bad in [
            "{'descr': '<f8', 'fortran_order': False}\n",
            "{'descr': '<f8', 'fortran_order': 0, 'shape': (3,)}\n",
            "{'descr': '<f8', 'fortran_order': False, 'shape': (-3, 2)}\n",
            "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 2)} trailing",
            "'descr': '<f8'",
            "{'descr': '<f8, 'fortran_order': False, 'shape': (3,)}",
        ] {
            assert!(matches!(parse_header(&v1(bad)), Err(HeaderError::Malformed(_))), "{bad}");
        }
    }

    #[test]
    fn reports_unsupported_dtypes() {
        for descr in ["<c16", "<U10", "|O", "<f16"] {
            let r = parse_header(&v1(&format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': (3,), }}\n")));
            assert_eq!(r, Err(HeaderError::Unsupported(descr.to_string())));
        }
        let r = parse_header(&v1("{'descr': [('a', '<f8'), ('b', '<i4')], 'fortran_order': False, 'shape': (3,), }\n"));
        assert!(matches!(r, Err(HeaderError::Unsupported(_))));
        // A subarray dtype is named as a dtype, not as a bad shape.
        let r = parse_header(&v1("{'descr': ('<f8', (2,)), 'fortran_order': False, 'shape': (3,), }\n"));
        assert_eq!(r, Err(HeaderError::Unsupported("(a structured or subarray dtype)".into())));
    }

    #[test]
    fn names_unknown_keys_and_cut_headers() {
        let r = parse_header(&v1("{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), 'foo': 1}\n"));
        let Err(HeaderError::Malformed(why)) = r else { panic!("{r:?}") };
        assert!(why.starts_with("unknown key 'foo'"), "{why}");
        let r = parse_header(&v1("{'descr': '<f8', 'fortran_order': None, 'shape': (3, 4)}\n"));
        assert_eq!(r, Err(HeaderError::Malformed("'fortran_order' has a value of the wrong type".into())));
        let r = parse_header(&v1("{'descr': "));
        let Err(HeaderError::Malformed(why)) = r else { panic!("{r:?}") };
        assert!(why.ends_with("its length field may be wrong)"), "{why}");
    }
}
