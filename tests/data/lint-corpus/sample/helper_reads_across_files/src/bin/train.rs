use helper_reads_across_files::metrics::final_report;
use helper_reads_across_files::train::Trainer;

fn main() -> candle_core::Result<()> {
    let (mut trainer, epochs, batches, last) = setup()?;
    for _epoch in 0..epochs {
        trainer.fit(&batches)?;
    }
    // Read once, after training.
    final_report(&last)?;
    Ok(())
}
