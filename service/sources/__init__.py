"""Sources: crawler, archive readers, simulator, and the normaliser to canonical events."""
