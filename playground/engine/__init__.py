"""The model itself: config, GPT-2 modules, tokenizer, sampling, weights in and out, int8, fast readout."""
