"""Interface text in English and 中文 (a leaf: imports nothing else of the project)."""
