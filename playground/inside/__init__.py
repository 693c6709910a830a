"""Interpretability around an unchanged model: hooks, lenses, attribution, effects, scoring."""
