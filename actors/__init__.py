"""foldline: actors."""
