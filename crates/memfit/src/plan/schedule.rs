//! How a job over rows cuts its work ([`RowSchedule`]): rows per read
//! block and per tile, the initialisation sample, component groups, and
//! the passes over the data.

use std::fmt;

use super::{SampleLayout, Schedule, TILE_ROWS};

/// The schedule of a job over rows (k-means, mixtures, the kernels): read
/// blocks, compute tiles and passes.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RowSchedule {
    /// Rows per read block during the iterations.
    pub block_rows: usize,
    /// Number of read blocks per pass.
    pub n_blocks: usize,
    /// Rows per read block during validation and initialisation.
    pub scan_block_rows: usize,
    /// Rows per compute tile inside a block (for mixtures, the E-step's).
    pub tile_rows: usize,
    /// Rows per tile of the nearest-centre kernel (0 when it is not used).
    pub assign_tile_rows: usize,
    /// Centres per compute tile.
    pub k_tile: usize,
    /// The initialisation sample: its rows (0 when none is drawn), in
    /// memory or spilled to a scratch file.
    pub init_sample: SampleLayout,
    /// Upper bound on passes over the data.
    pub max_passes: u64,
    /// How `max_passes` is made up.
    pub passes_detail: String,
    /// Mixtures whose components' parameters do not fit the limit together:
    /// how they are grouped (`None`: all in memory).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub component_groups: Option<ComponentGroups>,
    /// Bounded k-means: where the per-row bounds live (`Some(true)`: an
    /// unnamed scratch file; `None`: plain Lloyd passes, no bounds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bounds_on_disk: Option<bool>,
}

/// A mixture's components processed in groups, their parameters on disk.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ComponentGroups {
    /// Number of groups.
    pub count: usize,
    /// Components per group (the last may have fewer).
    pub size: usize,
    /// Whether the per-row log-sum-exp state is in a scratch file.
    pub row_state_on_disk: bool,
    /// Bytes in scratch files (parameters and, when on disk, row states).
    pub scratch_bytes: u64,
    /// Passes over the data per EM iteration (`3 · count − 2`; 0 for a
    /// prediction).
    pub passes_per_iteration: u64,
}

impl RowSchedule {
    /// One pass over `n_samples` rows in blocks of `block_rows` rows, in
    /// tiles of [`TILE_ROWS`].
    pub fn one_pass(block_rows: usize, n_samples: usize) -> Self {
        RowSchedule {
            block_rows,
            n_blocks: n_samples.div_ceil(block_rows.max(1)),
            scan_block_rows: block_rows,
            tile_rows: TILE_ROWS,
            assign_tile_rows: 0,
            k_tile: 0,
            init_sample: SampleLayout::default(),
            max_passes: 1,
            passes_detail: "1 pass".into(),
            component_groups: None,
            bounds_on_disk: None,
        }
    }
}

impl Schedule for RowSchedule {
    const PHASES: &'static str = "buffers of different phases never coexist, the larger phase counts";

    fn explain(&self, threads: usize, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Jobs without centres (a scatter, a quadratic form) tile rows only.
        let tile = if self.k_tile == 0 {
            format!("{} rows", self.tile_rows)
        } else {
            format!("{} rows × {} centres", self.tile_rows, self.k_tile)
        };
        writeln!(
            f,
            "rows per block: {} ({} blocks per pass); tile: {tile}; threads: {threads}",
            self.block_rows, self.n_blocks
        )?;
        match self.init_sample {
            SampleLayout { rows: 0, .. } => {}
            SampleLayout { rows, piece_rows: None, .. } => writeln!(f, "init sample: {rows} rows in memory")?,
            SampleLayout { rows, piece_rows: Some(p) } => writeln!(
                f,
                "init sample: {rows} rows in unnamed scratch files read {p} rows at a time (the same rows as in memory)"
            )?,
        }
        if let Some(on_disk) = self.bounds_on_disk {
            let at = if on_disk { "in an unnamed scratch file" } else { "in memory" };
            writeln!(f, "bounded iterations: per-row label and lower bound {at} (Hamerly; rows they clear skip the other distances)")?;
        }
        let Some(g) = &self.component_groups else { return Ok(()) };
        let s = if g.size == 1 { "" } else { "s" };
        if g.passes_per_iteration == 0 {
            let states = if g.row_state_on_disk {
                format!(
                    "; per-row log-sum-exp states on disk: {} B ({})",
                    g.scratch_bytes,
                    super::format_bytes(g.scratch_bytes)
                )
            } else {
                String::new()
            };
            writeln!(
                f,
                "component groups: {} of {} component{s}, their factors read from the model one group at a time{states}",
                g.count, g.size
            )
        } else {
            writeln!(
                f,
                "component groups: {} of {} component{s}; parameters{} on disk: {} B ({}) in unnamed scratch files; {} passes per EM iteration",
                g.count,
                g.size,
                if g.row_state_on_disk { " and per-row log-sum-exp states" } else { "" },
                g.scratch_bytes,
                super::format_bytes(g.scratch_bytes),
                g.passes_per_iteration
            )
        }
    }

    fn passes(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "passes over the data: at most {} ({})", self.max_passes, self.passes_detail)
    }
}
