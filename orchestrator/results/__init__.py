"""What a run concludes: result documents, the report with its denominators, the Parquet export."""
