"""foldline: signals."""
