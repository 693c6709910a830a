"""Interpretability around an unchanged model: hooks and interventions, lenses, attribution, effects, attention statistics, scoring."""
