"""The context policy: per-model projections, fold state, fit, layout, rendering, checkpoints,
caches and the recall index."""
