"""Demo data shipped with the package."""
