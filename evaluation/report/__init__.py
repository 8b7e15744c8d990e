"""What a finished run says: ``report.md``, plots, BD-rates, saving factors, the rate-compute-
quality trade-off and the column definitions. Reads result rows; encodes nothing."""
