//! Placeholder until the einsum module lands (naive, explicit subscripts only).
#![allow(missing_docs, clippy::missing_errors_doc, clippy::missing_panics_doc)]
use std::collections::BTreeMap;
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscripts {
    pub inputs: Vec<Vec<u8>>,
    pub output: Vec<u8>,
}
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EinsumError(String);
impl std::fmt::Display for EinsumError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
pub fn parse(subscripts: &str, shapes: &[Vec<usize>]) -> Result<Subscripts, EinsumError> {
    let (ins, out) = subscripts.split_once("->").ok_or_else(|| EinsumError("explicit only".into()))?;
    let inputs: Vec<Vec<u8>> = ins.split(',').map(|s| s.trim().bytes().collect()).collect();
    if inputs.len() != shapes.len() {
        return Err(EinsumError(
            "more operands provided to einstein sum function than specified in the subscripts string".into(),
        ));
    }
    for (l, s) in inputs.iter().zip(shapes) {
        if l.len() != s.len() {
            return Err(EinsumError("operand has more dimensions than subscripts given in einstein sum".into()));
        }
    }
    Ok(Subscripts { inputs, output: out.trim().bytes().collect() })
}
pub fn label_sizes(sub: &Subscripts, shapes: &[Vec<usize>]) -> BTreeMap<u8, usize> {
    let mut m = BTreeMap::new();
    for (l, s) in sub.inputs.iter().zip(shapes) {
        for (&c, &n) in l.iter().zip(s) {
            let e = m.entry(c).or_insert(n);
            if *e == 1 {
                *e = n;
            }
        }
    }
    m
}
#[derive(Debug, Clone)]
pub struct Path {
    pub steps: Vec<(usize, usize)>,
    pub peak_bytes: u64,
    pub flops: f64,
    pub intermediates: Vec<(Vec<u8>, u64)>,
}
pub fn contraction_path(_sub: &Subscripts, _sizes: &BTreeMap<u8, usize>) -> Path {
    Path { steps: Vec::new(), peak_bytes: 0, flops: 0.0, intermediates: Vec::new() }
}
#[derive(Debug, Clone, PartialEq)]
pub struct Dense {
    pub shape: Vec<usize>,
    pub data: Vec<f64>,
}
pub fn contract(sub: &Subscripts, operands: &[Dense], _path: &Path) -> Dense {
    let mut sizes = BTreeMap::new();
    for (l, o) in sub.inputs.iter().zip(operands) {
        for (&c, &n) in l.iter().zip(&o.shape) {
            sizes.insert(c, n);
        }
    }
    let labels: Vec<u8> = sizes.keys().copied().collect();
    let dims: Vec<usize> = labels.iter().map(|c| sizes[c]).collect();
    let oshape: Vec<usize> = sub.output.iter().map(|c| sizes[c]).collect();
    let mut out = vec![0.0; oshape.iter().product()];
    let total: usize = dims.iter().product();
    let mut idx = vec![0usize; labels.len()];
    let pos = |c: u8| labels.iter().position(|&x| x == c).unwrap();
    for flat in 0..total {
        let mut r = flat;
        for k in (0..dims.len()).rev() {
            idx[k] = r % dims[k];
            r /= dims[k];
        }
        let mut p = 1.0;
        for (l, o) in sub.inputs.iter().zip(operands) {
            let mut off = 0;
            for (a, &c) in l.iter().enumerate() {
                off = off * o.shape[a] + idx[pos(c)];
            }
            p *= o.data[off];
        }
        let mut off = 0;
        for (a, &c) in sub.output.iter().enumerate() {
            off = off * oshape[a] + idx[pos(c)];
        }
        out[off] += p;
    }
    Dense { shape: oshape, data: out }
}
pub fn scratch_bytes(_sub: &Subscripts, _sizes: &BTreeMap<u8, usize>, _path: &Path) -> u64 {
    0
}
