"""foldline: runtime."""
