//! The initialisation sample's layout: how many rows (fixed by the data
//! and the fit, never by the memory limit) and whether they are held in
//! memory or spilled to scratch files.

use crate::exec::SAMPLE_CHUNK;

/// How a fit holds its initialisation sample: its size, fixed by the data
/// and the fit's parameters (never by the memory limit), and whether its
/// rows are in memory or spilled to scratch files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SampleLayout {
    /// Rows in the sample (0 when none is drawn).
    pub rows: usize,
    /// Rows per read and write piece when the rows are in scratch files
    /// (`None`: in memory).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub piece_rows: Option<usize>,
}

impl SampleLayout {
    /// Bytes in memory per row of a sample held in memory, beside its `d`
    /// values: the heap entry (key, row, slot) and weight while it is
    /// drawn, and while it is put in row order a new weight, slot and row
    /// index (then weight, row index and running distance while used).
    pub const fn bytes_per_row(d: usize) -> u64 {
        56 + (d * 8) as u64
    }

    /// Bytes of the buffers a spilled sample holds, none of them per row:
    /// `threads` readers and one writer of `piece_rows` rows each, `extra_rows`
    /// rows read one by one (such as the candidates of a k-means++ step), a
    /// chunk of weights and one of running distances per thread, and
    /// `extra_rows + 2` doubles per chunk of `rows` (chunk sums).
    pub const fn spilled_buffer_bytes(
        rows: usize,
        d: usize,
        threads: usize,
        piece_rows: usize,
        extra_rows: usize,
    ) -> u64 {
        (((threads + 1) * piece_rows + extra_rows) * d * 8
            + piece_rows * 2 * 8
            + threads * 2 * SAMPLE_CHUNK * 8
            + rows.div_ceil(SAMPLE_CHUNK) * (extra_rows + 2) * 8) as u64
    }

    /// Largest read piece of a spilled sample.
    const MAX_PIECE_ROWS: usize = 4096;

    /// Bytes of the selection of the kept rows' largest key before the
    /// pass (`crate::exec::nth_smallest_key`): a histogram of 2⁸ counts per
    /// thread, and at most 2⁸ keys with their rows.
    pub const fn select_bytes(threads: usize) -> u64 {
        ((threads * 8 + 16) << 8) as u64
    }

    /// Bytes the layout holds in memory for `d` features, `threads` readers
    /// and `extra_rows` rows read one by one.
    pub fn bytes(&self, d: usize, threads: usize, extra_rows: usize) -> u64 {
        Self::select_bytes(threads)
            + match self.piece_rows {
                None => self.rows as u64 * Self::bytes_per_row(d),
                Some(p) => Self::spilled_buffer_bytes(self.rows, d, threads, p, extra_rows),
            }
    }

    /// The layout of a sample of `rows` rows within `room` bytes: in memory
    /// when it fits, else spilled with the largest read pieces that fit
    /// (halved down to one row; rows read one at a time make k-means++ ten
    /// times slower). The rows are the same either way: the caller has
    /// checked that `room` holds at least [`Self::least_bytes`].
    pub fn within(rows: usize, d: usize, threads: usize, extra_rows: usize, room: u64) -> Self {
        let memory = SampleLayout { rows, piece_rows: None };
        if rows == 0 || memory.bytes(d, threads, extra_rows) <= room {
            return memory;
        }
        let mut piece = Self::MAX_PIECE_ROWS.min(rows);
        while piece > 1 && (SampleLayout { rows, piece_rows: Some(piece) }).bytes(d, threads, extra_rows) > room {
            piece /= 2;
        }
        SampleLayout { rows, piece_rows: Some(piece) }
    }

    /// The fewest bytes a sample of `rows` rows can be held in (spilled, one
    /// row per piece, or in memory if that is less).
    pub fn least_bytes(rows: usize, d: usize, threads: usize, extra_rows: usize) -> u64 {
        let spilled = SampleLayout { rows, piece_rows: Some(1) }.bytes(d, threads, extra_rows);
        SampleLayout { rows, piece_rows: None }.bytes(d, threads, extra_rows).min(spilled)
    }

    /// What the layout holds, for a plan's ledger.
    pub fn describe(&self, d: usize, threads: usize, extra_rows: usize) -> String {
        let rows = self.rows;
        match self.piece_rows {
            None => format!("{rows} rows × {} B (values, weight, key)", Self::bytes_per_row(d)),
            Some(p) => format!(
                "{rows} rows in scratch files; {} B of buffers ({} × {p} rows read or written at a time, {extra_rows} candidates, {threads} × {SAMPLE_CHUNK} weights and distances)",
                Self::spilled_buffer_bytes(rows, d, threads, p, extra_rows),
                threads + 1,
            ),
        }
    }

    /// Bytes the sample puts in scratch files at most: values, weights, row
    /// indices and k-means++'s running distances.
    pub fn disk_bytes(&self, d: usize) -> u64 {
        if self.piece_rows.is_some() {
            (self.rows * (d + 3) * 8) as u64
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spilled_sample_keeps_its_rows_and_reads_in_large_pieces() {
        // 1,280,000 wanted rows of 3 features (k = 5,000), 2 threads, 10
        // candidates, 1 MiB of room: every row is kept, read in large pieces.
        let (d, threads, extra) = (3, 2, 10);
        let l = SampleLayout::within(1_280_000, d, threads, extra, 1 << 20);
        assert_eq!(l.rows, 1_280_000);
        assert!(l.piece_rows.is_some_and(|p| p >= 1024), "{l:?}");
        assert!(l.bytes(d, threads, extra) <= 1 << 20);
        // A room that holds only the least bytes reads rows one at a time.
        let least = SampleLayout::least_bytes(1_280_000, d, threads, extra);
        assert!(least < 400 << 10, "{least}");
        let l = SampleLayout::within(1_280_000, d, threads, extra, least);
        assert_eq!((l.rows, l.piece_rows), (1_280_000, Some(1)));
        // A room that holds it keeps it in memory.
        let big = SampleLayout::within(1_280_000, d, threads, extra, 1 << 30);
        assert_eq!(big.piece_rows, None);
    }
}
