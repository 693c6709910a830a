"""The Compare tab: two texts, or two models, scored token by token."""
