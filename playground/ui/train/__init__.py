"""The Train tab: train a small model, watch its loss, samples and attention heads form."""
