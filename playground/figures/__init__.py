"""Plotly figure builders: plain data in, ``go.Figure`` out (a leaf: imports nothing else of the project)."""
