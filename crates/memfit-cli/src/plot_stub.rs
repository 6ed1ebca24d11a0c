pub fn scatter_png(
    _: &std::path::Path,
    _: &[f64],
    _: usize,
    _: &[u32],
    _: &[f64],
    _: usize,
    _: bool,
) -> anyhow::Result<()> {
    Ok(())
}
