"""Interpretability around an unchanged model: hooks and interventions, lenses, attention statistics, scoring."""
