"""Interpretability around an unchanged model: hooks, lenses, attention statistics, scoring."""
