"""The Model tab: build a model from a config or load one, and see where every parameter lives."""
