//! Atomic output files and folders: everything is written beside the
//! destination and put in place only when complete, so a failure (bad
//! input found late, a full disk, Ctrl-C) never leaves a half-written
//! output behind. On Linux files have no name until then (`O_TMPFILE`, see
//! `writer/staged.rs`), so a kill, SIGKILL included, leaves nothing either.

mod atomic;
mod disk_space;
mod folder;
mod npy;
mod paths;
mod staged;
pub(super) mod unfinished;

pub use atomic::{write_bytes_atomic, AtomicFile, WRITE_BUFFER_BYTES};
pub use disk_space::{check_disk_space, check_free_space, PlannedWrite};
pub use folder::AtomicFolder;
pub use npy::{npy_file_bytes, npy_writer_bytes, write_npy, NpyWriter, PositionedNpy};
pub use paths::check_output_path;
pub(super) use paths::resolve_output;
pub(crate) use paths::{check_name_length, missing_folder, probe_dir, resolved_path};
pub use paths::{check_outputs_distinct, is_model_folder, MODEL_JSON};
pub(super) use staged::hidden_prefix;
pub use unfinished::remove_unfinished_outputs;
pub(super) use unfinished::Unfinished;

/// The names in `dir`, sorted: what the writer tests see a write leave.
#[cfg(test)]
fn names(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}
