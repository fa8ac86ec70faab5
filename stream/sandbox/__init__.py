"""Sandboxed code evaluators (seed 001 §4): user code in Python or Node.js, confined by the kernel."""
