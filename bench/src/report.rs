use crate::common::Args;
use anyhow::Result;
pub fn run(_args: &Args) -> Result<()> {
    Ok(())
}
