//! The initialisation sample's layout: how many rows (fixed by the data
//! and the fit, never by the memory limit) and whether their values are
//! held in memory or spilled to a scratch file.

/// How a fit holds its initialisation sample: its size, fixed by the data
/// and the fit's parameters (never by the memory limit), and whether its
/// values are in memory or spilled to a scratch file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SampleLayout {
    /// Rows in the sample (0 when none is drawn).
    pub rows: usize,
    /// Rows per read piece when the values are in a scratch file (`None`:
    /// in memory).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub piece_rows: Option<usize>,
    /// The rows wanted when the memory limit cut the sample to `rows`
    /// (`None`: not cut).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut_from: Option<usize>,
}

impl SampleLayout {
    /// Bytes in memory per row of a spilled sample: the heap entry while it
    /// is drawn (key, row, slot), weights, and the row indices, weights and
    /// a running distance while it is used.
    pub const BYTES_PER_ROW_SPILLED: u64 = 48;

    /// Bytes in memory per row of a sample held in memory, with `d` features.
    pub const fn bytes_per_row(d: usize) -> u64 {
        Self::BYTES_PER_ROW_SPILLED + (d * 8) as u64
    }

    /// Bytes of the buffers a spilled sample's reader holds besides its rows
    /// (`threads` readers and one more for the rearrangement, `piece_rows`
    /// rows each, and `extra_rows` rows read one by one, such as the
    /// candidates of a k-means++ step).
    pub const fn spilled_buffer_bytes(d: usize, threads: usize, piece_rows: usize, extra_rows: usize) -> u64 {
        (((threads + 1) * piece_rows + extra_rows) * d * 8) as u64
    }

    /// Largest read piece of a spilled sample (k-means++ sums its
    /// potentials over chunks of this many rows).
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
        let rows = self.rows as u64;
        Self::select_bytes(threads)
            + match self.piece_rows {
                None => rows * Self::bytes_per_row(d),
                Some(p) => rows * Self::BYTES_PER_ROW_SPILLED + Self::spilled_buffer_bytes(d, threads, p, extra_rows),
            }
    }

    /// The layout of a sample of `rows` rows within `room` bytes: in memory
    /// when it fits, else spilled with the largest read pieces that fit
    /// (halved down to one row). When not even that fits, the sample is cut,
    /// the only case in which it, hence the result, depends on the memory
    /// limit (the caller warns): to the rows whose keys fill a quarter of
    /// `limit` (at least `least_rows`), a number that depends on the limit
    /// alone, not on the threads or the other buffers, so that a cut fit is
    /// still the same for any thread count; to as many rows as `room` holds
    /// when even that does not fit. Its read pieces are then the largest
    /// whose buffers take at most a quarter of `room` (rows read one at a
    /// time make k-means++ ten times slower), or one row.
    pub fn within(
        rows: usize,
        least_rows: usize,
        d: usize,
        threads: usize,
        extra_rows: usize,
        room: u64,
        limit: u64,
    ) -> Self {
        let memory = SampleLayout { rows, piece_rows: None, cut_from: None };
        if rows == 0 || memory.bytes(d, threads, extra_rows) <= room {
            return memory;
        }
        let mut piece = Self::MAX_PIECE_ROWS.min(rows);
        loop {
            let l = SampleLayout { rows, piece_rows: Some(piece), cut_from: None };
            if l.bytes(d, threads, extra_rows) <= room {
                return l;
            }
            if piece == 1 {
                break;
            }
            piece /= 2;
        }
        let least = least_rows.min(rows);
        let share = (limit / 4 / Self::BYTES_PER_ROW_SPILLED) as usize;
        let mut piece = Self::MAX_PIECE_ROWS.min(rows);
        loop {
            let l = Self::cut(rows, share.clamp(least, rows), piece);
            let buffers = Self::spilled_buffer_bytes(d, threads, piece, extra_rows);
            if (piece == 1 || buffers <= room / 4) && l.bytes(d, threads, extra_rows) <= room {
                return l;
            }
            if piece == 1 {
                break;
            }
            piece /= 2;
        }
        let buffers = Self::spilled_buffer_bytes(d, threads, 1, extra_rows) + Self::select_bytes(threads);
        let fit = room.saturating_sub(buffers) / Self::BYTES_PER_ROW_SPILLED;
        Self::cut(rows, (fit as usize).clamp(least, rows), 1)
    }

    /// A spilled sample of `kept` of the `wanted` rows, read `piece` rows at
    /// a time.
    fn cut(wanted: usize, kept: usize, piece: usize) -> Self {
        SampleLayout { rows: kept, piece_rows: Some(piece), cut_from: (kept < wanted).then_some(wanted) }
    }

    /// The fewest bytes a sample of `rows` rows can be held in (spilled, one
    /// row per piece, or in memory if that is less).
    pub fn least_bytes(rows: usize, d: usize, threads: usize, extra_rows: usize) -> u64 {
        let spilled = SampleLayout { rows, piece_rows: Some(1), cut_from: None }.bytes(d, threads, extra_rows);
        SampleLayout { rows, piece_rows: None, cut_from: None }.bytes(d, threads, extra_rows).min(spilled)
    }

    /// The warning a fit gives when the limit cut this sample (see
    /// [`Self::within`]).
    pub fn cut_warning(&self) -> Option<crate::warning::Warning> {
        self.cut_from.map(|wanted| crate::warning::Warning::InitSampleCut {
            wanted_rows: wanted,
            used_rows: self.rows,
            more_bytes: (wanted - self.rows) as u64 * Self::BYTES_PER_ROW_SPILLED,
        })
    }

    /// What the layout holds, for a plan's ledger.
    pub fn describe(&self, d: usize, threads: usize, extra_rows: usize) -> String {
        let rows = self.rows;
        match self.piece_rows {
            None => format!("{rows} rows × {} B (values, weight, key)", Self::bytes_per_row(d)),
            Some(p) => format!(
                "{rows} rows × {} B (key, weight; values in a scratch file) + {} B ({} × {p} rows read at a time, {extra_rows} candidates)",
                Self::BYTES_PER_ROW_SPILLED,
                Self::spilled_buffer_bytes(d, threads, p, extra_rows),
                threads + 1,
            ),
        }
    }

    /// Bytes the sample puts in scratch files at most (the values twice
    /// while they are rearranged into row order).
    pub fn disk_bytes(&self, d: usize) -> u64 {
        if self.piece_rows.is_some() {
            2 * (self.rows * d * 8) as u64
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_sample_keeps_pieces_of_many_rows() {
        // 115,200 wanted rows of 3 features, 2 threads, 8 candidates, 1 MiB
        // of room: cut, but read in large pieces rather than row by row.
        let (d, threads, extra) = (3, 2, 8);
        let l = SampleLayout::within(115_200, 450, d, threads, extra, 700 << 10, 1 << 20);
        assert_eq!(l.rows, (1 << 20) / 4 / 48, "{l:?}");
        assert!(l.piece_rows.is_some_and(|p| p >= 1024), "{l:?}");
        assert!(l.bytes(d, threads, extra) <= 700 << 10);
        // The cut depends on the limit alone: not on the threads or the room
        // the other buffers leave.
        for (t, room) in [(1, 900 << 10), (2, 500 << 10), (8, 400 << 10)] {
            assert_eq!(SampleLayout::within(115_200, 450, d, t, extra, room, 1 << 20).rows, l.rows);
        }
        // A room that holds only the least rows reads them one at a time.
        let least = SampleLayout::least_bytes(450, d, threads, extra);
        let l = SampleLayout::within(115_200, 450, d, threads, extra, least, 1 << 20);
        assert_eq!((l.rows, l.piece_rows), (450, Some(1)));
    }
}
